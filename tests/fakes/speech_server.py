"""A fake OpenAI audio API on 127.0.0.1: ``POST /v1/audio/transcriptions`` and ``POST /v1/audio/speech``.

Spoken to by the real ``openai`` SDK. A test cannot run real speech recognition, so the fake ties
each transcript to the audio it got: ``expect(audio, text)`` registers the transcript of those
exact bytes (by sha256), and audio nobody registered is "transcribed" as a line naming its hash.
Like the real service it reads the upload before answering: a file name whose extension is not a
format the APIs take, or bytes that are not a well-formed WAV or Ogg file (RIFF chunks and PCM
format; Ogg pages with their CRCs and an Opus or Vorbis header) get the API's 400 error shape.
With ``api_key`` set, a request without that bearer token gets 401 as OpenAI answers it.

``/v1/audio/speech`` answers ``opus`` with a small valid Ogg/Opus file (20 ms packets of silence,
about 60 ms per character of input) and ``wav`` with a WAV of silence; input over 4096 characters
is refused as OpenAI refuses it.

``spoken_wav(text)`` makes real speech with espeak-ng, ``spoken_ogg(text)`` the same encoded with
libopus as a phone records a voice note (both fail when espeak-ng or libopus is missing:
``apt-get install espeak-ng libopus0``; ``.ci/run`` installs them).
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import json
import shutil
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = ["FakeSpeech", "Upload", "ogg_opus", "spoken_ogg", "spoken_wav", "wav_silence"]

# The extensions both OpenAI's and Groq's endpoints take.
FORMATS = ["flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "wav", "webm"]
MAX_INPUT = 4096
_SILENCE = b"\xf8\xff\xfe"  # one 20 ms Opus packet of silence (CELT, fullband)
_PRE_SKIP = 312


@dataclass
class Upload:
    """One transcription request as the fake received it."""

    filename: str
    content_type: str
    data: bytes
    fields: dict[str, str]
    authorization: str | None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass
class FakeSpeech:
    """State of the fake: transcripts by audio hash, what was uploaded and spoken, failures to inject."""

    api_key: str | None = None
    transcripts: dict[str, str] = field(default_factory=dict)  # sha256 of the audio -> its transcript
    uploads: list[Upload] = field(default_factory=list)
    spoken: list[dict[str, Any]] = field(default_factory=list)  # bodies of /audio/speech requests
    made: list[bytes] = field(default_factory=list)  # the audio each of them was answered with
    refused: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)  # (path, status, error body)
    fail_next: list[int] = field(default_factory=list)  # statuses to answer the next requests with
    _server: ThreadingHTTPServer | None = None
    _cond: threading.Condition = field(default_factory=threading.Condition)

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> FakeSpeech:
        fake = self

        class Handler(_Handler):
            api = fake

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            server.shutdown()
            server.server_close()

    def __enter__(self) -> FakeSpeech:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # -- what tests do ------------------------------------------------------------------

    def expect(self, audio: bytes, text: str) -> None:
        """``audio`` (these exact bytes) is transcribed as ``text``."""
        self.transcripts[hashlib.sha256(audio).hexdigest()] = text

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 20.0, what: str = "a request") -> Any:
        """Wait until ``predicate()`` is truthy (checked on each request); its value."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (found := predicate()):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"fake speech server: timed out waiting for {what} ({len(self.uploads)} uploads)")
                self._cond.wait(left)
        return found

    # -- the API --------------------------------------------------------------------------

    def transcription(self, headers: dict[str, str], raw: bytes) -> tuple[int, str, bytes]:
        ctype = headers.get("content-type", "")
        if not ctype.startswith("multipart/form-data"):
            return _error(400, "Could not parse multipart form", None)
        parts = _multipart(ctype, raw)
        fields = {name: value.decode("utf-8", "replace") for name, (_, _, value) in parts.items() if name != "file"}
        if "file" not in parts:
            return _error(400, "you must provide a file", "file")
        if not fields.get("model"):
            return _error(400, "you must provide a model parameter", "model")
        filename, content_type, data = parts["file"]
        with self._cond:
            self.uploads.append(Upload(filename, content_type, data, fields, headers.get("authorization")))
        extension = filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
        if extension not in FORMATS:
            return _error(400, f"Invalid file format. Supported formats: {FORMATS}", "file", code="invalid_value")
        problem = _audio_problem(extension, data)
        if problem is not None:
            return _error(400, f"Audio file might be corrupted or unsupported ({problem})", "file", code="invalid_value")
        digest = hashlib.sha256(data).hexdigest()
        text = self.transcripts.get(digest, f"[fake speech server: no transcript for audio sha256 {digest[:16]}]")
        fmt = fields.get("response_format", "json")
        if fmt == "text":
            return 200, "text/plain; charset=utf-8", text.encode()
        if fmt == "verbose_json":
            payload: dict[str, Any] = {"task": "transcribe", "language": fields.get("language", "english"), "text": text, "segments": []}
            return 200, "application/json", json.dumps(payload).encode()
        return 200, "application/json", json.dumps({"text": text}).encode()

    def speech(self, raw: bytes) -> tuple[int, str, bytes]:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.", None)
        for key in ("model", "input", "voice"):
            if not body.get(key):
                return _error(400, f"Missing required parameter: '{key}'.", key)
        if len(body["input"]) > MAX_INPUT:
            return _error(
                400,
                f"[{{'type': 'string_too_long', 'loc': ('body', 'input'), 'msg': 'String should have at most {MAX_INPUT} characters'}}]",
                "input",
            )
        with self._cond:
            self.spoken.append(body)
        seconds = max(0.1, 0.06 * len(body["input"]))
        fmt = body.get("response_format", "mp3")
        made = {"opus": ("audio/ogg", ogg_opus), "wav": ("audio/wav", wav_silence)}.get(fmt)
        if made is None:
            return _error(400, f"the fake speech server makes only opus and wav, not {fmt!r}", "response_format")
        data = made[1](seconds)
        with self._cond:
            self.made.append(data)
        return 200, made[0], data


