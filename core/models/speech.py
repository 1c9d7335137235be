"""Speech: voice notes and audio prompts to text, and replies to speech (``[voice]``).

Both directions speak OpenAI's audio API, which OpenAI, Groq and local servers
(faster-whisper-server, whisper.cpp's server, Kokoro-FastAPI ...) all offer:
``POST {base}/audio/transcriptions`` (multipart: file, model) and ``POST {base}/audio/speech``.
``[voice] stt_base_url = "local"`` transcribes on this machine with faster-whisper instead.

Where a service and its key come from, for each direction:

- ``[voice] stt_base_url`` (``tts_base_url``) when set, with ``stt_api_key`` (``tts_api_key``,
  or ``VOICE_STT_API_KEY``/``VOICE_TTS_API_KEY``); when that key is unset, the key of the
  ``[providers.NAME]`` whose base_url is the same URL (a Groq provider, say), else none
  (local servers want none);
- else the ``openai`` provider (``OPENAI_API_KEY``, ``OPENAI_BASE_URL`` or ``[providers.openai]``),
  whose API has both endpoints;
- else the direction is not configured. No other provider is tried: Anthropic, OpenRouter and
  Ollama have no audio endpoints.

Audio goes as it came (Ogg/Opus voice notes, WAV, MP3, M4A, WebM, FLAC): the APIs decode it
themselves; only the file name's extension is made to match the contents, since the APIs
choose the decoder by it (Telegram names voice notes ``.oga``, which Groq refuses). The openai
SDK and faster-whisper are imported on first use.
"""

from __future__ import annotations

import asyncio
import re
import struct
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from core.config import Config

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "LOCAL",
    "MAX_AUDIO_BYTES",
    "MAX_SPEECH_CHARS",
    "SpeechError",
    "audio_duration",
    "speakable",
    "speech_configured",
    "synthesize",
    "transcribe",
    "transcription_configured",
]

LOCAL = "local"
# What OpenAI's and Groq's transcription endpoints take in one upload.
MAX_AUDIO_BYTES = 25 * 1024 * 1024
# What OpenAI's speech endpoint takes in one request (characters of input).
MAX_SPEECH_CHARS = 4096
OPENAI_API = "https://api.openai.com/v1"
_LOCAL_DEFAULT_MODEL = "base"  # faster-whisper's size when stt_model is left at the API's "whisper-1"
_TIMEOUT = 120.0
_CUT_NOTE = " The rest is in the written reply."


class SpeechError(Exception):
    """Transcription or speech failed, or is not configured; the message says what to set or what
    went wrong (never a key)."""


@dataclass(frozen=True, slots=True)
class _Service:
    """One direction's service: where it is, its key, its model, and whether the openai provider
    stands in for ``[voice]`` (messages then say which settings to check)."""

    kind: str  # "stt" or "tts": names the [voice] settings in messages
    base_url: str
    api_key: str | None
    model: str
    from_provider: bool = False

    @property
    def base_setting(self) -> str:
        return f"[voice] {self.kind}_base_url"

    def key_advice(self) -> str:
        own = f"set [voice] {self.kind}_api_key in config.toml (or VOICE_{self.kind.upper()}_API_KEY)"
        return f"check OPENAI_API_KEY ([providers.openai] api_key), or {own}" if self.from_provider else own

    def address_advice(self) -> str:
        if self.from_provider:
            return f"check OPENAI_BASE_URL ([providers.openai] base_url), or set {self.base_setting}"
        return f"check {self.base_setting} and that the service is running"


# -- configuration ---------------------------------------------------------------------------


def transcription_configured(config: Config) -> bool:
    """Whether voice notes and audio prompts can be transcribed (a service or the local model is set)."""
    return _stt_service(config) is not None


def speech_configured(config: Config) -> bool:
    """Whether replies can be spoken (a text-to-speech service is set)."""
    return _tts_service(config) is not None


