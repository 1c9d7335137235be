"""The real hermes-gateway process on WhatsApp: the fake Graph API, signed webhook deliveries as Meta
sends them to the gateway's listener, and the scripted model.

WhatsApp chats are all one-to-one (the Cloud API serves no groups), so the group cases of the
authorisation matrix do not exist here; a press on someone else's question can only be forged,
and is refused all the same.
"""

from __future__ import annotations

import base64
import json
import re
import socket

import pytest

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.speech_server import FakeSpeech, spoken_ogg
from tests.fakes.whatsapp_server import FakeWhatsApp
from tests.hermes_gateway.platform_harness import GatewayProcess, cli, gateway_status, start_gateway, wait_until

ADA = "4915112345678"  # the owner
BOB = "4917698765432"  # allowed too
EVE = "4915550001111"  # a stranger
VOICE_KEY = "gsk-voice-key-not-real-0123456789"


@pytest.fixture
def whatsapp():
    with FakeWhatsApp() as fake:
        yield fake


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(
    hermes_home, project, whatsapp: FakeWhatsApp, model, *, allowed=(ADA,), extra: str = "", token: str | None = None
) -> GatewayProcess:
    """A gateway with only WhatsApp; the token and the app secret come from the environment."""
    port = free_port()
    whatsapp.webhook_url = f"http://127.0.0.1:{port}/whatsapp"
    section = f"""
[whatsapp]
phone_number_id = "{whatsapp.phone_number_id}"
verify_token = "{whatsapp.verify_token}"
api_base_url = "{whatsapp.base_url}"
webhook_listen = "127.0.0.1"
webhook_port = {port}
webhook_path = "/whatsapp"
allowed_users = {json.dumps(list(allowed))}
owner = "{ADA}"
{extra}
"""
    secrets = {"WHATSAPP_ACCESS_TOKEN": token or whatsapp.token, "WHATSAPP_APP_SECRET": whatsapp.app_secret}
    return start_gateway(hermes_home, project, section, model=model, wait_for=[] if token else ["whatsapp"], env=secrets)


def say(whatsapp: FakeWhatsApp, wa_id: str, text: str) -> dict:
    payload = whatsapp.text(wa_id, text)
    assert whatsapp.post(payload) == 200
    return payload


def press(whatsapp: FakeWhatsApp, wa_id: str, asked: dict, data: str) -> None:
    assert whatsapp.post(whatsapp.press(wa_id, asked, data)) == 200


def buttons_of(message: dict) -> list[str]:
    return [b["reply"]["id"] for b in message["interactive"]["action"]["buttons"]]


def test_pairing_and_the_authorisation_matrix(hermes_home, project, whatsapp):
    with ScriptedOpenAIServer([{"text": "Welcome aboard."}]) as model, run(hermes_home, project, whatsapp, model) as gateway:
        say(whatsapp, EVE, "hello")
        told = whatsapp.wait_text(EVE, "Pairing code:")
        code = re.search(r"Pairing code: (\w{8})", whatsapp.body_of(told)).group(1)
        assert f"whatsapp:{EVE}" in whatsapp.body_of(told)
        # A stranger's press (on any message) is refused, to them alone, before any work.
        press(whatsapp, EVE, told, "ap|0123abcd|o")
        refused = whatsapp.wait_text(EVE, "not authorised")
        assert whatsapp.body_of(refused).startswith("⚠️") and refused["context"] == {"message_id": told["id"]}
        assert model.requests == []
        # Approved on the machine, the stranger can talk.
        assert cli(hermes_home, "pairing", "approve", "WRONG123").returncode == 1
        approved = cli(hermes_home, "pairing", "approve", code)
        assert approved.returncode == 0 and EVE in approved.stdout
        say(whatsapp, EVE, "now?")
        whatsapp.wait_text(EVE, "Welcome aboard.")
        assert len(model.requests) == 1
        gateway.stop()
    # The token and the app secret never reach a log or the status file.
    logs = "".join(p.read_text() for p in (hermes_home / "logs").glob("*.log")) + gateway.stderr()
    statuses = "".join(p.read_text() for p in (hermes_home / "gateway").glob("*.json"))
    assert whatsapp.token not in logs + statuses and whatsapp.app_secret not in logs + statuses


