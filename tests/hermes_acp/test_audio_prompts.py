"""Audio prompts through hermes-acp: advertised when they can be transcribed, spoken words (espeak-ng)
transcribed by the fake OpenAI audio API and handed to the model as text, shown to the user as part
of their message; refused with the setting to change when they cannot be."""

from __future__ import annotations

import base64

import acp
import pytest

from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.speech_server import FakeSpeech, spoken_wav

VOICE_KEY = "gsk-voice-key-not-real-0123456789"


@pytest.fixture(scope="module")
def question() -> bytes:
    return spoken_wav("what does the build script do")


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    return root


def _user_text(body: dict) -> str:
    texts: list[str] = []
    for message in body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            texts += [content] if isinstance(content, str) else [p.get("text", "") for p in content]
    return "\n".join(texts)


def _shown_as_user(client: Client) -> list[str]:
    return [u.content.text for u in client.of_kind("user_message_chunk") if u.content.type == "text"]


async def test_an_audio_prompt_reaches_the_model_as_its_transcript(hermes_home, project, question):
    with FakeSpeech(api_key=VOICE_KEY) as speech, ScriptedOpenAIServer([{"text": "It builds the wheel."}]) as model:
        speech.expect(question, "What does the build script do?")
        (hermes_home / "config.toml").write_text(f'[voice]\nstt_base_url = "{speech.base_url}"\nstt_api_key = "{VOICE_KEY}"\n')
        client = Client()
        async with running_agent(client, agent_env(hermes_home, model.base_url)) as (conn, _, _):
            assert conn.init_response.agent_capabilities.prompt_capabilities.audio is True
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            prompt = [acp.text_block("Answer in one line."), acp.audio_block(base64.b64encode(question).decode(), "audio/wav")]
            assert (await conn.prompt(session_id=sid, prompt=prompt)).stop_reason == "end_turn"
        replay = Client()
        async with running_agent(replay, agent_env(hermes_home, model.base_url)) as (conn, _, _):
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
    (upload,) = speech.uploads
    assert upload.data == question and upload.filename == "prompt.wav"  # the editor's bytes, unchanged
    (request,) = model.requests
    assert "Answer in one line." in _user_text(request) and "(voice) What does the build script do?" in _user_text(request)
    assert "UklGR" not in str(request)  # no audio (base64 of "RIFF") went to the chat model
    assert _shown_as_user(client) == ["(voice) What does the build script do?"]
    assert "It builds the wheel." in client.text()
    assert "(voice) What does the build script do?" in _shown_as_user(replay)
    assert VOICE_KEY not in (hermes_home / "stderr.log").read_text()


async def test_without_a_transcription_service_audio_is_not_offered_and_refused_naming_the_setting(hermes_home, project, question):
    # A provider other than openai: nothing can transcribe.
    with ScriptedOpenAIServer([{"text": "Hello."}]) as model:
        (hermes_home / "config.toml").write_text(f'[providers.local]\nbase_url = "{model.base_url}"\n')
        client = Client()
        env = agent_env(hermes_home, None, extra={"HERMES_MODEL": "local:scripted"})
        async with running_agent(client, env) as (conn, _, _):
            assert conn.init_response.agent_capabilities.prompt_capabilities.audio is False
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            audio = acp.audio_block(base64.b64encode(question).decode(), "audio/wav")
            with pytest.raises(acp.RequestError) as refused:
                await conn.prompt(session_id=sid, prompt=[acp.text_block("keep this"), audio])
            assert model.requests == []  # no turn ran
            await conn.prompt(session_id=sid, prompt=[acp.text_block("hi")])
    told = str(refused.value.data)
    assert "The audio was not transcribed" in told and "[voice] stt_base_url" in told
    (request,) = model.requests
    assert "hi" in _user_text(request) and "keep this" not in _user_text(request)  # the refused prompt left nothing behind
    assert _shown_as_user(client) == []


async def test_the_openai_key_offers_audio_and_a_base_without_transcriptions_names_voice_settings(hermes_home, project, question):
    # OPENAI_BASE_URL points at a chat-only server: audio is offered (the openai provider has the
    # endpoint upstream), and the server's 404 is explained.
    with ScriptedOpenAIServer([{"text": "Hello."}]) as model:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, model.base_url)) as (conn, _, _):
            assert conn.init_response.agent_capabilities.prompt_capabilities.audio is True
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            with pytest.raises(acp.RequestError) as refused:
                await conn.prompt(session_id=sid, prompt=[acp.audio_block(base64.b64encode(question).decode(), "audio/wav")])
    told = str(refused.value.data)
    assert "has no /audio/transcriptions (HTTP 404" in told and "set [voice] stt_base_url" in told
    assert model.requests == []
