"""Voice through the real hermes-gateway on Telegram: a voice note (espeak-ng speech encoded as Ogg/Opus,
as phones record them) goes through the fake transcription endpoint, the transcript is shown in the
chat and the model gets it; with /voice on each reply also comes as a voice message."""

from __future__ import annotations

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.speech_server import FakeSpeech, spoken_ogg
from tests.hermes_gateway.harness import OWNER, STRANGER, start

VOICE_KEY = "gsk-voice-key-not-real-0123456789"


def _voice(speech: FakeSpeech) -> str:
    return f'[voice]\nstt_base_url = "{speech.base_url}"\ntts_base_url = "{speech.base_url}"\nstt_api_key = "{VOICE_KEY}"\n'


def _user_text(body: dict) -> str:
    texts: list[str] = []
    for message in body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            texts += [content] if isinstance(content, str) else [p.get("text", "") for p in content]
    return "\n".join(texts)


def test_a_voice_note_is_transcribed_shown_and_answered(hermes_home, project, telegram):
    note = spoken_ogg("what is in the read me file")
    with FakeSpeech(api_key=VOICE_KEY) as speech, ScriptedOpenAIServer([{"text": "It explains how to install."}]) as model:
        speech.expect(note, "What is in the README file?")
        with start(hermes_home, project, telegram, model, extra=_voice(speech)) as gateway:
            telegram.send_voice_note(OWNER, note, duration=2)
            shown = telegram.wait_text(OWNER, "🎤")
            telegram.wait_text(OWNER, "It explains how to install.")
            _, stderr = gateway.stop()
    assert shown["text"] == "🎤 What is in the README file?"
    (upload,) = speech.uploads
    assert upload.data == note and upload.filename.endswith(".ogg")  # the phone's Ogg/Opus, unchanged
    assert upload.authorization == f"Bearer {VOICE_KEY}"
    (request,) = model.requests
    assert "What is in the README file?" in _user_text(request)
    assert "T2dnUw" not in str(request)  # no audio (base64 of "OggS") went to the chat model
    assert VOICE_KEY not in stderr


def test_voice_on_sends_each_reply_as_a_voice_message_until_voice_off(hermes_home, project, telegram):
    replies = [{"text": "Run **the tests** with `pytest`."}, {"text": "Not spoken."}, {"text": "Bye."}]
    with FakeSpeech() as speech, ScriptedOpenAIServer(replies) as model:
        with start(hermes_home, project, telegram, model, extra=_voice(speech)):
            telegram.send_user_message(OWNER, "/voice on")
            telegram.wait_text(OWNER, "Voice replies on")
            telegram.send_user_message(OWNER, "how do I test it?")
            telegram.wait_for(lambda: telegram.uploads, 30, "a voice message")
            telegram.send_user_message(OWNER, "/voice off")
            telegram.wait_text(OWNER, "Voice replies off")
            telegram.send_user_message(OWNER, "thanks")
            telegram.wait_text(OWNER, "Not spoken.")
            telegram.send_user_message(OWNER, "/voice on")
            telegram.send_user_message(OWNER, "bye")
            telegram.wait_for(lambda: len(telegram.uploads) >= 2, 30, "the second voice message")
    first, last = telegram.uploads
    assert first["method"] == "sendVoice" and first["chat_id"] == OWNER and first["mime"] == "audio/ogg"
    assert first["data"] == speech.made[0] and first["data"].startswith(b"OggS")
    # The reply was read as prose, and the one sent while voice was off was never spoken.
    assert [body["input"] for body in speech.spoken] == ["Run the tests with pytest.", "Bye."]
    assert all(body["response_format"] == "opus" for body in speech.spoken)
    assert telegram.wait_text(OWNER, "Run <b>the tests</b>")  # the written reply still came


def test_a_strangers_voice_note_is_never_transcribed(hermes_home, project, telegram):
    note = spoken_ogg("delete everything")
    with FakeSpeech() as speech, ScriptedOpenAIServer([{"text": "should never be asked"}]) as model:
        with start(hermes_home, project, telegram, model, extra=_voice(speech)):
            telegram.send_voice_note(STRANGER, note, duration=1)
            telegram.wait_text(STRANGER, "Pairing code")
    assert speech.uploads == [] and model.requests == []


def test_a_voice_note_the_service_cannot_take_is_explained_in_the_chat(hermes_home, project, telegram):
    # No [voice]: the openai provider stands in, and its base (the scripted chat server) has no
    # /audio/transcriptions.
    note = spoken_ogg("hello")
    with ScriptedOpenAIServer([{"text": "I could not hear that."}]) as model:
        with start(hermes_home, project, telegram, model):
            telegram.send_voice_note(OWNER, note, duration=1)
            warning = telegram.wait_text(OWNER, "has no /audio/transcriptions")
    assert "set [voice] stt_base_url" in warning["text"]
    assert all("hello" not in _user_text(request) for request in model.requests)
