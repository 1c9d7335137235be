"""The real hermes-gateway process on Discord: the fake Discord (Gateway websocket + REST), the real
discord.py inside the gateway, and the scripted model."""

from __future__ import annotations

import base64
import json
import re
import time

import pytest

from tests.fakes.discord_server import FakeDiscord
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.speech_server import FakeSpeech, spoken_ogg
from tests.hermes_gateway.platform_harness import GatewayProcess, cli, gateway_status, start_gateway, wait_until

ADA = 310000000000000001  # the owner
BOB = 310000000000000002  # allowed too
EVE = 310000000000000666  # a stranger
NUMBERED = re.compile(r"\((\d+)/(\d+)\)")


@pytest.fixture
def discord():
    with FakeDiscord() as fake:
        fake.user(ADA, "Ada")
        fake.user(BOB, "Bob")
        fake.user(EVE, "Eve")
        yield fake


def run(hermes_home, project, discord: FakeDiscord, model, *, allowed=(ADA,), extra: str = "", token: str | None = None) -> GatewayProcess:
    """A gateway with only Discord; the token comes from the environment, as a service would have it."""
    section = f"""
[discord]
api_base_url = "{discord.api_base_url}"
gateway_url = "{discord.gateway_url}"
allowed_users = {json.dumps([str(a) for a in allowed])}
owner = "{ADA}"
{extra}
"""
    env = {"DISCORD_BOT_TOKEN": token or discord.token}
    return start_gateway(hermes_home, project, section, model=model, wait_for=[] if token else ["discord"], env=env)


def buttons_of(message: dict) -> list[str]:
    return [b["custom_id"] for row in message["components"] for b in row["components"]]


def test_pairing_and_the_authorisation_matrix(hermes_home, project, discord):
    with ScriptedOpenAIServer([{"text": "Welcome aboard."}]) as model, run(hermes_home, project, discord, model) as gateway:
        discord.dm(EVE, "hello")
        told = discord.wait_dm(EVE, "Pairing code:")
        code = re.search(r"Pairing code: (\w{8})", told["content"]).group(1)
        assert f"discord:{EVE}" in told["content"]
        # In a channel a stranger's chatter gets nothing, a mention a short refusal (never a code).
        discord.say(EVE, "just chatting here")
        discord.say(EVE, "do things for me", mention=True)
        refusal = discord.wait_text(discord.channel_id, "I only answer people I know")
        # A stranger's press is refused, to them alone (an ephemeral message).
        pressed = discord.press(EVE, told, "ap|0123abcd|o")
        response = discord.response_for(pressed)
        assert response["type"] == 4 and response["data"]["flags"] == 64 and "not authorised" in response["data"]["content"]
        assert [m["content"] for m in discord.sent(discord.channel_id)] == [refusal["content"]]
        assert "Pairing code" not in refusal["content"]
        assert model.requests == []  # no turn ever started
        # Approved on the machine, the stranger can talk.
        assert cli(hermes_home, "pairing", "approve", "WRONG123").returncode == 1
        approved = cli(hermes_home, "pairing", "approve", code)
        assert approved.returncode == 0 and f"discord:{EVE}" in approved.stdout
        discord.dm(EVE, "now?")
        discord.wait_dm(EVE, "Welcome aboard.")
        assert len(model.requests) == 1
        status = cli(hermes_home, "gateway", "status").stdout
        assert "discord" in status and "hermes" in status
        gateway.stop()
    # The token never reaches a log or the status file.
    logs = "".join(p.read_text() for p in (hermes_home / "logs").glob("*.log")) + gateway.stderr()
    statuses = "".join(p.read_text() for p in (hermes_home / "gateway").glob("*.json"))
    assert discord.token not in logs + statuses


def test_a_reply_streams_into_one_message_by_edits(hermes_home, project, discord):
    reply = "Streaming " + " ".join(f"word{i}" for i in range(60)) + " done."
    script = [{"text": reply, "chunk_size": 40, "delay": 0.15}]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, discord, model, extra="edit_interval = 0.3"):
        discord.dm(ADA, "stream something")
        final = discord.wait_dm(ADA, "done.", timeout=30)
    [message] = discord.sent_to(ADA)
    assert message["id"] == final["id"] and message["content"] == reply
    drafts = message["history"][:-1]
    assert message["edits"] >= 2 and len(drafts) >= 2
    # Each draft is a longer beginning of the reply, shown as it was written.
    assert all(reply.startswith(draft) for draft in drafts)
    assert [len(d) for d in drafts] == sorted({len(d) for d in drafts})
    assert discord.dm_channel(ADA) in discord.typing