def _stt_service(config: Config) -> _Service | None:
    voice = config.voice
    if voice.stt_base_url and voice.stt_base_url.strip() == LOCAL:
        model = _LOCAL_DEFAULT_MODEL if voice.stt_model == "whisper-1" else voice.stt_model
        return _Service("stt", LOCAL, None, model)
    return _service(
        config,
        voice.stt_base_url,
        voice.stt_api_key,
        voice.stt_model,
        "stt",
    )


def _tts_service(config: Config) -> _Service | None:
    voice = config.voice
    return _service(config, voice.tts_base_url, voice.tts_api_key, voice.tts_model, "tts")


def _service(config: Config, base_url: str | None, api_key: Any, model: str, kind: str) -> _Service | None:
    key = api_key.get_secret_value() if api_key is not None else None
    if base_url and base_url.strip():
        base = base_url.strip().rstrip("/")
        return _Service(kind, base, key or _provider_key_for(config, base), model)
    openai = config.providers.get("openai")
    if openai is None or openai.resolved_profile("openai").wire != "openai":
        return None
    base = (openai.base_url or OPENAI_API).rstrip("/")
    provider_key = openai.api_key.get_secret_value() if openai.api_key is not None else None
    return _Service(kind, base, key or provider_key, model, from_provider=True)


def _provider_key_for(config: Config, base: str) -> str | None:
    """The key of the configured provider at ``base``, if any."""
    for name, provider in config.providers.items():
        profile = provider.resolved_profile(name)
        provider_base = provider.base_url or profile.base_url or (OPENAI_API if name == "openai" else None)
        if provider_base and provider_base.rstrip("/") == base and provider.api_key is not None:
            return provider.api_key.get_secret_value()
    return None


def _not_configured(kind: str) -> str:
    if kind == "stt":
        return (
            "voice is not set up: set [voice] stt_base_url in config.toml to an OpenAI-compatible API with "
            '/audio/transcriptions (OpenAI, Groq, a local whisper server), or "local" for faster-whisper '
            "on this machine; an OPENAI_API_KEY also works"
        )
    return (
        "spoken replies are not set up: set [voice] tts_base_url in config.toml to an OpenAI-compatible API "
        "with /audio/speech; an OPENAI_API_KEY also works"
    )


# -- speech to text --------------------------------------------------------------------------


async def transcribe(config: Config, audio: bytes, *, filename: str, mime: str) -> str:
    """The words spoken in ``audio`` (a voice note, an audio prompt).

    Refuses, before sending anything, audio over ``MAX_AUDIO_BYTES`` or longer than ``[voice]
    max_seconds`` (when its length can be read from the file: WAV, Ogg, FLAC). SpeechError when
    not configured, refused, unreachable, or when nothing was heard.
    """
    service = _stt_service(config)
    if service is None:
        raise SpeechError(_not_configured("stt"))
    if not audio:
        raise SpeechError("the recording is empty")
    if len(audio) > MAX_AUDIO_BYTES:
        raise SpeechError(
            f"the recording is {len(audio) / 1_048_576:.1f} MB; transcription takes up to {MAX_AUDIO_BYTES // 1_048_576} MB. "
            "Send a shorter one."
        )
    seconds = audio_duration(audio)
    limit = config.voice.max_seconds
    if seconds is not None and seconds > limit:
        raise SpeechError(
            f"the recording is {_clock(seconds)} long; [voice] max_seconds allows {_clock(limit)}. "
            "Send a shorter one, or raise max_seconds in config.toml."
        )
    name, kind = _upload_name(audio, filename, mime)
    language = config.voice.stt_language
    if service.base_url == LOCAL:
        text = await asyncio.to_thread(_transcribe_locally, service.model, audio, language)
    else:
        text = await _transcribe_remotely(service, audio, name, kind, language, config.secrets)
    text = text.strip()
    if not text:
        raise SpeechError("no speech was recognised in the recording")
    return text


async def _transcribe_remotely(service: _Service, audio: bytes, name: str, mime: str, language: str | None, secrets: list[str]) -> str:
    extra: dict[str, Any] = {"language": language} if language else {}
    async with _client(service) as client:
        try:
            result = await client.audio.transcriptions.create(file=(name, audio, mime), model=service.model, **extra)
        except Exception as exc:
            raise _failure(exc, "the transcription service", "/audio/transcriptions", service, secrets) from None
    text = getattr(result, "text", None)
    if not isinstance(text, str):
        raise SpeechError(f"the transcription service at {_where(service)} answered without a transcript")
    return text


