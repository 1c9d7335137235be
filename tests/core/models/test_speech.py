"""core.models.speech against the fake OpenAI audio API, through the real openai SDK: real speech made
by espeak-ng goes up as it is and its transcript comes back; keys, limits, failures and spoken replies."""

from __future__ import annotations

import importlib.util
import socket
import subprocess

import pytest

from core.config import Config
from core.models.speech import (
    MAX_AUDIO_BYTES,
    MAX_SPEECH_CHARS,
    SpeechError,
    audio_duration,
    speakable,
    speech_configured,
    synthesize,
    transcribe,
    transcription_configured,
)
from tests.fakes.speech_server import FakeSpeech, ogg_opus, spoken_ogg, spoken_wav, wav_silence

VOICE_KEY = "gsk-voice-key-not-real-0123456789"
PROVIDER_KEY = "sk-provider-key-not-real-0123456789"


@pytest.fixture(scope="module")
def lights() -> bytes:
    return spoken_wav("turn on the lights in the kitchen")


@pytest.fixture
def fake():
    with FakeSpeech() as server:
        yield server


def voice(**settings) -> Config:
    return Config.model_validate({"voice": settings})


async def test_a_spoken_wav_goes_up_as_it_is_and_its_transcript_comes_back(fake, lights):
    fake.expect(lights, "Turn on the lights in the kitchen.")
    config = voice(stt_base_url=fake.base_url, stt_language="en")
    assert transcription_configured(config)
    text = await transcribe(config, lights, filename="prompt", mime="audio/wav")
    assert text == "Turn on the lights in the kitchen."
    (upload,) = fake.uploads
    assert upload.data == lights  # the same bytes: nothing converted
    assert upload.filename == "prompt.wav" and upload.content_type == "audio/wav"
    assert upload.fields == {"model": "whisper-1", "language": "en"}


async def test_a_voice_note_named_oga_is_uploaded_as_ogg(fake):
    # Telegram names voice notes .oga; Groq takes only .ogg. The bytes (Ogg/Opus) go as they are.
    note = spoken_ogg("call me back")
    assert audio_duration(note) == pytest.approx(audio_duration(spoken_wav("call me back")), abs=0.05)
    fake.expect(note, "call me back")
    assert await transcribe(voice(stt_base_url=fake.base_url), note, filename="voice/file_7.oga", mime="audio/ogg") == "call me back"
    assert fake.uploads[0].filename == "file_7.ogg" and fake.uploads[0].data == note


async def test_the_voice_key_goes_to_the_voice_service(fake, lights):
    fake.api_key = VOICE_KEY
    fake.expect(lights, "kitchen lights")
    config = voice(stt_base_url=fake.base_url + "/", stt_api_key=VOICE_KEY)
    assert await transcribe(config, lights, filename="a.wav", mime="audio/wav") == "kitchen lights"
    assert fake.uploads[-1].authorization == f"Bearer {VOICE_KEY}"


async def test_without_a_voice_key_the_provider_at_the_same_address_lends_its_key(fake, lights):
    # A Groq provider used for chat: [voice] names the same base and no key of its own.
    fake.api_key = PROVIDER_KEY
    fake.expect(lights, "kitchen lights")
    config = Config.model_validate(
        {"providers": {"groq": {"base_url": fake.base_url, "api_key": PROVIDER_KEY}}, "voice": {"stt_base_url": fake.base_url}}
    )
    assert await transcribe(config, lights, filename="a.wav", mime="audio/wav") == "kitchen lights"


async def test_with_no_voice_section_the_openai_provider_transcribes_and_speaks(fake, lights):
    fake.api_key = PROVIDER_KEY
    fake.expect(lights, "kitchen lights")
    config = Config.model_validate({"providers": {"openai": {"base_url": fake.base_url, "api_key": PROVIDER_KEY}}})
    assert transcription_configured(config) and speech_configured(config)
    assert await transcribe(config, lights, filename="a.wav", mime="audio/wav") == "kitchen lights"
    data, mime, _ = await synthesize(config, "Done.")
    assert mime == "audio/ogg" and data.startswith(b"OggS")
    assert [u.authorization for u in fake.uploads] == [f"Bearer {PROVIDER_KEY}"]