def test_a_long_reply_is_split_into_numbered_messages_within_the_limit(hermes_home, project, discord):
    paragraph = "A **bold** claim with `code` & <angle> brackets. " * 12
    reply = "\n\n".join(f"{i}. {paragraph}" for i in range(40)) + "\n\n```python\n" + "print('x')\n" * 300 + "```"
    # Streamed over about two seconds: past the first draft's moment, so a draft is edited.
    with ScriptedOpenAIServer([{"text": reply, "chunk_size": 2000, "delay": 0.15}]) as model, run(hermes_home, project, discord, model):
        discord.dm(ADA, "write me an essay")
        discord.wait_for(
            lambda: any((m := NUMBERED.match(s["content"])) and m.group(1) == m.group(2) for s in discord.sent_to(ADA)),
            40,
            "the last chunk",
        )
    chunks = [m for m in discord.sent_to(ADA) if NUMBERED.match(m["content"])]
    total = len(chunks)
    assert total >= 8 and all(m["content"].startswith(f"({i}/{total})") for i, m in enumerate(chunks, 1))
    assert all(len(m["content"]) <= 2000 for m in chunks)
    assert chunks[0]["edits"] >= 1  # the streamed draft became the first chunk
    joined = "\n".join(m["content"] for m in chunks)
    assert all(f"{i}. A **bold** claim with `code` & <angle> brackets." in joined for i in range(40))
    assert joined.count("print('x')") == 300
    assert all(m["content"].count("```") % 2 == 0 for m in chunks)


def test_approval_buttons_are_bound_to_the_person_who_asked(hermes_home, project, discord):
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
        {"text": "Wrote it."},
    ]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, discord, model, allowed=(ADA, BOB)):
        discord.say(ADA, "write notes.txt", mention=True)
        asked = discord.wait_text(discord.channel_id, "Approval needed")
        assert [b["label"] for row in asked["components"] for b in row["components"]] == ["Allow once", "Allow always", "Deny"]
        assert all(len(data.encode()) <= 64 for data in buttons_of(asked))
        allow_once = next(d for d in buttons_of(asked) if d.endswith("|o"))
        # Another allowed person pressing it: refused to them alone, and nothing happens.
        refused = discord.response_for(discord.press(BOB, asked, allow_once))
        assert refused["type"] == 4 and refused["data"]["flags"] == 64
        assert refused["data"]["content"] == "Only the person who asked for this can answer it."
        assert not (project / "notes.txt").exists()
        accepted = discord.response_for(discord.press(ADA, asked, allow_once))
        assert accepted["type"] == 6  # acknowledged; the question itself shows the outcome
        discord.wait_text(discord.channel_id, "Wrote it.")
        settled = discord.wait_for(
            lambda: next(m for m in discord.sent(discord.channel_id) if m["id"] == asked["id"])["components"] == [], 10
        )
        assert settled
        assert "Allowed once" in next(m for m in discord.sent(discord.channel_id) if m["id"] == asked["id"])["content"]
        assert (project / "notes.txt").read_text() == "hi\n"
        late = discord.response_for(discord.press(ADA, asked, allow_once))
        assert "expired or was already answered" in late["data"]["content"]


def test_a_thread_is_its_own_conversation(hermes_home, project, discord):
    script = [{"text": "Answered in the thread."}, {"text": "Answered in the channel."}]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, discord, model):
        thread = discord.new_thread("deploy questions", ADA)
        discord.say(ADA, "how do we deploy?", channel_id=thread, mention=True)
        discord.wait_text(thread, "Answered in the thread.")
        discord.say(ADA, "/whoami", mention=True)
        discord.wait_text(discord.channel_id, f"discord:{ADA}")
        discord.say(ADA, "and here?", mention=True)
        discord.wait_text(discord.channel_id, "Answered in the channel.")
    assert not any("Answered in the channel." in m["content"] for m in discord.sent(thread))
    # Two conversations: the channel's prompt did not carry the thread's history.
    channel_prompt = json.dumps(model.requests[1]["messages"])
    assert "how do we deploy?" not in channel_prompt and "and here?" in channel_prompt


