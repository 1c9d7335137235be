"""The real hermes-gateway process on Matrix: the fake homeserver, the real matrix-nio inside the
gateway, and the scripted model."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import stat
from typing import Any

import pytest

from tests.fakes.matrix_server import MAX_EVENT_BYTES, FakeMatrix
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.speech_server import FakeSpeech, spoken_ogg
from tests.hermes_gateway.platform_harness import GatewayProcess, cli, start_gateway
from tests.hermes_gateway.platforms.test_matrix_encryption import Person

ADA = "@ada:hermes.test"  # the owner
BOB = "@bob:hermes.test"  # allowed too
EVE = "@eve:hermes.test"  # a stranger
ONE, TWO = "1\ufe0f\u20e3", "2\ufe0f\u20e3"
NUMBERED = re.compile(r"\((\d+)/(\d+)\)")


@pytest.fixture
def matrix():
    with FakeMatrix() as fake:
        fake.max_wait = 1.0
        fake.user(ADA, "Ada")
        fake.user(BOB, "Bob")
        fake.user(EVE, "Eve")
        yield fake


def run(hermes_home, project, matrix: FakeMatrix, model, *, allowed=(ADA,), extra: str = "") -> GatewayProcess:
    """A gateway with only Matrix; the access token comes from the environment, as a service would have it."""
    section = f"""