def test_unsigned_events_are_refused_by_the_running_gateway(hermes_home, project, whatsapp):
    with ScriptedOpenAIServer([{"text": "should never be asked"}]) as model, run(hermes_home, project, whatsapp, model):
        assert gateway_status(hermes_home)["platforms"]["whatsapp"]["account"] == "Hermes Test"
        shown = cli(hermes_home, "gateway", "status").stdout
        assert "running" in shown and "whatsapp Hermes Test" in shown
        assert whatsapp.verify() == (200, "1158201444")
        assert whatsapp.verify(token="guess")[0] == 403
        assert whatsapp.post(whatsapp.text(ADA, "forged as the owner"), signature=None) == 401
        assert whatsapp.post(whatsapp.text(ADA, "forged as the owner"), signature="sha256=" + "ab" * 32) == 401
        say(whatsapp, ADA, "/whoami")
        whatsapp.wait_text(ADA, f"whatsapp:{ADA}")
        assert model.requests == []  # the forged prompts never started a turn


def test_a_long_reply_arrives_whole_split_into_numbered_messages(hermes_home, project, whatsapp):
    paragraph = "A **bold** claim with `code` & <angle> brackets. " * 12
    reply = "\n\n".join(f"{i}. {paragraph}" for i in range(40)) + "\n\n```python\n" + "print('x')\n" * 300 + "```"
    # Streamed over more than a moment: long enough that "typing" is shown meanwhile.
    with ScriptedOpenAIServer([{"text": reply, "chunk_size": 2000, "delay": 0.15}]) as model, run(hermes_home, project, whatsapp, model):
        asked = say(whatsapp, ADA, "write me an essay")
        last = whatsapp.wait_for(lambda: next((t for t in whatsapp.texts(ADA) if re.match(r"\((\d+)/\1\)", t)), None), 30, "the last chunk")
        total = int(last[1 : last.index("/")])
    bodies = whatsapp.texts(ADA)
    # WhatsApp cannot edit: no draft was sent, only the numbered chunks, each within the limit.
    assert total >= 4 and len(bodies) == total
    assert all(body.startswith(f"({i}/{total})") and len(body) <= 4096 for i, body in enumerate(bodies, 1))
    assert all(m["type"] == "text" for m in whatsapp.sent(ADA))
    joined = "\n".join(bodies)
    assert all(f"{i}. A *bold* claim with `code` & <angle> brackets." in joined for i in range(40))
    assert joined.count("print('x')") == 300
    # Typing was shown on the message being answered.
    message_id = asked["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    assert any(r["message_id"] == message_id and r["typing_indicator"] == {"type": "text"} for r in whatsapp.reads)


def test_approval_buttons_are_bound_to_the_person_who_asked(hermes_home, project, whatsapp):
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
        {"text": "Wrote it."},
    ]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, whatsapp, model, allowed=(ADA, BOB)):
        say(whatsapp, ADA, "write notes.txt")
        asked = whatsapp.wait_text(ADA, "Approval needed")
        assert asked["type"] == "interactive" and asked["interactive"]["type"] == "button"
        titles = [b["reply"]["title"] for b in asked["interactive"]["action"]["buttons"]]
        assert titles == ["Allow once", "Allow always", "Deny"]
        allow_once = next(d for d in buttons_of(asked) if d.endswith("|o"))
        assert all(len(d.encode()) <= 64 for d in buttons_of(asked))
        # Another allowed person pressing the same button (from their own chat): refused, nothing happens.
        press(whatsapp, BOB, asked, allow_once)
        assert whatsapp.body_of(whatsapp.wait_text(BOB, "Only the person who asked")).startswith("⚠️")
        assert not (project / "notes.txt").exists()
        press(whatsapp, ADA, asked, allow_once)
        whatsapp.wait_text(ADA, "Allowed once")
        whatsapp.wait_text(ADA, "Wrote it.")
        assert (project / "notes.txt").read_text() == "hi\n"
        press(whatsapp, ADA, asked, allow_once)
        whatsapp.wait_text(ADA, "expired or was already answered")


