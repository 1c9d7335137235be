"""The real hermes-gateway process on Signal: the fake signal-cli daemon (JSON-RPC and its event
stream) and the scripted model.

Signal has no buttons: approval questions list numbered replies, and a reaction on the question
answers it too (by its asker only). It has no edits for streaming either: a reply arrives whole,
split into numbered messages, with the typing indicator shown meanwhile.
"""

from __future__ import annotations

import base64
import json
import re
import socket

import pytest

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.signal_server import FakeSignalCli, SignalUser
from tests.fakes.speech_server import FakeSpeech, spoken_ogg
from tests.hermes_gateway.platform_harness import GatewayProcess, cli, gateway_status, start_gateway, wait_until

VOICE_KEY = "gsk-voice-key-not-real-0123456789"
WRITE_NOTES = [
    {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
    {"text": "Wrote it."},
]


@pytest.fixture
def signal_cli():
    with FakeSignalCli() as fake:
        yield fake


def run(hermes_home, project, fake: FakeSignalCli, model, *, allowed: tuple[SignalUser, ...] = (), extra: str = "") -> GatewayProcess:
    """A gateway with only Signal; the first allowed user owns it."""
    owner = f'owner = "{allowed[0].uuid}"' if allowed else ""
    section = f"""
[signal]
account = "{fake.account}"
api_base_url = "{fake.base_url}"
allowed_users = {json.dumps([u.uuid for u in allowed])}
{owner}
{extra}
"""
    return start_gateway(hermes_home, project, section, model=model, wait_for=["signal"])


def texts(fake: FakeSignalCli, to: str) -> list[str]:
    return [m["text"] for m in fake.sent(to)]


def test_pairing_and_the_authorisation_matrix(hermes_home, project, signal_cli):
    ada, eve, group = signal_cli.user("Ada"), signal_cli.user("Eve", hide_number=True), signal_cli.new_group_id()
    room = f"group.{group}"
    with (
        ScriptedOpenAIServer([{"text": "Welcome aboard."}]) as model,
        run(hermes_home, project, signal_cli, model, allowed=(ada,)) as gateway,
    ):
        # A stranger in a group: chatter is ignored, addressing the bot gets a short refusal there.
        signal_cli.message(eve, "anyone here?", group=group)
        signal_cli.message(eve, "do things", group=group, mention_bot=True)
        signal_cli.wait_text(room, "I only answer people I know")
        # A stranger's direct message gets a pairing code naming their identity (the uuid).
        signal_cli.message(eve, "hello")
        told = signal_cli.wait_text(eve.uuid, "Pairing code:")["text"]
        assert f"signal:{eve.uuid}" in told
        code = re.search(r"Pairing code: (\w{8})", told).group(1)
        assert model.requests == []
        assert cli(hermes_home, "pairing", "approve", "WRONG123").returncode == 1
        approved = cli(hermes_home, "pairing", "approve", code)
        assert approved.returncode == 0 and eve.uuid in approved.stdout
        signal_cli.message(eve, "now?")
        signal_cli.wait_text(eve.uuid, "Welcome aboard.")
        assert len(model.requests) == 1
        gateway.stop()
    assert texts(signal_cli, room) == ["I only answer people I know. Message me privately to pair."]


def test_a_long_reply_arrives_whole_split_into_numbered_messages(hermes_home, project, signal_cli):
    ada = signal_cli.user("Ada")
    paragraph = "A **bold** claim with `code` & <angle> brackets. " * 12
    reply = "\n\n".join(f"{i}. {paragraph}" for i in range(30)) + "\n\n```python\n" + "print('x')\n" * 150 + "```"
    # Streamed over more than a moment: long enough that "typing" is shown meanwhile.
    with (
        ScriptedOpenAIServer([{"text": reply, "chunk_size": 2000, "delay": 0.15}]) as model,
        run(hermes_home, project, signal_cli, model, allowed=(ada,)),
    ):
        signal_cli.message(ada, "write me an essay")
        last = signal_cli.wait_for(
            lambda: next((t for t in texts(signal_cli, ada.uuid) if re.match(r"\((\d+)/\1\)", t)), None), 30, "the last chunk"
        )
        total = int(last[1 : last.index("/")])
    sent = signal_cli.sent(ada.uuid)
    # No edits on Signal: no draft, only the numbered chunks, each within Signal's 2,000 characters.
    assert total >= 5 and len(sent) == total and all(m["edits"] == 0 for m in sent)
    assert all(m["text"].startswith(f"({i}/{total})") and len(m["text"]) <= 2000 for i, m in enumerate(sent, 1))
    joined = "\n".join(m["text"] for m in sent)
    assert all(f"{i}. A bold claim with code & <angle> brackets." in joined for i in range(30))
    assert joined.count("print('x')") == 150
    assert all(any(s.endswith(":BOLD") for s in m["styles"]) for m in sent if "claim" in m["text"])
    assert {"to": ada.uuid, "stop": False} in signal_cli.typing


def test_an_approval_is_answered_only_by_the_person_who_asked(hermes_home, project, signal_cli):
    ada, bob, eve, group = signal_cli.user("Ada"), signal_cli.user("Bob"), signal_cli.user("Eve"), signal_cli.new_group_id()
    room = f"group.{group}"
    with ScriptedOpenAIServer(WRITE_NOTES) as model, run(hermes_home, project, signal_cli, model, allowed=(ada, bob)):
        signal_cli.message(ada, "write notes.txt", group=group, mention_bot=True)
        asked = signal_cli.wait_text(room, "Approval needed")
        assert "Reply 1 — Allow once" in asked["text"] and "Reply 3 — Deny" in asked["text"]
        question = asked["timestamp"]
        # A stranger's reaction: refused to them alone.
        signal_cli.react(eve, question, "👍", group=group)
        signal_cli.wait_text(eve.uuid, "⚠️ You are not authorised to use this bot.")
        # Someone allowed, but not the asker, by reply and by reaction: refused, nothing happens.
        signal_cli.message(bob, "1", group=group)
        signal_cli.wait_text(room, "⚠️ Only the person who asked for this can answer it.")
        signal_cli.react(bob, question, "1\ufe0f\u20e3", group=group)
        signal_cli.wait_text(bob.uuid, "⚠️ Only the person who asked for this can answer it.")
        assert not (project / "notes.txt").exists()
        # The asker's reaction allows it once.
        signal_cli.react(ada, question, "👍", group=group)
        signal_cli.wait_text(ada.uuid, "Allowed once")
        signal_cli.wait_text(room, "Wrote it.")
        assert (project / "notes.txt").read_text() == "hi\n"
        signal_cli.message(ada, "1", group=group)  # the question is gone: "1" is just chatter now
        signal_cli.react(ada, question, "👍", group=group)
        signal_cli.wait_text(ada.uuid, "expired or was already answered")
    assert len(model.requests) == 2


def test_a_numbered_reply_denies(hermes_home, project, signal_cli):
    ada = signal_cli.user("Ada")
    script = [WRITE_NOTES[0], {"text": "Left it alone."}]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, signal_cli, model, allowed=(ada,)):
        signal_cli.message(ada, "write notes.txt")
        signal_cli.wait_text(ada.uuid, "Reply 3 — Deny")
        signal_cli.message(ada, "3")
        signal_cli.wait_text(ada.uuid, "Denied")
        signal_cli.wait_text(ada.uuid, "Left it alone.")
    assert not (project / "notes.txt").exists()
    assert "The user declined" in json.dumps(model.requests[1]["messages"][-1])  # the model was told of the refusal