_local_models: dict[str, Any] = {}
_local_lock = threading.Lock()


def _transcribe_locally(model_name: str, audio: bytes, language: str | None) -> str:
    """faster-whisper on this machine (run in a thread: it holds the CPU for seconds)."""
    import importlib
    import io

    try:
        whisper = importlib.import_module("faster_whisper")
    except ImportError:
        raise SpeechError(
            '[voice] stt_base_url = "local" needs faster-whisper: install it into the environment hermes-editor runs in '
            "(pip install faster-whisper), or set stt_base_url to a transcription API"
        ) from None
    with _local_lock:
        model = _local_models.get(model_name)
        if model is None:
            try:
                model = whisper.WhisperModel(model_name, device="auto", compute_type="auto")
            except Exception as exc:
                raise SpeechError(
                    f"faster-whisper could not load the model {model_name!r} ({type(exc).__name__}: {exc}); "
                    'set [voice] stt_model to a size ("base", "small", "large-v3") or a converted model\'s directory'
                ) from None
            _local_models[model_name] = model
    try:
        segments, _info = model.transcribe(io.BytesIO(audio), language=language or None, vad_filter=True)
        return " ".join(segment.text.strip() for segment in segments)
    except Exception as exc:
        raise SpeechError(f"faster-whisper could not transcribe the recording ({type(exc).__name__}: {exc})") from None


# -- text to speech --------------------------------------------------------------------------


async def synthesize(config: Config, text: str) -> tuple[bytes, str, str]:
    """``text`` spoken: ``(data, mime, filename)``, Ogg/Opus (``audio/ogg``, ``reply.ogg``) so that
    phones play it as a voice note.

    Markdown is read as prose (code blocks are left out, links read by their text), and a text
    longer than ``MAX_SPEECH_CHARS`` is spoken up to the last sentence that fits, followed by "The
    rest is in the written reply." (see ``speakable``). SpeechError when not configured or the
    service fails.
    """
    service = _tts_service(config)
    if service is None:
        raise SpeechError(_not_configured("tts"))
    spoken = speakable(text)
    if not spoken:
        raise SpeechError("the reply has nothing to speak")
    async with _client(service) as client:
        try:
            response = await client.audio.speech.create(
                model=service.model, voice=config.voice.tts_voice, input=spoken, response_format="opus"
            )
            data = response.content
        except Exception as exc:
            raise _failure(exc, "the speech service", "/audio/speech", service, config.secrets) from None
    found = _container(data)
    if found is None:
        raise SpeechError(f"the speech service at {_where(service)} answered with something that is not audio ({len(data)} bytes)")
    extension, mime = found
    return data, mime, f"reply.{extension}"


_FENCE = re.compile(r"^\s*(```|~~~).*?^\s*\1[^\n]*$", re.MULTILINE | re.DOTALL)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_URL = re.compile(r"<?https?://[^\s>)]+>?")
_INLINE_CODE = re.compile(r"`+([^`]+)`+")
_EMPHASIS = re.compile(r"(\*\*|__|~~|\*|_)(?=\S)(.+?)(?<=\S)\1")
_LINE_MARK = re.compile(r"^\s{0,3}(#{1,6}\s+|>\s?|[-*+]\s+|\d+[.)]\s+)", re.MULTILINE)
_RULE = re.compile(r"^\s*([-*_]\s*){3,}$|^\s*\|?\s*:?-{3,}.*$", re.MULTILINE)
_SENTENCE_END = re.compile(r"[.!?…](?=\s)|\n")