def test_an_upload_reaches_the_model(hermes_home, project, discord):
    script = [{"text": "Read your file."}, {"text": "Nice photo."}]
    photo = b"\xff\xd8\xff\xe0 a tiny jpeg"
    dm = discord.dm_channel(ADA)
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, discord, model):
        discord.dm(
            ADA, "summarise", attachments=[discord.attachment(dm, "notes.txt", b"line one\nline two\n", "text/plain; charset=utf-8")]
        )
        discord.wait_dm(ADA, "Read your file.")
        discord.dm(ADA, "what is this?", attachments=[discord.attachment(dm, "photo.jpg", photo, "image/jpeg")])
        discord.wait_dm(ADA, "Nice photo.")
    prompt = str(model.requests[0]["messages"][-1]["content"])
    assert "line two" in prompt and "summarise" in prompt
    assert list((hermes_home / "gateway" / "uploads").rglob("*notes.txt"))
    parts = model.requests[1]["messages"][-1]["content"]
    assert any(p.get("type") == "text" and "what is this?" in p["text"] for p in parts)
    assert any(p.get("type") == "image_url" and base64.b64encode(photo).decode() in p["image_url"]["url"] for p in parts)


def test_a_voice_message_is_transcribed_and_answered(hermes_home, project, discord):
    note = spoken_ogg("What does the build script do?")
    with FakeSpeech() as speech, ScriptedOpenAIServer([{"text": "The build script compiles the docs."}]) as model:
        speech.expect(note, "What does the build script do?")
        voice = f'[voice]\nstt_base_url = "{speech.base_url}"\nstt_api_key = "gsk-voice-key-not-real-0123456789"\n'
        with run(hermes_home, project, discord, model, extra=voice):
            attachment = discord.attachment(discord.dm_channel(ADA), "voice-message.ogg", note, "audio/ogg", voice=True)
            discord.dm(ADA, "", attachments=[attachment], voice=True)
            discord.wait_dm(ADA, "What does the build script do?")
            discord.wait_dm(ADA, "The build script compiles the docs.")
    [upload] = speech.uploads
    assert upload.data == note and upload.filename.endswith(".ogg")
    assert "What does the build script do?" in str(model.requests[0]["messages"][-1]["content"])


def test_a_cron_job_made_in_the_chat_delivers_to_it(hermes_home, project, discord):
    with ScriptedOpenAIServer([{"text": "The plants are watered."}]) as model, run(hermes_home, project, discord, model):
        discord.dm(ADA, "/cron add every 1h | water the plants")
        added = discord.wait_dm(ADA, "Added job")["content"]
        job_id = re.search(r"Added job `([^`]+)`", added).group(1)
        discord.dm(ADA, f"/cron run {job_id}")
        delivered = discord.wait_dm(ADA, "⏰", timeout=30)
        discord.wait_for(lambda: any("The plants are watered." in m["content"] for m in discord.sent_to(ADA)), 30, "the job's result")
    later = [m["content"] for m in discord.sent_to(ADA) if int(m["id"]) >= int(delivered["id"])]
    assert "The plants are watered." in "\n".join(later)


def test_a_rejected_token_is_retried_slowly_and_reported_without_the_token(hermes_home, project, discord):
    wrong = "MTAwMDAwMDAwMDAwMDAwMDAw.revoked.token-not-real-0123456789"
    with ScriptedOpenAIServer([]) as model, run(hermes_home, project, discord, model, token=wrong) as gateway:

        def retrying() -> dict | None:
            state = (gateway_status(hermes_home).get("platforms") or {}).get("discord") or {}
            return state if state.get("state") == "retrying" else None

        state = wait_until(retrying, 30, "Discord to be retrying")
        assert "rejected the bot token" in state["error"] and "DISCORD_BOT_TOKEN" in state["error"]
        assert state["retry_at"] - time.time() > 200  # only a new token helps: not retried every second
        status = cli(hermes_home, "gateway", "status")
        assert status.returncode == 0 and "retrying" in status.stdout
        assert discord.identifies == []  # it never got as far as the gateway
        code, err = gateway.stop()
    assert code == 0
    logs = "".join(p.read_text() for p in (hermes_home / "logs").glob("*.log")) + err
    assert wrong not in logs + str(gateway_status(hermes_home)) and "rejected the bot token" in logs
