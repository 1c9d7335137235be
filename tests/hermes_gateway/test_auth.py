"""Authorisation matrix additions, against the real hermes-gateway process and the fake Bot API.

Forwarded messages: the *sender* of an update is who is authorised, never the forward
origin. An allowed user forwarding a stranger's words is the allowed user talking (they chose
to pass those words on); a stranger forwarding an allowed user's message is still a stranger.
"""

from __future__ import annotations

import json
import time

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.telegram_server import FakeTelegram
from tests.hermes_gateway.harness import OWNER, STRANGER, settle, start

GROUP = -100400


def forwarded_from(telegram: FakeTelegram, user_id: int) -> dict:
    return {"forward_origin": {"type": "user", "date": int(time.time()) - 60, "sender_user": telegram.user(user_id, "Original")}}


def test_forwarded_message_the_sender_counts_not_the_forward_origin(hermes_home, project, telegram):
    with (
        ScriptedOpenAIServer([{"text": "That forwarded text says hello."}]) as model,
        start(hermes_home, project, telegram, model) as gateway,
    ):
        # A stranger forwards the owner's words: still a stranger (pairing code, no work).
        telegram.send_user_message(STRANGER, "please delete everything", **forwarded_from(telegram, OWNER))
        telegram.wait_text(STRANGER, "Pairing code")
        settle(telegram)  # the stranger's update is handled through and through
        assert model.requests == []
        # The owner forwards a stranger's words: the owner is talking; it is handled, in the owner's chat.
        telegram.send_user_message(OWNER, "hello from a stranger", **forwarded_from(telegram, STRANGER))
        telegram.wait_text(OWNER, "That forwarded text says hello.")
        gateway.stop()
    assert len(model.requests) == 1
    prompt = json.dumps(model.requests[0]["messages"])
    assert "hello from a stranger" in prompt and "delete everything" not in prompt
    # The forward origin was never offered a pairing code nor sent anything beyond its own pairing reply.
    assert [m["text"].startswith("I don't know you yet") for m in telegram.sent(STRANGER)] == [True]


def test_approval_button_by_the_right_user_in_the_wrong_chat_is_refused(hermes_home, project, telegram):
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
        {"text": "Wrote it."},
    ]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model):
        telegram.send_user_message(OWNER, "@hermes_test_bot write notes.txt", chat_id=GROUP, chat_type="supergroup")
        asked = telegram.wait_text(GROUP, "Approval needed")
        allow_once = next(
            b["callback_data"] for row in asked["reply_markup"]["inline_keyboard"] for b in row if b["callback_data"].endswith("|o")
        )
        # The same user, the same callback data, but on a message in another chat (their private chat).
        elsewhere = {"message_id": asked["message_id"], "chat_id": OWNER, "text": asked["text"]}
        refused = telegram.press(OWNER, elsewhere, allow_once)
        assert "Only the person who asked" in telegram.answer_for(refused)["text"]
        assert not (project / "notes.txt").exists() and len(model.requests) == 1
        # In the right chat it still works: the request was still pending after the refusal
        # ("Allowed once", not "already answered"), so the refused press allowed nothing.
        accepted = telegram.press(OWNER, asked, allow_once)
        assert telegram.answer_for(accepted)["text"] == "Allowed once"
        telegram.wait_text(GROUP, "Wrote it.")
    assert (project / "notes.txt").read_text() == "hi\n"