def speakable(markdown: str, limit: int = MAX_SPEECH_CHARS) -> str:
    """``markdown`` as text to read aloud, at most ``limit`` characters: code blocks become "(code
    left out)", links their text, URLs "a link"; markers (``#``, ``**``, list bullets, table
    pipes) go. A longer text is cut after the last whole sentence that fits, and says so."""
    text = _FENCE.sub(" (code left out) ", markdown)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("a link", text)
    text = _INLINE_CODE.sub(r"\1", text)
    text = _RULE.sub("", text)
    text = _LINE_MARK.sub("", text)
    text = _EMPHASIS.sub(r"\2", text)
    lines = [_table_row(line) if "|" in line else " ".join(line.split()) for line in text.splitlines()]
    text = "\n".join(line for line in lines if line).strip()
    if len(text) <= limit:
        return text
    room = limit - len(_CUT_NOTE)
    head = text[:room]
    ends = [m.end() for m in _SENTENCE_END.finditer(head + " ")]
    cut = ends[-1] if ends and ends[-1] > room // 2 else (head.rfind(" ") if head.rfind(" ") > room // 2 else room)
    return head[:cut].rstrip() + _CUT_NOTE


def _table_row(line: str) -> str:
    """A Markdown table row read as its cells, separated by commas."""
    cells = [" ".join(cell.split()) for cell in line.strip().strip("|").split("|")]
    return ", ".join(cell for cell in cells if cell)


# -- the wire --------------------------------------------------------------------------------


def _client(service: _Service) -> AsyncOpenAI:
    import openai  # lazy: the SDK costs hundreds of milliseconds to import

    # A local server wants no key, but the SDK needs one to build a client; this one means nothing.
    return openai.AsyncOpenAI(base_url=service.base_url, api_key=service.api_key or "no-key", timeout=_TIMEOUT, max_retries=2)


def _where(service: _Service) -> str:
    parts = urlsplit(service.base_url)
    return parts.netloc or service.base_url


def _failure(exc: Exception, what: str, path: str, service: _Service, secrets: list[str]) -> SpeechError:
    """A SpeechError for an SDK failure: what failed, and what to set or do."""
    from core.models._common import redact

    where = f"{what} at {_where(service)}"
    status = getattr(exc, "status_code", None)
    names = {cls.__name__ for cls in type(exc).__mro__}
    detail = _api_message(getattr(exc, "body", None)) or str(getattr(exc, "message", None) or exc)
    if isinstance(status, int):
        if status in (401, 403):
            text = f"{where} refused the API key (HTTP {status}): {service.key_advice()}"
        elif status == 404:
            text = (
                f"{where} has no {path} (HTTP 404: {detail}): set {service.base_setting} to the base of an "
                "OpenAI-compatible API that has it, e.g. https://api.groq.com/openai/v1 or http://127.0.0.1:8000/v1"
            )
        elif status == 429:
            text = f"{where} is rate limiting requests (HTTP 429: {detail}); try again in a minute"
        elif status >= 500:
            text = f"{where} failed (HTTP {status}: {detail}); try again later"
        else:
            text = f"{where} refused the request (HTTP {status}): {detail}"
    elif "APITimeoutError" in names:
        text = f"{where} did not answer within {_TIMEOUT:.0f} s; try again, or {service.address_advice()}"
    elif "APIConnectionError" in names:
        cause = exc.__cause__ or exc.__context__
        why = f"{type(cause).__name__}: {cause}" if cause is not None else detail
        text = f"could not reach {where} ({why}); {service.address_advice()}"
    else:
        text = f"{where} failed ({type(exc).__name__}: {detail})"
    return SpeechError(redact(text, secrets))


def _api_message(body: object) -> str | None:
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        message = inner.get("message") if isinstance(inner, dict) else None
        return str(message) if message else None
    return body if isinstance(body, str) and body else None


# -- audio files -----------------------------------------------------------------------------

# The extensions OpenAI's and Groq's endpoints both take, by container.
_BY_MIME = {
    "audio/ogg": "ogg",
    "audio/opus": "ogg",
    "audio/oga": "ogg",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/mp4": "m4a",
    "audio/x-m4a": "m4a",
    "audio/m4a": "m4a",
    "audio/aac": "m4a",
    "video/mp4": "mp4",
    "audio/webm": "webm",
    "video/webm": "webm",
    "audio/flac": "flac",
    "audio/x-flac": "flac",
}
_MIME_OF = {"ogg": "audio/ogg", "wav": "audio/wav", "mp3": "audio/mpeg", "m4a": "audio/mp4", "webm": "audio/webm", "flac": "audio/flac"}