# -- audio made and read here ------------------------------------------------------------------


def spoken_wav(text: str) -> bytes:
    """``text`` spoken by espeak-ng, as a WAV file's bytes."""
    program = shutil.which("espeak-ng")
    if program is None:
        raise RuntimeError("espeak-ng is not installed: apt-get install espeak-ng (.ci/run installs it); voice tests need real audio")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "speech.wav"
        subprocess.run([program, "-w", str(out), text], check=True, capture_output=True, timeout=60)
        return out.read_bytes()


def wav_silence(seconds: float, rate: int = 16_000) -> bytes:
    """A mono 16-bit PCM WAV of silence."""
    data = b"\x00\x00" * int(seconds * rate)
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return (
        b"RIFF"
        + struct.pack("<I", 4 + 8 + len(fmt) + 8 + len(data))
        + b"WAVE"
        + b"fmt "
        + struct.pack("<I", len(fmt))
        + fmt
        + b"data"
        + struct.pack("<I", len(data))
        + data
    )


def ogg_opus(seconds: float) -> bytes:
    """A valid Ogg/Opus file (mono, 48 kHz) holding ``seconds`` of silence in 20 ms packets."""
    count = max(1, round((seconds * 48_000 + _PRE_SKIP) / 960))
    return _ogg_opus_file([_SILENCE] * count, input_rate=48_000)


