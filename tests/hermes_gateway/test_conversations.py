"""The real hermes-gateway process against the fake Bot API: topics, photos, /new, /stop, /undo."""

from __future__ import annotations

import base64
import json

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import OWNER, start

GROUP = -100300
# The smallest thing that looks like a JPEG (SOI ... EOI); the gateway passes the bytes through.
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"


def prompt_of(request: dict) -> str:
    return json.dumps(request["messages"])


def test_each_forum_topic_is_its_own_conversation(hermes_home, project, telegram):
    script = [{"text": "Noted, apples."}, {"text": "I know of no fruit here."}]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model):
        topic = {"chat_id": GROUP, "chat_type": "supergroup", "is_topic_message": True}
        telegram.send_user_message(OWNER, "@hermes_test_bot remember: apples", message_thread_id=11, **topic)
        first = telegram.wait_text(GROUP, "Noted, apples.")
        telegram.send_user_message(OWNER, "@hermes_test_bot which fruit did I say?", message_thread_id=22, **topic)
        second = telegram.wait_text(GROUP, "I know of no fruit here.")
        telegram.send_user_message(OWNER, "/whoami", message_thread_id=11, **topic)
        telegram.send_user_message(OWNER, "/whoami", message_thread_id=22, **topic)
        who = telegram.wait_for(
            lambda: (
                [m for m in telegram.sent(GROUP) if "User id" in m["text"]]
                if len([m for m in telegram.sent(GROUP) if "User id" in m["text"]]) == 2
                else None
            ),
            20,
            "two /whoami",
        )
    # Replies go to the topic they came from.
    assert first["thread_id"] == 11 and second["thread_id"] == 22
    # The second topic's model request knows nothing of the first topic's conversation.
    assert len(model.requests) == 2
    assert "apples" in prompt_of(model.requests[0]) and "apples" not in prompt_of(model.requests[1])
    by_topic = {m["thread_id"]: m["text"] for m in who}
    assert "(topic 11)" in by_topic[11] and "(topic 22)" in by_topic[22]
    sessions = {t: text.split("Session: ")[1].strip() for t, text in by_topic.items()}
    assert sessions[11] != sessions[22] and "(none yet)" not in sessions.values()


def test_a_photo_reaches_the_model_as_an_image(hermes_home, project, telegram):
    telegram.files["ph1"] = JPEG
    photo = [
        {"file_id": "ph1-small", "file_unique_id": "s1", "width": 90, "height": 90, "file_size": 10},
        {"file_id": "ph1", "file_unique_id": "p1", "width": 800, "height": 600, "file_size": len(JPEG)},
    ]
    with ScriptedOpenAIServer([{"text": "A very small picture."}]) as model, start(hermes_home, project, telegram, model):
        telegram.send_user_message(OWNER, "", photo=photo, caption="what is this?")
        telegram.wait_text(OWNER, "A very small picture.")
    user_messages = [m for m in model.requests[0]["messages"] if m["role"] == "user"]
    parts = user_messages[-1]["content"]
    assert isinstance(parts, list)
    images = [p for p in parts if p.get("type") == "image_url"]
    assert len(images) == 1  # the largest size only
    assert images[0]["image_url"]["url"] == "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()
    assert any(p.get("type") == "text" and "what is this?" in p["text"] for p in parts)
    assert list((hermes_home / "gateway" / "uploads").rglob("*photo-p1.jpg"))


def test_new_starts_a_fresh_session(hermes_home, project, telegram):
    script = [{"text": "Noted, apples."}, {"text": "Fresh start, no fruit."}]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model):
        telegram.send_user_message(OWNER, "remember: apples")
        telegram.wait_text(OWNER, "Noted, apples.")
        telegram.send_user_message(OWNER, "/whoami")
        before = telegram.wait_text(OWNER, "User id")["text"].split("Session: ")[1].strip()
        telegram.send_user_message(OWNER, "/new")
        fresh = telegram.wait_text(OWNER, "New conversation in app")["text"]
        telegram.send_user_message(OWNER, "which fruit did I say?")
        telegram.wait_text(OWNER, "Fresh start, no fruit.")
    assert before[:8] not in fresh
    assert "apples" in prompt_of(model.requests[0]) and "apples" not in prompt_of(model.requests[1])


def test_stop_cancels_the_running_turn(hermes_home, project, telegram):
    script = [{"hang": True}, {"text": "Back again."}]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model):
        telegram.send_user_message(OWNER, "think forever")
        telegram.wait_for(lambda: model.requests, 20, "the model request")
        telegram.send_user_message(OWNER, "/stop")
        telegram.wait_text(OWNER, "Stopping…")
        telegram.wait_text(OWNER, "⏹ Stopped.")
        # The chat is usable again, and nothing is left running.
        telegram.send_user_message(OWNER, "/stop")
        telegram.wait_text(OWNER, "Nothing is running.")
        telegram.send_user_message(OWNER, "hello?")
        telegram.wait_text(OWNER, "Back again.")


def test_undo_restores_the_files_the_last_turn_changed(hermes_home, project, telegram):
    (project / "notes.txt").write_text("original\n")
    script = [
        {
            "tool_calls": [
                {"id": "c1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "changed\n"}},
                {"id": "c2", "name": "write_file", "arguments": {"path": "new.txt", "content": "brand new\n"}},
            ]
        },
        {"text": "Edited both."},
    ]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model):
        telegram.send_user_message(OWNER, "/undo")
        telegram.wait_text(OWNER, "Nothing to undo yet.")
        telegram.send_user_message(OWNER, "/mode accept-edits")
        telegram.wait_text(OWNER, "Mode set to accept-edits")
        telegram.send_user_message(OWNER, "edit the notes")
        telegram.wait_text(OWNER, "Edited both.")
        assert (project / "notes.txt").read_text() == "changed\n" and (project / "new.txt").exists()
        telegram.send_user_message(OWNER, "/undo")
        report = telegram.wait_text(OWNER, "Undid the changes")["text"]
    assert "notes.txt" in report and "new.txt" in report
    assert (project / "notes.txt").read_text() == "original\n"
    assert not (project / "new.txt").exists()