[matrix]
homeserver = "https://matrix.hermes.test"
api_base_url = "{matrix.base_url}"
user_id = "{matrix.bot}"
allowed_users = {json.dumps(list(allowed))}
owner = "{ADA}"
{extra}
"""
    return start_gateway(hermes_home, project, section, model=model, wait_for=["matrix"], env={"MATRIX_ACCESS_TOKEN": matrix.token})


def body(message: dict) -> str:
    return str(message["content"].get("body", ""))


def test_pairing_and_the_authorisation_matrix(hermes_home, project, matrix):
    group = matrix.create_room(ADA, [ADA, BOB, EVE], name="team")
    with ScriptedOpenAIServer([{"text": "Welcome aboard."}]) as model, run(hermes_home, project, matrix, model) as gateway:
        dm = matrix.dm(EVE, bot="invite")  # Element's "start a direct chat": an invite with is_direct
        matrix.wait_for(lambda: matrix.rooms[dm].membership(matrix.bot) == "join", 20, "the bot to join")
        matrix.say(dm, EVE, "hello")
        told = matrix.wait_text(dm, "Pairing code:")
        code = re.search(r"Pairing code: (\w{8})", body(told)).group(1)
        assert f"matrix:{EVE}" in body(told)
        # In a group a stranger's chatter gets nothing, a mention a short refusal (never a code).
        matrix.say(group, EVE, "just chatting here")
        matrix.say(group, EVE, "do things for me", mention_bot=True)
        refusal = matrix.wait_text(group, "I only answer people I know")
        assert [body(m) for m in matrix.sent(group)] == [body(refusal)] and "Pairing code" not in body(refusal)
        # A group invite from a stranger is declined.
        elsewhere = matrix.create_room(EVE, [EVE], bot="invite", name="eve's room")
        matrix.wait_for(lambda: matrix.rooms[elsewhere].membership(matrix.bot) == "leave", 20, "the invite declined")
        assert model.requests == []  # no turn ever started
        # Approved on the machine, the stranger can talk.
        assert cli(hermes_home, "pairing", "approve", "WRONG123").returncode == 1
        approved = cli(hermes_home, "pairing", "approve", code)
        assert approved.returncode == 0 and f"matrix:{EVE}" in approved.stdout
        matrix.say(dm, EVE, "now?")
        matrix.wait_text(dm, "Welcome aboard.")
        assert len(model.requests) == 1
        status = cli(hermes_home, "gateway", "status").stdout
        assert "matrix" in status and matrix.bot in status
        gateway.stop()
    # The access token never reaches a log or the status file.
    logs = "".join(p.read_text() for p in (hermes_home / "logs").glob("*.log")) + gateway.stderr()
    statuses = "".join(p.read_text() for p in (hermes_home / "gateway").glob("*.json"))
    assert matrix.token not in logs + statuses


def test_a_reply_streams_into_one_message_by_edits(hermes_home, project, matrix):
    room = matrix.dm(ADA)
    reply = "Streaming " + " ".join(f"word{i}" for i in range(60)) + " **done**."
    script = [{"text": reply, "chunk_size": 40, "delay": 0.15}]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, matrix, model, extra="edit_interval = 0.3"):
        matrix.say(room, ADA, "stream something")
        matrix.wait_for(lambda: any(body(m) == reply for m in matrix.sent(room)), 30, "the whole reply")
    [message] = matrix.sent(room)
    assert message["edits"] >= 2 and message["content"]["formatted_body"].endswith("<b>done</b>.")
    edits = [e["content"] for e in matrix.events(room, sender=matrix.bot) if "m.new_content" in e["content"]]
    assert all(e["m.relates_to"] == {"rel_type": "m.replace", "event_id": message["event_id"]} for e in edits)
    drafts = [message["original"]["body"]] + [e["m.new_content"]["body"] for e in edits[:-1]]
    assert all(reply.startswith(d.rstrip(" …▌.*")) for d in drafts if d)  # each draft a beginning of the reply
    assert (room, matrix.bot, True) in matrix.typing


def test_a_long_reply_is_split_into_numbered_messages_within_the_limit(hermes_home, project, matrix):
    room = matrix.dm(ADA)
    paragraph = "A **bold** claim with `code` & <angle> brackets. " * 12
    reply = "\n\n".join(f"{i}. {paragraph}" for i in range(80)) + "\n\n```python\n" + "print('x')\n" * 900 + "```"
    with ScriptedOpenAIServer([{"text": reply, "chunk_size": 4000}]) as model, run(hermes_home, project, matrix, model):
        matrix.say(room, ADA, "write me an essay")
        matrix.wait_for(
            lambda: any((m := NUMBERED.match(body(s))) and m.group(1) == m.group(2) for s in matrix.sent(room)), 40, "the last chunk"
        )
    chunks = [m for m in matrix.sent(room) if NUMBERED.match(body(m))]
    total = len(chunks)
    assert total >= 3 and all(body(m).startswith(f"({i}/{total})") for i, m in enumerate(chunks, 1))
    assert all(len(body(m)) <= 8000 for m in chunks)
    assert all(len(json.dumps(e, ensure_ascii=False).encode()) < MAX_EVENT_BYTES for e in matrix.events(room, sender=matrix.bot))
    joined = "\n".join(body(m) for m in chunks)
    assert all(f"{i}. A **bold** claim with `code` & <angle> brackets." in joined for i in range(80))
    assert joined.count("print('x')") == 900
    assert all("<b>bold</b>" in m["content"]["formatted_body"] for m in chunks[:2])


def test_an_approval_is_answered_only_by_the_person_who_asked(hermes_home, project, matrix):
    room = matrix.create_room(ADA, [ADA, BOB, EVE], name="team")
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
        {"text": "Wrote it."},
    ]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, matrix, model, allowed=(ADA, BOB)):
        matrix.say(room, ADA, "write notes.txt", mention_bot=True)
        asked = matrix.wait_text(room, "Approval needed")
        assert "Reply 1 — Allow once" in body(asked) and "Reply 3 — Deny" in body(asked)
        reactions = matrix.wait_for(lambda: len(matrix.events(room, sender=matrix.bot, kind="m.reaction")) == 3, 10, "the reactions")
        assert reactions
        keys = [r["content"]["m.relates_to"]["key"] for r in matrix.events(room, sender=matrix.bot, kind="m.reaction")]
        assert keys == [ONE, TWO, "3\ufe0f\u20e3"]
        # Another allowed person: refused, in a notice that names them; a stranger: not authorised.
        matrix.react(room, BOB, asked["event_id"], ONE)
        refused = matrix.wait_text(room, "Only the person who asked for this can answer it.")
        assert refused["content"]["m.mentions"] == {"user_ids": [BOB]} and refused["content"]["msgtype"] == "m.notice"
        matrix.react(room, EVE, asked["event_id"], ONE)
        stranger = matrix.wait_text(room, "not authorised")
        assert stranger["content"]["m.mentions"] == {"user_ids": [EVE]}
        matrix.say(room, BOB, "1")  # typed, by the wrong person
        matrix.wait_for(lambda: sum("Only the person who asked" in body(m) for m in matrix.sent(room)) == 2, 10, "the typed refusal")
        assert not (project / "notes.txt").exists()
        matrix.react(room, ADA, asked["event_id"], ONE)
        matrix.wait_text(room, "Wrote it.")
        settled = matrix.wait_for(
            lambda: "Allowed once" in body(next(m for m in matrix.sent(room) if m["event_id"] == asked["event_id"])), 10, "the outcome"
        )
        assert settled

        def taken_back() -> set[str]:
            return {e["redacts"] for e in matrix.events(room, sender=matrix.bot, kind="m.room.redaction")}

        redacted = matrix.wait_for(lambda: len(taken_back()) == 3 and taken_back(), 10, "the reactions taken back")
        assert redacted == {r["event_id"] for r in matrix.events(room, sender=matrix.bot, kind="m.reaction")}
    assert (project / "notes.txt").read_text() == "hi\n"
    assert len(model.requests) == 2


def test_a_typed_number_answers_the_question(hermes_home, project, matrix):
    room = matrix.dm(ADA)
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "typed.txt", "content": "ok\n"}}]},
        {"text": "Done by number."},
    ]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, matrix, model):
        matrix.say(room, ADA, "write typed.txt")
        matrix.wait_text(room, "Approval needed")
        matrix.say(room, ADA, "1")
        matrix.wait_text(room, "Done by number.")
    assert (project / "typed.txt").read_text() == "ok\n"
    assert len(model.requests) == 2


def test_a_thread_is_its_own_conversation(hermes_home, project, matrix):
    room = matrix.create_room(ADA, [ADA, BOB])
    script = [{"text": "Answered in the thread."}, {"text": "Followed up in the thread."}, {"text": "Answered in the room."}]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, matrix, model):
        root = matrix.say(room, BOB, "deploy questions")
        matrix.say(room, ADA, "how do we deploy?", mention_bot=True, thread=root)
        answered = matrix.wait_text(room, "Answered in the thread.")
        assert answered["thread"] == root
        matrix.say(room, ADA, "and roll back?", thread=root)  # no mention: the bot takes part in this thread
        followed = matrix.wait_text(room, "Followed up in the thread.")
        assert followed["thread"] == root
        matrix.say(room, ADA, "and here?", mention_bot=True)
        outside = matrix.wait_text(room, "Answered in the room.")
        assert outside["thread"] is None
    # Two conversations: the room's prompt did not carry the thread's history.
    room_prompt = json.dumps(model.requests[2]["messages"])
    assert "how do we deploy?" not in room_prompt and "and here?" in room_prompt
    assert "how do we deploy?" in json.dumps(model.requests[1]["messages"])


def test_an_upload_reaches_the_model(hermes_home, project, matrix):
    room = matrix.dm(ADA)
    script = [{"text": "Read your file."}, {"text": "Nice photo."}]
    photo = b"\xff\xd8\xff\xe0 a tiny jpeg"
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, matrix, model):
        matrix.send_file(room, ADA, "notes.txt", b"line one\nline two\n", "text/plain", caption="summarise")
        matrix.wait_text(room, "Read your file.")
        matrix.send_file(room, ADA, "photo.jpg", photo, "image/jpeg", msgtype="m.image", caption="what is this?")
        matrix.wait_text(room, "Nice photo.")
    prompt = str(model.requests[0]["messages"][-1]["content"])
    assert "line two" in prompt and "summarise" in prompt
    assert list((hermes_home / "gateway" / "uploads").rglob("*notes.txt"))
    parts = model.requests[1]["messages"][-1]["content"]
    assert any(p.get("type") == "text" and "what is this?" in p["text"] for p in parts)
    assert any(p.get("type") == "image_url" and base64.b64encode(photo).decode() in p["image_url"]["url"] for p in parts)


def test_a_voice_message_is_transcribed_and_answered(hermes_home, project, matrix):
    room = matrix.dm(ADA)
    note = spoken_ogg("What does the build script do?")
    with FakeSpeech() as speech, ScriptedOpenAIServer([{"text": "The build script compiles the docs."}]) as model:
        speech.expect(note, "What does the build script do?")
        voice = f'[voice]\nstt_base_url = "{speech.base_url}"\nstt_api_key = "gsk-voice-key-not-real-0123456789"\n'
        with run(hermes_home, project, matrix, model, extra=voice):
            matrix.send_file(room, ADA, "Voice message.ogg", note, "audio/ogg", msgtype="m.audio", voice=True)
            matrix.wait_text(room, "What does the build script do?")
            matrix.wait_text(room, "The build script compiles the docs.")
    [upload] = speech.uploads
    assert upload.data == note and upload.filename.endswith(".ogg")
    assert "What does the build script do?" in str(model.requests[0]["messages"][-1]["content"])


def test_a_cron_job_made_in_the_chat_delivers_to_it(hermes_home, project, matrix):
    room = matrix.create_room(ADA, [ADA, BOB], name="garden")
    with ScriptedOpenAIServer([{"text": "The plants are watered."}]) as model, run(hermes_home, project, matrix, model):
        matrix.say(room, ADA, "/cron add every 1h | water the plants", mention_bot=True)
        added = body(matrix.wait_text(room, "Added job"))
        job_id = re.search(r"Added job `([^`]+)`", added).group(1)
        matrix.say(room, ADA, f"/cron run {job_id}", mention_bot=True)
        matrix.wait_text(room, "⏰", timeout=30)
        matrix.wait_text(room, "The plants are watered.", timeout=30)
    assert len(model.requests) == 1


def test_an_encrypted_direct_chat_through_the_gateway(hermes_home, project, matrix, tmp_path):
    matrix.user(ADA, "Ada", password="ada-password")
    room = matrix.create_room(ADA, [ADA], bot="invite", direct=True, encrypted=True)

    async def talk() -> str:
        async with Person(matrix, ADA, "ada-password", tmp_path / "ada") as ada:
            await ada.until(lambda: matrix.bot in ada.client.rooms[room].users, "the bot to join")
            await ada.until(lambda: ada.client.olm.tracked_users, "the bot's keys")
            await ada.send(room, {"msgtype": "m.text", "body": "what is the launch code?"})

            def newest(event: Any) -> str:  # a message, or what an edit makes of it
                content = event.source["content"]
                return str((content.get("m.new_content") or content).get("body", ""))

            return await ada.until(lambda: next((newest(e) for e in ada.seen if newest(e) == "It is **0451**."), None), "the answer")

    with (
        ScriptedOpenAIServer([{"text": "It is **0451**."}]) as model,
        run(hermes_home, project, matrix, model, extra="encryption = true"),
    ):
        assert asyncio.run(talk()) == "It is **0451**."
    assert "what is the launch code?" in str(model.requests[0]["messages"][-1]["content"])
    on_the_server = json.dumps(matrix.events(room))
    assert "launch code" not in on_the_server and "0451" not in on_the_server
    keys = hermes_home / "matrix"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    assert [p for p in keys.iterdir() if p.is_file()] and all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in keys.iterdir())