def test_uploads_reach_the_model(hermes_home, project, signal_cli):
    ada, group = signal_cli.user("Ada"), signal_cli.new_group_id()
    photo = b"\xff\xd8\xff\xe0 a tiny jpeg"
    script = [{"text": "Read your file."}, {"text": "Nice photo."}]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, signal_cli, model, allowed=(ada,)):
        document = signal_cli.add_attachment(b"line one\nline two\n", "text/plain", "notes.txt")
        signal_cli.message(ada, "summarise", attachments=[document])
        signal_cli.wait_text(ada.uuid, "Read your file.")
        image = signal_cli.add_attachment(photo, "image/jpeg", "IMG_0001.jpg")
        signal_cli.message(ada, "what is this?", group=group, mention_bot=True, attachments=[image])
        signal_cli.wait_text(f"group.{group}", "Nice photo.")
    prompt = str(model.requests[0]["messages"][-1]["content"])
    assert "line two" in prompt and "summarise" in prompt
    assert list((hermes_home / "gateway" / "uploads").rglob("*notes.txt"))
    parts = model.requests[1]["messages"][-1]["content"]
    assert any(p.get("type") == "text" and "what is this?" in p["text"] for p in parts)
    assert any(p.get("type") == "image_url" and base64.b64encode(photo).decode() in p["image_url"]["url"] for p in parts)