def test_an_upload_reaches_the_model(hermes_home, project, whatsapp):
    script = [{"text": "Read your file."}, {"text": "Nice photo."}]
    photo = b"\xff\xd8\xff\xe0 a tiny jpeg"
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, whatsapp, model):
        document = whatsapp.media(ADA, "document", b"line one\nline two\n", "text/plain", filename="notes.txt", caption="summarise")
        assert whatsapp.post(document) == 200
        whatsapp.wait_text(ADA, "Read your file.")
        assert whatsapp.post(whatsapp.media(ADA, "image", photo, "image/jpeg", caption="what is this?")) == 200
        whatsapp.wait_text(ADA, "Nice photo.")
    prompt = str(model.requests[0]["messages"][-1]["content"])
    assert "line two" in prompt and "summarise" in prompt
    assert list((hermes_home / "gateway" / "uploads").rglob("*notes.txt"))
    parts = model.requests[1]["messages"][-1]["content"]
    assert any(p.get("type") == "text" and "what is this?" in p["text"] for p in parts)
    assert any(p.get("type") == "image_url" and base64.b64encode(photo).decode() in p["image_url"]["url"] for p in parts)


def test_a_voice_note_is_transcribed_and_voice_on_answers_with_audio(hermes_home, project, whatsapp):
    note = spoken_ogg("What does the build script do?")  # WhatsApp records voice notes as Ogg/Opus
    with FakeSpeech() as speech, ScriptedOpenAIServer([{"text": "The build script **compiles** the docs."}]) as model:
        speech.expect(note, "What does the build script do?")
        voice = f'[voice]\nstt_base_url = "{speech.base_url}"\ntts_base_url = "{speech.base_url}"\nstt_api_key = "{VOICE_KEY}"\n'
        with run(hermes_home, project, whatsapp, model, extra=voice):
            say(whatsapp, ADA, "/voice on")
            whatsapp.wait_text(ADA, "Voice replies on")
            assert whatsapp.post(whatsapp.media(ADA, "audio", note, "audio/ogg; codecs=opus", voice=True)) == 200
            whatsapp.wait_text(ADA, "🎤 What does the build script do?")
            whatsapp.wait_text(ADA, "The build script *compiles* the docs.")
            spoken = whatsapp.wait_for(lambda: next((m for m in whatsapp.sent(ADA) if m["type"] == "audio"), None), 30, "the spoken reply")
    [upload] = speech.uploads
    assert upload.data == note and upload.filename.endswith(".ogg")
    assert "What does the build script do?" in str(model.requests[0]["messages"][-1]["content"])
    [sent_audio] = whatsapp.uploads
    assert sent_audio["mime"] == "audio/ogg" and sent_audio["data"] == speech.made[0] and spoken["audio"] == {"id": sent_audio["id"]}


def test_a_cron_job_made_in_the_chat_delivers_to_it(hermes_home, project, whatsapp):
    with ScriptedOpenAIServer([{"text": "The plants are watered."}]) as model, run(hermes_home, project, whatsapp, model):
        say(whatsapp, ADA, "/cron add every 1h | water the plants")
        added = whatsapp.body_of(whatsapp.wait_text(ADA, "Added job"))
        job_id = re.search(r"Added job `([^`]+)`", added).group(1)
        say(whatsapp, ADA, f"/cron run {job_id}")
        delivered = whatsapp.wait_text(ADA, "⏰", timeout=30)
        assert "The plants are watered." in "\n".join(whatsapp.texts(ADA)[whatsapp.sent(ADA).index(delivered) :])


def test_a_rejected_token_is_retried_and_reported_without_the_token(hermes_home, project, whatsapp):
    wrong = "EAAG-revoked-token-not-real-555"
    with ScriptedOpenAIServer([]) as model, run(hermes_home, project, whatsapp, model, token=wrong) as gateway:
        state = wait_until(
            lambda: (
                (gateway_status(hermes_home).get("platforms") or {}).get("whatsapp", {}).get("state") == "retrying"
                and gateway_status(hermes_home)["platforms"]["whatsapp"]
            ),
            30,
            "WhatsApp to be retrying",
        )
        assert "access token is invalid or expired" in state["error"] and "WHATSAPP_ACCESS_TOKEN" in state["error"]
        status = cli(hermes_home, "gateway", "status")
        assert status.returncode == 0 and "retrying" in status.stdout
        # While it waits to retry, the webhook port is not held.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", int(whatsapp.webhook_url.split(":")[2].split("/")[0])))
        code, err = gateway.stop()
    assert code == 0
    logs = "".join(p.read_text() for p in (hermes_home / "logs").glob("*.log")) + err
    assert wrong not in logs + str(gateway_status(hermes_home)) and "access token is invalid" in logs
