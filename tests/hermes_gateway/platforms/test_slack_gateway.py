"""The real hermes-gateway process on Slack: the fake Slack (Socket Mode websocket and Web API, or
signed Events API requests), the real slack-bolt inside the gateway, and the scripted model.

In Slack a channel mention is answered in a thread under it, and that thread is the conversation;
a DM is one conversation. A message that starts with "/" is a slash command in Slack's message
box, so people write commands after a space (" /cron ...") or through the app's "/hermes" command.
"""

from __future__ import annotations

import base64
import json
import re
import socket

import pytest

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.slack_server import FakeSlack
from tests.fakes.speech_server import FakeSpeech, spoken_ogg
from tests.hermes_gateway.platform_harness import GatewayProcess, cli, start_gateway

OWNER = "U0000ADA"
FRIEND = "U0000BOB"  # allowed too
STRANGER = "U0000EVE"
CHANNEL = "C0GENERAL"


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        for user, name in ((OWNER, "ada"), (FRIEND, "bob"), (STRANGER, "eve")):
            fake.add_user(user, name)
        yield fake


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(
    hermes_home, project, slack: FakeSlack, model, *, allowed=(OWNER,), extra: str = "", events_port: int | None = None
) -> GatewayProcess:
    """A gateway with only Slack; the tokens come from the environment, as the README suggests."""
    mode = f'mode = "events"\nevents_port = {events_port}\n' if events_port else ""
    section = f"""
[slack]
api_base_url = "{slack.base_url}"
allowed_users = {json.dumps(list(allowed))}
owner = "{OWNER}"
edit_interval = 1.2
{mode}{extra}
"""
    secrets = {"SLACK_BOT_TOKEN": slack.bot_token}
    secrets.update({"SLACK_SIGNING_SECRET": slack.signing_secret} if events_port else {"SLACK_APP_TOKEN": slack.app_token})
    return start_gateway(hermes_home, project, section, model=model, wait_for=["slack"], env=secrets)


def in_thread(slack: FakeSlack, thread_ts: str, needle: str, timeout: float = 20.0) -> dict:
    return slack.wait_for(
        lambda: next((m for m in slack.sent(CHANNEL) if m["thread_ts"] == thread_ts and needle in m["text"]), None), timeout, repr(needle)
    )


def ephemeral_for(slack: FakeSlack, user: str, needle: str) -> dict:
    return slack.wait_for(lambda: next((e for e in slack.ephemeral if e["user"] == user and needle in e["text"]), None), what=repr(needle))


def test_pairing_and_the_authorisation_matrix(hermes_home, project, slack):
    with ScriptedOpenAIServer([{"text": "Welcome aboard."}]) as model, run(hermes_home, project, slack, model) as gateway:
        dm = slack.dm_channel(STRANGER)
        slack.dm(STRANGER, "hello")
        told = slack.wait_text(dm, "Pairing code:")
        code = re.search(r"Pairing code: (\w{8})", told["text"]).group(1)
        assert f"slack:{STRANGER}" in told["text"] and told["thread_ts"] is None
        # In a channel: chatter is ignored, a mention gets a short refusal in a thread under it, never a code.
        slack.channel_message(STRANGER, "anyone here?")
        mention = slack.mention(STRANGER, "do things for me")
        refusal = in_thread(slack, mention["ts"], "I only answer people I know")
        assert "Pairing code" not in refusal["text"]
        assert model.requests == []
        # Approved on the machine, the stranger can talk.
        assert cli(hermes_home, "pairing", "approve", "WRONG123").returncode == 1
        approved = cli(hermes_home, "pairing", "approve", code)
        assert approved.returncode == 0 and STRANGER in approved.stdout
        slack.dm(STRANGER, "now?")
        slack.wait_text(dm, "Welcome aboard.")
        assert len(model.requests) == 1
        gateway.stop()
    # Only the refusal went to the channel: the chatter got nothing.
    assert [m["text"] for m in slack.sent(CHANNEL)] == [refusal["text"]]
    # The tokens never reach a log or the status file.
    logs = "".join(p.read_text() for p in (hermes_home / "logs").glob("*.log")) + gateway.stderr()
    statuses = "".join(p.read_text() for p in (hermes_home / "gateway").glob("*.json"))
    for secret in (slack.bot_token, slack.app_token):
        assert secret not in logs + statuses


