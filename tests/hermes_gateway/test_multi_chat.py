"""Several chats at once through the real hermes-gateway on Telegram (fake Bot API, scripted model).

Updates of different chats are handled at the same time; one chat's are handled in the order
they were sent. (``benchmarks/gateway_chats.py`` measures the same with 100 chats.)
"""

from __future__ import annotations

import json
import threading

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import OWNER, start

FRIEND = 5151
DOCUMENT = {"file_id": "doc1", "file_unique_id": "u1", "file_name": "notes.txt", "mime_type": "text/plain", "file_size": 11}


def answer(body: dict) -> dict:
    """The scripted model: it says which question it was asked."""
    asked = json.dumps([m for m in body.get("messages") or [] if m.get("role") == "user"][-1:])
    for which in ("first", "second", "hello"):
        if f"the {which} question" in asked:
            return {"text": f"Answer to the {which} question."}
    return {"text": "ok"}


def asked_about(model: ScriptedOpenAIServer, which: str) -> list[int]:
    return [i for i, r in enumerate(model.requests) if f"the {which} question" in json.dumps(r["messages"][-1:])]


def test_a_slow_download_in_one_chat_holds_up_no_other_chat_and_its_own_messages_keep_their_order(hermes_home, project, telegram):
    telegram.files["doc1"] = b"some notes\n"
    telegram.file_gate = threading.Event()
    try:
        with ScriptedOpenAIServer(answer) as model, start(hermes_home, project, telegram, model, allowed=(OWNER, FRIEND)):
            telegram.send_user_message(OWNER, "", document=DOCUMENT, caption="the first question")
            telegram.wait_for(lambda: telegram.file_requests == ["doc1"], 20, "the owner's download to start")
            telegram.send_user_message(OWNER, "the second question")
            telegram.send_user_message(FRIEND, "the hello question")
            # The friend is answered while the owner's file is still downloading ...
            telegram.wait_text(FRIEND, "Answer to the hello question.")
            # ... and the owner's second message waits for the first: neither reached the model yet.
            assert asked_about(model, "first") == [] and asked_about(model, "second") == []
            telegram.file_gate.set()
            telegram.wait_text(OWNER, "Answer to the second question.")
            first, second = asked_about(model, "first"), asked_about(model, "second")
    finally:
        telegram.file_gate.set()
    assert len(first) == 1 and len(second) == 1 and first[0] < second[0]
    assert "some notes" in json.dumps(model.requests[first[0]]["messages"][-1:])
    replies = [m["text"] for m in telegram.sent(OWNER) if m["text"].startswith("Answer")]
    assert replies == ["Answer to the first question.", "Answer to the second question."]