def test_a_voice_note_is_transcribed_and_voice_on_answers_with_a_voice_note(hermes_home, project, signal_cli):
    ada = signal_cli.user("Ada")
    note = spoken_ogg("What does the build script do?")
    with FakeSpeech() as speech, ScriptedOpenAIServer([{"text": "The build script **compiles** the docs."}]) as model:
        speech.expect(note, "What does the build script do?")
        voice = f'[voice]\nstt_base_url = "{speech.base_url}"\ntts_base_url = "{speech.base_url}"\nstt_api_key = "{VOICE_KEY}"\n'
        with run(hermes_home, project, signal_cli, model, allowed=(ada,), extra=voice):
            signal_cli.message(ada, "/voice on")
            signal_cli.wait_text(ada.uuid, "Voice replies on")
            signal_cli.message(ada, attachments=[signal_cli.add_attachment(note, "audio/ogg")])  # no file name: a voice note
            signal_cli.wait_text(ada.uuid, "🎤 What does the build script do?")
            signal_cli.wait_text(ada.uuid, "The build script compiles the docs.")
            spoken = signal_cli.wait_for(
                lambda: next((m for m in signal_cli.sent(ada.uuid) if m["attachments"]), None), 30, "the spoken reply"
            )
    [upload] = speech.uploads
    assert upload.data == note and upload.filename.endswith(".ogg")
    assert "What does the build script do?" in str(model.requests[0]["messages"][-1]["content"])
    [audio] = spoken["attachments"]
    assert spoken["voice_note"] and audio["mime"] == "audio/ogg" and audio["data"] == speech.made[0]


def test_a_daemon_down_at_start_is_retried_until_it_answers(hermes_home, project):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ada_uuid = "5f0c2a9e-8d1b-4c7a-9e3f-2b6d8a1c4e70"
    section = f'[signal]\naccount = "+15550100001"\napi_base_url = "http://127.0.0.1:{port}"\nallowed_users = ["{ada_uuid}"]\n'
    with ScriptedOpenAIServer([{"text": "Back online."}]) as model, start_gateway(hermes_home, project, section, model=model) as gateway:
        state = wait_until(
            lambda: (
                (gateway_status(hermes_home).get("platforms") or {}).get("signal", {}).get("state") == "retrying"
                and gateway_status(hermes_home)["platforms"]["signal"]
            ),
            30,
            "Signal to be retrying",
        )
        assert f"127.0.0.1:{port} is not answering" in state["error"] and "signal-cli -a +15550100001 daemon --http" in state["error"]
        with FakeSignalCli(port=port) as fake:
            wait_until(lambda: gateway_status(hermes_home)["platforms"]["signal"]["state"] == "connected", 30, "Signal to connect")
            fake.message(SignalUser(ada_uuid, "+15550201234", "Ada"), "are you there?")
            fake.wait_text(ada_uuid, "Back online.")
            gateway.stop()


def test_a_cron_job_made_in_a_group_delivers_to_it(hermes_home, project, signal_cli):
    ada, group = signal_cli.user("Ada"), signal_cli.new_group_id()
    room = f"group.{group}"
    with ScriptedOpenAIServer([{"text": "The plants are watered."}]) as model, run(hermes_home, project, signal_cli, model, allowed=(ada,)):
        signal_cli.message(ada, "/cron add every 1h | water the plants", group=group)
        added = signal_cli.wait_text(room, "Added job")["text"]
        job_id = re.search(r"Added job (\w+)", added).group(1)
        signal_cli.message(ada, f"/cron run {job_id}", group=group)
        delivered = signal_cli.wait_text(room, "⏰", timeout=30)
    assert delivered["text"].startswith(f"⏰ water the plants ({job_id})") and delivered["text"].endswith("The plants are watered.")
    assert len(model.requests) == 1