def spoken_ogg(text: str) -> bytes:
    """``text`` spoken by espeak-ng and encoded with libopus as Telegram records voice notes: Ogg/Opus,
    mono, 20 ms frames. Fails when espeak-ng or libopus (libopus0) is missing."""
    import ctypes
    import ctypes.util

    wav = spoken_wav(text)
    rate, pcm = _pcm16_mono(wav)
    name = ctypes.util.find_library("opus")
    if name is None:
        raise RuntimeError("libopus is not installed: apt-get install libopus0 (.ci/run installs it); voice tests encode with it")
    opus = ctypes.CDLL(name)
    opus.opus_encoder_create.restype = ctypes.c_void_p
    opus.opus_encoder_create.argtypes = [ctypes.c_int32, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    opus.opus_encode.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int16), ctypes.c_int, ctypes.c_char_p, ctypes.c_int32]
    opus.opus_encoder_destroy.argtypes = [ctypes.c_void_p]
    error = ctypes.c_int()
    encoder = opus.opus_encoder_create(24_000, 1, 2048, ctypes.byref(error))  # 2048: OPUS_APPLICATION_VOIP
    if not encoder or error.value != 0:
        raise RuntimeError(f"libopus could not create an encoder (error {error.value})")
    samples = _resample(pcm, rate, 24_000)
    frame = 480  # 20 ms at 24 kHz
    samples += [0] * (-len(samples) % frame + frame)  # the last frame padded, then one of silence
    packets = []
    out = ctypes.create_string_buffer(4000)
    try:
        for start in range(0, len(samples), frame):
            chunk = (ctypes.c_int16 * frame)(*samples[start : start + frame])
            size = opus.opus_encode(encoder, chunk, frame, out, len(out))
            if size < 0:
                raise RuntimeError(f"libopus could not encode a frame (error {size})")
            packets.append(out.raw[:size])
    finally:
        opus.opus_encoder_destroy(encoder)
    return _ogg_opus_file(packets, input_rate=rate)