def _container(data: bytes) -> tuple[str, str] | None:
    """``(extension, mime)`` of the audio container ``data`` holds, by its first bytes; None otherwise."""
    if data.startswith(b"OggS"):
        return "ogg", "audio/ogg"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav", "audio/wav"
    if data.startswith(b"fLaC"):
        return "flac", "audio/flac"
    if data.startswith(b"ID3") or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0 and data[1] & 0x06):
        return "mp3", "audio/mpeg"
    if data[4:8] == b"ftyp":
        return "m4a", "audio/mp4"
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return "webm", "audio/webm"
    return None


def _upload_name(data: bytes, filename: str, mime: str) -> tuple[str, str]:
    """The file name and type to upload ``data`` under: the extension matches the contents (the
    APIs pick the decoder by it), else the given type's, else the name is kept as it is."""
    stem = (filename.rsplit("/", 1)[-1] or "audio").rsplit(".", 1)[0] or "audio"
    found = _container(data)
    if found is not None:
        return f"{stem}.{found[0]}", found[1]
    extension = _BY_MIME.get(mime.split(";")[0].strip().lower())
    if extension is not None:
        return f"{stem}.{extension}", _MIME_OF[extension]
    return filename or "audio", mime or "application/octet-stream"


def audio_duration(data: bytes) -> float | None:
    """Seconds of audio in a WAV, Ogg (Opus, Vorbis, Speex) or FLAC file, from its headers; None for
    other formats or a file whose headers cannot be read."""
    try:
        if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
            return _wav_seconds(data)
        if data.startswith(b"OggS"):
            return _ogg_seconds(data)
        if data.startswith(b"fLaC"):
            return _flac_seconds(data)
    except (struct.error, IndexError, ZeroDivisionError):
        return None
    return None


def _wav_seconds(data: bytes) -> float | None:
    offset = 12
    byte_rate = 0
    while offset + 8 <= len(data):
        chunk, size = data[offset : offset + 4], struct.unpack_from("<I", data, offset + 4)[0]
        body = offset + 8
        if chunk == b"fmt ":
            byte_rate = struct.unpack_from("<I", data, body + 8)[0]
        elif chunk == b"data":
            if not byte_rate:
                return None
            # A WAV written to a pipe has no sizes (0 or 0xFFFFFFFF): the data then runs to the end.
            available = len(data) - body
            return (size if 0 < size <= available else available) / byte_rate
        offset = body + size + (size & 1)
    return None


def _ogg_seconds(data: bytes) -> float | None:
    # The first page's first packet names the codec and its rate; the last page's granule
    # position is the stream's length in samples.
    segments = data[26]
    packet = data[27 + segments : 27 + segments + 64]
    if packet.startswith(b"OpusHead"):
        rate, skip = 48_000, struct.unpack_from("<H", packet, 10)[0]
    elif packet.startswith(b"\x01vorbis"):
        rate, skip = struct.unpack_from("<I", packet, 12)[0], 0
    elif packet.startswith(b"Speex   "):
        rate, skip = struct.unpack_from("<I", packet, 36)[0], 0
    else:
        return None
    last = data.rfind(b"OggS", max(0, len(data) - 65_536))
    while last > 0 and (last + 27 > len(data) or data[last + 4] != 0):
        last = data.rfind(b"OggS", 0, last)
    granule = struct.unpack_from("<q", data, last + 6)[0]
    if granule < 0 or not rate:
        return None
    return float(max(0, granule - skip) / rate)


def _flac_seconds(data: bytes) -> float | None:
    if data[4] & 0x7F != 0:  # STREAMINFO must come first
        return None
    info = data[8:42]
    packed = int.from_bytes(info[10:18], "big")
    rate = packed >> 44
    samples = packed & ((1 << 36) - 1)
    return samples / rate if rate and samples else None


def _clock(seconds: float) -> str:
    whole = round(seconds)
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"