def test_a_reply_streams_by_edits_and_a_long_one_is_split_into_numbered_messages(hermes_home, project, slack):
    paragraph = "A **bold** claim with `code` & <angle> brackets. " * 12
    reply = "\n\n".join(f"{i}. {paragraph}" for i in range(40)) + "\n\n```python\n" + "print('x')\n" * 300 + "```"
    spec = {"text": reply, "chunk_size": 1500, "delay": 0.3}  # about 10 s of streaming
    with ScriptedOpenAIServer([spec]) as model, run(hermes_home, project, slack, model):
        dm = slack.dm_channel(OWNER)
        slack.dm(OWNER, "write me an essay")
        last = slack.wait_for(lambda: next((m for m in slack.sent(dm) if re.match(r"\((\d+)/\1\)", m["text"])), None), 60, "the last chunk")
        total = int(last["text"][1 : last["text"].index("/")])
    messages = slack.sent(dm)
    assert total >= 4 and len(messages) == total
    assert all(m["text"].startswith(f"({i}/{total})") and len(m["text"]) <= 3900 for i, m in enumerate(messages, 1))
    # The first message was the draft, edited while the reply arrived, then replaced by chunk 1.
    draft = messages[0]
    assert draft["edits"] >= 2 and not draft["history"][0].startswith("(1/")
    assert any(not text.startswith("(1/") for text in draft["history"][1:-1])  # an edit while streaming
    joined = "\n".join(m["text"] for m in messages)
    assert all(f"{i}. A *bold* claim with `code` &amp; &lt;angle&gt; brackets." in joined for i in range(40))
    assert joined.count("print('x')") == 300


def test_approval_buttons_in_a_thread_answer_only_the_person_who_asked(hermes_home, project, slack):
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
        {"text": "Wrote it."},
    ]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, slack, model, allowed=(OWNER, FRIEND)):
        mention = slack.mention(OWNER, "write notes.txt")
        asked = in_thread(slack, mention["ts"], "Approval needed")
        buttons = slack.buttons(asked)
        assert [label for label, _ in buttons] == ["Allow once", "Allow always", "Deny"]
        assert all(len(value.encode()) <= 64 for _, value in buttons)
        allow_once = next(value for _, value in buttons if value.endswith("|o"))
        # Anyone in the channel can see the buttons. A stranger's press is refused ...
        slack.press(STRANGER, asked, allow_once)
        assert ephemeral_for(slack, STRANGER, "not authorised")["thread_ts"] == mention["ts"]
        # ... and so is another allowed person's; only they see the answer, and nothing happens.
        slack.press(FRIEND, asked, allow_once)
        ephemeral_for(slack, FRIEND, "Only the person who asked for this can answer it.")
        assert not (project / "notes.txt").exists()
        assert all(e["user"] in (STRANGER, FRIEND) for e in slack.ephemeral)
        slack.press(OWNER, asked, allow_once)
        ephemeral_for(slack, OWNER, "Allowed once")
        in_thread(slack, mention["ts"], "Wrote it.")
        assert (project / "notes.txt").read_text() == "hi\n"
        # The question now says how it was answered, and its buttons are gone.
        settled = slack.wait_for(
            lambda: next((m for m in slack.sent(CHANNEL) if m["ts"] == asked["ts"] and "Allowed once" in m["text"]), None)
        )
        assert slack.buttons(settled) == []