def test_no_service_means_not_configured():
    anthropic_only = Config.model_validate({"providers": {"anthropic": {"api_key": PROVIDER_KEY}}})
    for config in (Config(), anthropic_only):
        assert not transcription_configured(config) and not speech_configured(config)


async def test_not_configured_says_what_to_set(lights):
    with pytest.raises(SpeechError) as heard:
        await transcribe(Config(), lights, filename="a.wav", mime="audio/wav")
    assert "[voice] stt_base_url" in str(heard.value) and "OPENAI_API_KEY" in str(heard.value)
    with pytest.raises(SpeechError) as spoken:
        await synthesize(Config(), "hello")
    assert "[voice] tts_base_url" in str(spoken.value)


async def test_a_refused_key_is_named_by_its_setting_never_by_its_value(fake, lights):
    fake.api_key = "the-right-key-0123456789"
    with pytest.raises(SpeechError) as caught:
        await transcribe(voice(stt_base_url=fake.base_url, stt_api_key=VOICE_KEY), lights, filename="a.wav", mime="audio/wav")
    message = str(caught.value)
    assert "refused the API key (HTTP 401)" in message and "[voice] stt_api_key" in message and "VOICE_STT_API_KEY" in message
    assert VOICE_KEY not in message


async def test_a_recording_longer_than_max_seconds_is_refused_before_sending(fake, lights):
    seconds = audio_duration(lights)
    assert seconds is not None and 1.0 < seconds < 5.0
    with pytest.raises(SpeechError) as caught:
        await transcribe(voice(stt_base_url=fake.base_url, max_seconds=1), lights, filename="a.wav", mime="audio/wav")
    assert "[voice] max_seconds allows 1 s" in str(caught.value)
    with pytest.raises(SpeechError, match="max_seconds allows 1 min 0 s"):
        await transcribe(voice(stt_base_url=fake.base_url, max_seconds=60), ogg_opus(61.0), filename="v.oga", mime="audio/ogg")
    assert fake.uploads == []


async def test_a_recording_over_25_mb_is_refused_before_sending(fake):
    big = wav_silence(1.0)
    big += b"\x00" * (MAX_AUDIO_BYTES + 1 - len(big))
    with pytest.raises(SpeechError, match="transcription takes up to 25 MB"):
        await transcribe(voice(stt_base_url=fake.base_url, max_seconds=100_000), big, filename="a.wav", mime="audio/wav")
    assert fake.uploads == []


async def test_audio_the_service_cannot_read_gives_its_reason(fake):
    with pytest.raises(SpeechError) as caught:
        await transcribe(voice(stt_base_url=fake.base_url), b"OggS" + b"\x00" * 400, filename="v.ogg", mime="audio/ogg")
    assert "refused the request (HTTP 400)" in str(caught.value) and "corrupted or unsupported" in str(caught.value)


async def test_silence_is_reported_as_no_speech(fake):
    quiet = wav_silence(1.0)
    fake.expect(quiet, "")
    with pytest.raises(SpeechError, match="no speech was recognised"):
        await transcribe(voice(stt_base_url=fake.base_url), quiet, filename="a.wav", mime="audio/wav")


async def test_a_base_without_the_endpoint_names_the_setting(fake, lights):
    without_v1 = fake.base_url.removesuffix("/v1")
    with pytest.raises(SpeechError) as caught:
        await transcribe(voice(stt_base_url=without_v1), lights, filename="a.wav", mime="audio/wav")
    assert "has no /audio/transcriptions (HTTP 404" in str(caught.value) and "set [voice] stt_base_url" in str(caught.value)


async def test_a_service_that_is_not_there_names_the_setting(lights):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(SpeechError) as caught:
        await transcribe(voice(stt_base_url=f"http://127.0.0.1:{port}/v1"), lights, filename="a.wav", mime="audio/wav")
    assert f"could not reach the transcription service at 127.0.0.1:{port}" in str(caught.value)
    assert "check [voice] stt_base_url" in str(caught.value)