def _pcm16_mono(wav: bytes) -> tuple[int, list[int]]:
    """The sample rate and samples of a mono 16-bit PCM WAV."""
    offset, rate = 12, 0
    while offset + 8 <= len(wav):
        chunk, size = wav[offset : offset + 4], struct.unpack_from("<I", wav, offset + 4)[0]
        if chunk == b"fmt ":
            tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", wav, offset + 8)
            if (tag, channels, bits) != (1, 1, 16):
                raise ValueError(f"expected mono 16-bit PCM, got format {tag}, {channels} channels, {bits} bits")
        elif chunk == b"data":
            data = wav[offset + 8 : offset + 8 + size]
            return rate, list(struct.unpack(f"<{len(data) // 2}h", data[: len(data) // 2 * 2]))
        offset += 8 + size + (size & 1)
    raise ValueError("no data chunk in the WAV")


def _resample(samples: list[int], source: int, target: int) -> list[int]:
    """Linear interpolation from ``source`` Hz to ``target`` Hz (good enough for test speech)."""
    if source == target or not samples:
        return list(samples)
    count = int(len(samples) * target / source)
    step = source / target
    out = []
    for i in range(count):
        position = i * step
        left = int(position)
        right = min(left + 1, len(samples) - 1)
        out.append(int(samples[left] + (samples[right] - samples[left]) * (position - left)))
    return out


def _ogg_opus_file(packets: list[bytes], *, input_rate: int) -> bytes:
    """An Ogg/Opus file (mono) of 20 ms Opus ``packets``, 50 to a page."""
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, _PRE_SKIP, input_rate, 0, 0)
    vendor = b"hermes fake speech"
    tags = b"OpusTags" + struct.pack("<I", len(vendor)) + vendor + struct.pack("<I", 0)
    serial = 0x5EEC4
    pages = [_ogg_page([head], 0x02, 0, serial, 0), _ogg_page([tags], 0x00, 0, serial, 1)]
    for sequence, start in enumerate(range(0, len(packets), 50), start=2):
        batch = packets[start : start + 50]
        flags = 0x04 if start + 50 >= len(packets) else 0x00
        pages.append(_ogg_page(batch, flags, (start + len(batch)) * 960, serial, sequence))
    return b"".join(pages)


def _ogg_page(packets: list[bytes], flags: int, granule: int, serial: int, sequence: int) -> bytes:
    """One Ogg page holding whole ``packets``."""
    lacing: list[int] = []
    for packet in packets:
        lacing += [255] * (len(packet) // 255) + [len(packet) % 255]
    header = b"OggS" + struct.pack("<BBqIIIB", 0, flags, granule, serial, sequence, 0, len(lacing)) + bytes(lacing)
    page = bytearray(header + b"".join(packets))
    struct.pack_into("<I", page, 22, _ogg_crc(bytes(page)))
    return bytes(page)


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        r = i << 24
        for _ in range(8):
            r = ((r << 1) ^ 0x04C11DB7) if r & 0x80000000 else (r << 1)
        table.append(r & 0xFFFFFFFF)
    return table


_CRC = _crc_table()


def _ogg_crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _CRC[((crc >> 24) & 0xFF) ^ byte]
    return crc


def _audio_problem(extension: str, data: bytes) -> str | None:
    """Why ``data`` is not a well-formed file of its extension's format; None when it is."""
    try:
        if extension == "wav":
            return _wav_problem(data)
        if extension == "ogg":
            return _ogg_problem(data)
    except (struct.error, IndexError) as exc:
        return f"truncated header: {exc}"
    return f"the fake reads only WAV and Ogg, not .{extension}"


def _wav_problem(data: bytes) -> str | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return "not a RIFF/WAVE file"
    offset, fmt_ok = 12, False
    while offset + 8 <= len(data):
        chunk, size = data[offset : offset + 4], struct.unpack_from("<I", data, offset + 4)[0]
        if chunk == b"fmt ":
            tag, channels, rate, byte_rate, align, bits = struct.unpack_from("<HHIIHH", data, offset + 8)
            if tag not in (1, 3, 0xFFFE) or not 1 <= channels <= 8 or not 8_000 <= rate <= 192_000 or bits not in (8, 16, 24, 32):
                return f"unsupported fmt chunk (format {tag}, {channels} channels, {rate} Hz, {bits} bits)"
            if byte_rate != rate * align:
                return "inconsistent fmt chunk"
            fmt_ok = True
        elif chunk == b"data":
            if not fmt_ok:
                return "data before fmt"
            if len(data) <= offset + 8:
                return "no samples"
            return None
        offset += 8 + size + (size & 1)
    return "no data chunk"


def _ogg_problem(data: bytes) -> str | None:
    offset, first_packet, pages = 0, b"", 0
    while offset < len(data):
        if data[offset : offset + 4] != b"OggS" or data[offset + 4] != 0:
            return f"no Ogg page at byte {offset}"
        count = data[offset + 26]
        lacing = data[offset + 27 : offset + 27 + count]
        size = 27 + count + sum(lacing)
        page = bytearray(data[offset : offset + size])
        if len(page) < size:
            return "truncated page"
        crc = struct.unpack_from("<I", page, 22)[0]
        struct.pack_into("<I", page, 22, 0)
        if _ogg_crc(bytes(page)) != crc:
            return f"bad CRC in page {pages}"
        if pages == 0:
            first_packet = bytes(page[27 + count :])
        offset += size
        pages += 1
    if not first_packet.startswith((b"OpusHead", b"\x01vorbis")):
        return "the first packet is neither an Opus nor a Vorbis header"
    if pages < 3:
        return "no audio pages"
    return None


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str, str, bytes]]:
    """Form fields by name: (filename, content type, bytes)."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\nMIME-Version: 1.0\r\n\r\n" + raw
    )
    found: dict[str, tuple[str, str, bytes]] = {}
    for part in message.iter_parts() if message.is_multipart() else []:
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)
            found[name] = (part.get_filename() or "", part.get_content_type(), payload if isinstance(payload, bytes) else b"")
    return found


def _error(status: int, message: str, param: str | None, *, code: str | None = None) -> tuple[int, str, bytes]:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    return status, "application/json", json.dumps(body).encode()


class _QuietServer(ThreadingHTTPServer):
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that drop keep-alive connections are normal


class _Handler(BaseHTTPRequestHandler):
    api: FakeSpeech
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        api = self.api
        if api.api_key is not None and headers.get("authorization") != f"Bearer {api.api_key}":
            status, ctype, body = (
                401,
                "application/json",
                json.dumps(
                    {
                        "error": {
                            "message": "Incorrect API key provided.",
                            "type": "invalid_request_error",
                            "param": None,
                            "code": "invalid_api_key",
                        }
                    }
                ).encode(),
            )
        elif api.fail_next:
            failure = api.fail_next.pop(0)
            status, ctype, body = _error(failure, f"the fake speech server failed on purpose ({failure})", None)
        elif path == "/v1/audio/transcriptions":
            status, ctype, body = api.transcription(headers, raw)
        elif path == "/v1/audio/speech":
            status, ctype, body = api.speech(raw)
        else:
            status, ctype, body = _error(404, f"Invalid URL (POST {path})", None)
        if status >= 400:
            with api._cond:
                api.refused.append((path, status, json.loads(body)))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with api._cond:
            api._cond.notify_all()