def test_an_upload_reaches_the_model(hermes_home, project, slack):
    script = [{"text": "Read your file."}, {"text": "Nice photo."}]
    photo = b"\xff\xd8\xff\xe0 a tiny jpeg"
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, slack, model):
        dm = slack.dm_channel(OWNER)
        notes = slack.add_file("notes.txt", b"line one\nline two\n", "text/plain", user=OWNER)
        slack.dm(OWNER, "summarise", files=[notes])
        slack.wait_text(dm, "Read your file.")
        image = slack.add_file("image.jpg", photo, "image/jpeg", user=OWNER)
        slack.dm(OWNER, "what is this?", files=[image])
        slack.wait_text(dm, "Nice photo.")
    prompt = str(model.requests[0]["messages"][-1]["content"])
    assert "line two" in prompt and "summarise" in prompt
    assert list((hermes_home / "gateway" / "uploads").rglob("*notes.txt"))
    parts = model.requests[1]["messages"][-1]["content"]
    assert any(p.get("type") == "text" and "what is this?" in p["text"] for p in parts)
    assert any(p.get("type") == "image_url" and base64.b64encode(photo).decode() in p["image_url"]["url"] for p in parts)


def test_a_voice_note_is_transcribed_and_answered(hermes_home, project, slack):
    note = spoken_ogg("what does the build script do")
    with FakeSpeech() as speech, ScriptedOpenAIServer([{"text": "The build script compiles the docs."}]) as model:
        speech.expect(note, "What does the build script do?")
        voice = f'[voice]\nstt_base_url = "{speech.base_url}"\nstt_api_key = "gsk-voice-key-not-real-0123456789"\n'
        with run(hermes_home, project, slack, model, extra=voice):
            dm = slack.dm_channel(OWNER)
            slack.dm(OWNER, "", files=[slack.add_file("voice-note.ogg", note, "audio/ogg", user=OWNER)])
            slack.wait_text(dm, "🎤 What does the build script do?")
            slack.wait_text(dm, "The build script compiles the docs.")
    [upload] = speech.uploads
    assert upload.data == note and upload.filename.endswith(".ogg")
    assert "What does the build script do?" in str(model.requests[0]["messages"][-1]["content"])


def test_cron_jobs_made_in_a_dm_and_in_a_thread_deliver_there(hermes_home, project, slack):
    replies = [{"text": "The plants are watered."}, {"text": "The build is green."}]
    with ScriptedOpenAIServer(replies) as model, run(hermes_home, project, slack, model):
        dm = slack.dm_channel(OWNER)
        slack.dm(OWNER, " /cron add every 1h | water the plants")  # a space first: Slack's box takes "/" as its own
        job_id = re.search(r"Added job `([^`]+)`", slack.wait_text(dm, "Added job")["text"]).group(1)
        slack.slash(OWNER, "/hermes", f"cron run {job_id}")  # the app's slash command, in the DM
        delivered = slack.wait_text(dm, "⏰", timeout=30)
        assert "The plants are watered." in "\n".join(m["text"] for m in slack.sent(dm) if float(m["ts"]) >= float(delivered["ts"]))

        mention = slack.mention(OWNER, "/cron add every 1h | check the build")
        job_id = re.search(r"Added job `([^`]+)`", in_thread(slack, mention["ts"], "Added job")["text"]).group(1)
        slack.channel_message(OWNER, f"/cron run {job_id}".replace("/", " /", 1), thread_ts=mention["ts"])  # the thread goes on, no mention
        in_thread(slack, mention["ts"], "⏰", timeout=30)
        in_thread(slack, mention["ts"], "The build is green.", timeout=30)
    assert all(m["thread_ts"] == mention["ts"] for m in slack.sent(CHANNEL))


def test_the_events_api_takes_only_signed_requests(hermes_home, project, slack):
    port = free_port()
    with ScriptedOpenAIServer([{"text": "Hello from the Events API."}]) as model:
        with run(hermes_home, project, slack, model, events_port=port):
            url = f"http://127.0.0.1:{port}/slack/events"
            dm = slack.dm_channel(OWNER)

            def event(text: str) -> dict:
                ts = slack.new_ts()
                return {"type": "message", "text": text, "user": OWNER, "ts": ts, "channel": dm, "event_ts": ts, "channel_type": "im"}

            assert slack.post_event(url, event("forged as the owner"), secret="a-guess") == 401
            assert slack.post_event(url, event("forged as the owner"), signature="v0=" + "ab" * 32) == 401
            assert slack.post_event(url, event("hi")) == 200
            slack.wait_text(dm, "Hello from the Events API.")
        assert len(model.requests) == 1 and "forged" not in str(model.requests[0])
    assert slack.connections_opened == 0  # no websocket in this mode