async def test_local_transcription_without_faster_whisper_says_what_to_install(lights):
    assert importlib.util.find_spec("faster_whisper") is None, "this test checks the message shown when faster-whisper is missing"
    config = voice(stt_base_url="local")
    assert transcription_configured(config)
    with pytest.raises(SpeechError) as caught:
        await transcribe(config, lights, filename="a.wav", mime="audio/wav")
    assert "pip install faster-whisper" in str(caught.value) and 'stt_base_url = "local"' in str(caught.value)


async def test_a_reply_is_spoken_as_ogg_opus_without_its_markdown(fake):
    config = voice(tts_base_url=fake.base_url, tts_voice="nova")
    reply = "## Done\n\nI fixed **two** bugs in `parser.py`:\n\n```python\nx = 1\n```\n\nSee [the docs](https://example.org/docs)."
    data, mime, name = await synthesize(config, reply)
    assert (mime, name) == ("audio/ogg", "reply.ogg") and data.startswith(b"OggS")
    duration = audio_duration(data)
    assert duration is not None and duration > 1.0
    (body,) = fake.spoken
    assert body["response_format"] == "opus" and body["voice"] == "nova" and body["model"] == "gpt-4o-mini-tts"
    assert body["input"] == "Done\nI fixed two bugs in parser.py:\n(code left out)\nSee the docs."


async def test_a_long_reply_is_spoken_up_to_the_last_sentence_that_fits(fake):
    reply = " ".join(f"Sentence number {n} says a little more." for n in range(400))
    assert len(reply) > MAX_SPEECH_CHARS
    data, _, _ = await synthesize(voice(tts_base_url=fake.base_url), reply)
    spoken = fake.spoken[0]["input"]
    assert len(spoken) <= MAX_SPEECH_CHARS and data.startswith(b"OggS")  # the fake refuses more, as OpenAI does
    assert spoken.endswith("a little more. The rest is in the written reply.")


async def test_a_spoken_reply_can_be_transcribed_back(fake):
    # The Ogg/Opus the speech endpoint makes is what a voice note looks like: it goes up unchanged.
    config = voice(stt_base_url=fake.base_url, tts_base_url=fake.base_url)
    data, mime, name = await synthesize(config, "All tests pass.")
    fake.expect(data, "All tests pass.")
    assert await transcribe(config, data, filename=name, mime=mime) == "All tests pass."


async def test_a_speech_service_failure_is_said_plainly(fake):
    fake.fail_next = [400]
    with pytest.raises(SpeechError, match=r"the speech service at 127\.0\.0\.1:\d+ refused the request \(HTTP 400\)"):
        await synthesize(voice(tts_base_url=fake.base_url), "hello")


def test_durations_come_from_the_headers(lights):
    assert audio_duration(wav_silence(2.5)) == pytest.approx(2.5)
    assert audio_duration(ogg_opus(4.0)) == pytest.approx(4.0, abs=0.02)
    seconds = audio_duration(lights)
    assert seconds is not None and seconds == pytest.approx((len(lights) - 44) / 44_100)  # espeak-ng: 22050 Hz, 16 bits
    # Written to a pipe, a WAV has no sizes in its header: the data then runs to the end.
    piped = subprocess.run(["espeak-ng", "--stdout", "turn on the lights"], capture_output=True, check=True).stdout
    assert piped[4:8] != lights[4:8]
    assert audio_duration(piped) == pytest.approx((len(piped) - 44) / 44_100)
    assert audio_duration(b"ID3" + b"\x00" * 100) is None and audio_duration(b"garbage") is None


def test_speakable_reads_markdown_as_prose():
    assert speakable("# Title\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |") == "Title\none\ntwo\na, b\n1, 2"
    assert speakable("Open <https://example.org> or ![a chart](c.png) now") == "Open a link or a chart now"
    assert speakable("short", limit=100) == "short"
