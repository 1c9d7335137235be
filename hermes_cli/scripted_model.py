"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1.

It speaks the real wire format (HTTP/1.1, chunked Server-Sent Events) so that the real
``openai`` SDK can be pointed at it: tests use it as the edge fake, and ``hermes-editor demo``
uses it when no model is configured. Each request gets the next *spec* from a script:

- a reply: ``{"text": str, "thinking": str, "tool_calls": [{"id", "name", "arguments": dict
  or raw str}], "usage": {"input_tokens", "output_tokens", "cache_read_tokens",
  "cache_write_tokens", "cost"}, "chunk_size": int, "delay": float, "finish_reason": str}``
  (every key optional; ``thinking`` may carry a ``signature`` key for the Anthropic fake);
- a failure: ``{"error": 429, "retry_after": 1}`` (or ``"retry_after_ms": 250``), ``{"error": 500}``, ``{"error":
  "overloaded"}``, ``{"error": 401}``, ``{"error": 400, "message": "..."}``;
- a broken stream: ``{"disconnect_after": N}`` (N text chunks, then the connection drops),
  ``{"malformed": True}`` (a chunk that is not JSON), ``{"hang": True}`` (headers, then
  silence until the client goes away), ``{"stream_error": "overloaded" | 500 | ...}`` (an
  error event after the first content block, inside the 200 stream).

A script is a list of specs consumed in order, or a callable ``(request_body) -> spec``.

Standalone: ``python -m hermes_cli.scripted_model --port 0 --script FILE.json`` prints the
base URL on the first line of stdout and serves until interrupted. The file holds a list of
specs, or one spec object that answers every request.
"""

from __future__ import annotations

import argparse
import itertools
import json
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Piece", "ScriptedOpenAIServer", "ScriptedServer", "Spec", "main"]

Spec = dict[str, Any]
Script = list[Spec] | Callable[[dict], Spec]


@dataclass(frozen=True, slots=True)
class Piece:
    """One unit of a scripted reply, in the order the wire sends them."""

    kind: str  # "thinking" | "text" | "tool_call"
    text: str = ""
    signature: str | None = None
    call: dict | None = None


class _Disconnect(Exception):
    """Raised inside a handler to drop the connection without finishing the body."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that drop keep-alive connections are normal here (timeouts, cancelled streams).
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    # Stream chunks go out as written: with Nagle's algorithm each small write would wait for
    # the client's delayed ACK (~40 ms), and the scripted model would look slow.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        # The demo runs this next to an editor whose stdio must stay clean.
        return

    def do_GET(self) -> None:
        owner = self.server.owner
        with owner._lock:
            owner.gets.append((urlsplit(self.path).path, {k.lower(): v for k, v in self.headers.items()}))
        answer = owner.handle_get(urlsplit(self.path).path)
        if answer is None:
            self.send_json(404, {"error": {"message": f"no route GET {self.path}", "type": "not_found"}})
        else:
            self.send_json(200, answer)

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        if urlsplit(self.path).path not in owner.post_paths:
            self.send_json(404, {"error": {"message": f"no route POST {self.path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self.send_json(400, {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}})
            return
        spec = owner.record_and_next(body, {k.lower(): v for k, v in self.headers.items()}, raw)
        try:
            owner.respond(self, spec, body)
        except _Disconnect:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # -- writing helpers used by the servers --------------------------------------------------

    def send_json(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def write_chunk(self, data: bytes) -> None:
        # Chunked framing, so a dropped connection is a protocol error the client can see.
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def client_gone(self) -> bool:
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


class ScriptedServer:
    """The threading and scripting core shared by the OpenAI and Anthropic fakes."""

    post_paths: tuple[str, ...] = ()
    base_path: str = ""
    # Also keep each request body's bytes as they came (``raw_requests``), for byte-level checks.
    keep_raw: bool = False

    def __init__(self, script: Script | None = None, *, host: str = "127.0.0.1", port: int = 0, model: str = "scripted") -> None:
        self.script: Script = script if script is not None else []
        self.host = host
        self.port = port
        self.model = model
        self.requests: list[dict] = []
        self.raw_requests: list[bytes] = []  # filled when ``keep_raw`` is set, in the order of ``requests``
        self.headers: list[dict[str, str]] = []
        self.gets: list[tuple[str, dict[str, str]]] = []  # (path, lower-cased headers) of each GET
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # notified on each request and each frame sent
        self.frames_sent = 0
        self._next = 0
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        """Bind and serve in a background thread."""
        self._httpd = _HTTPServer((self.host, self.port), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        # A short poll interval keeps close() quick; tests open and close many servers.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name=f"{type(self).__name__}:{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; hanging and delayed streams notice and end."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}{self.base_path}"

    # -- scripting -------------------------------------------------------------------------------

    def record_and_next(self, body: dict, headers: dict[str, str], raw: bytes = b"") -> Spec:
        """Record a request and pick the spec that answers it."""
        with self._lock:
            self.requests.append(body)
            if self.keep_raw:
                self.raw_requests.append(raw)
            self.headers.append(headers)
            self._changed.notify_all()
            if callable(self.script):
                try:
                    return self.script(body)
                except Exception as exc:
                    return {"error": 500, "message": f"scripted server: script raised {exc!r}"}
            if self._next >= len(self.script):
                # Not retryable on purpose, so an under-scripted test fails fast and says why.
                return {"error": 400, "message": f"scripted server: script exhausted after {len(self.script)} responses"}
            spec = self.script[self._next]
            self._next += 1
            return spec

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 20.0, what: str = "a request") -> Any:
        """Block until ``predicate()`` is truthy (checked on each request and each frame sent); its value."""
        with self._changed:
            found = self._changed.wait_for(predicate, timeout)
        if not found:
            raise TimeoutError(
                f"scripted server: timed out waiting for {what} ({len(self.requests)} requests, {self.frames_sent} frames sent)"
            )
        return found

    @property
    def remaining(self) -> int:
        """Specs of a list script not yet consumed."""
        return 0 if callable(self.script) else len(self.script) - self._next

    def handle_get(self, path: str) -> object | None:
        """The JSON answer to a GET, or None for 404."""
        return None

    def respond(self, handler: _Handler, spec: Spec, body: dict) -> None:
        """Answer one request according to ``spec``."""
        if "error" in spec:
            status, headers, payload = self.error_response(spec)
            handler.send_json(status, payload, headers)
            return
        handler.start_sse()
        if spec.get("hang"):
            while not handler.client_gone() and not self._stopping.wait(0.05):
                pass
            raise _Disconnect
        pieces = list(self.pieces(spec))
        usage = self.usage(spec, body, pieces)
        frames = self.frames(spec, pieces, usage, body)
        text_sent = 0
        seen_content = False
        limit = spec.get("disconnect_after")
        delay = float(spec.get("delay", 0))
        for piece, frame in frames:
            # Drop at the first frame past the Nth text chunk, so no closing frame gets out.
            past_limit = limit is not None and text_sent >= limit
            if past_limit and ((piece is not None and piece.kind == "text") or (piece is None and seen_content)):
                raise _Disconnect
            if spec.get("stream_error") and piece is None and seen_content:
                # Providers report some failures (overload, above all) inside a 200 stream.
                handler.write_chunk(self.stream_error_frame(spec))
                handler.end_chunks()
                return
            seen_content = seen_content or piece is not None
            if delay and piece is not None and self._stopping.wait(delay):
                raise _Disconnect
            handler.write_chunk(frame)
            with self._changed:
                self.frames_sent += 1
                self._changed.notify_all()
            if piece is not None and piece.kind == "text":
                text_sent += 1
                if spec.get("malformed"):
                    handler.write_chunk(self.malformed_frame())
                    handler.end_chunks()
                    return
        if limit is not None:
            raise _Disconnect
        handler.end_chunks()

    def pieces(self, spec: Spec) -> Iterator[Piece]:
        """Split a spec into the thinking, text and tool-call pieces the wire will carry."""
        size = max(1, int(spec.get("chunk_size", 8)))
        thinking = spec.get("thinking") or ""
        for i in range(0, len(thinking), size):
            yield Piece("thinking", thinking[i : i + size])
        if thinking and spec.get("signature"):
            yield Piece("thinking", "", signature=spec["signature"])
        text = spec.get("text")
        if text is None:
            broken = spec.get("malformed") or spec.get("disconnect_after") is not None
            # A broken stream needs text to break in; a bare reply should still say something.
            text = "partial output " * 4 if broken else ("" if spec.get("tool_calls") or thinking else "ok")
        for i in range(0, len(text), size):
            yield Piece("text", text[i : i + size])
        for n, call in enumerate(spec.get("tool_calls") or []):
            args = call.get("arguments", {})
            raw = args if isinstance(args, str) else json.dumps(args)
            yield Piece("tool_call", raw, call={"id": call.get("id") or f"call_{n}", "name": call["name"], "index": n})

    def usage(self, spec: Spec, body: dict, pieces: list[Piece]) -> dict[str, int]:
        given = spec.get("usage") or {}
        produced = sum(len(p.text) for p in pieces)
        return {
            "input_tokens": int(given.get("input_tokens", max(1, len(json.dumps(body)) // 4))),
            "output_tokens": int(given.get("output_tokens", max(1, produced // 4))),
            "cache_read_tokens": int(given.get("cache_read_tokens", 0)),
            "cache_write_tokens": int(given.get("cache_write_tokens", 0)),
        }

    # -- wire format, per subclass -----------------------------------------------------------------

    def frames(self, spec: Spec, pieces: list[Piece], usage: dict[str, int], body: dict) -> Iterator[tuple[Piece | None, bytes]]:
        """SSE frames for a reply; each paired with the piece it carries (None for framing)."""
        raise NotImplementedError

    def error_response(self, spec: Spec) -> tuple[int, dict[str, str], dict]:
        """Status, headers and JSON body for a scripted failure."""
        raise NotImplementedError

    def malformed_frame(self) -> bytes:
        """An SSE frame whose data is not JSON."""
        return b'data: {"choices": [{"delta": oops\n\n'

    def stream_error_frame(self, spec: Spec) -> bytes:
        """An SSE frame reporting a failure after the stream has begun."""
        failure = {"error": spec["stream_error"], **({"message": spec["message"]} if "message" in spec else {})}
        _, _, payload = self.error_response(failure)
        return b"data: " + json.dumps(payload).encode() + b"\n\n"


_OPENAI_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("invalid_request_error", "Incorrect API key provided."),
    403: ("permission_error", "You are not allowed to use this model."),
    404: ("invalid_request_error", "The model does not exist."),
    429: ("rate_limit_error", "Rate limit reached for requests."),
    500: ("server_error", "The server had an error while processing your request."),
}


class ScriptedOpenAIServer(ScriptedServer):
    """OpenAI-compatible chat completions: POST /v1/chat/completions, GET /v1/models."""

    post_paths = ("/v1/chat/completions", "/chat/completions")
    base_path = "/v1"

    def handle_get(self, path: str) -> object | None:
        if path in ("/v1/models", "/models"):
            return {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "scripted"}]}
        return None

    def error_response(self, spec: Spec) -> tuple[int, dict[str, str], dict]:
        error = spec["error"]
        headers: dict[str, str] = {}
        if error == "overloaded":
            status, kind, message = 503, "overloaded_error", "The engine is currently overloaded, please try again later."
        else:
            status = int(error)
            kind, message = _OPENAI_ERRORS.get(status, ("server_error" if status >= 500 else "invalid_request_error", f"Error {status}."))
        if "retry_after" in spec:
            headers["retry-after"] = str(spec["retry_after"])
        if "retry_after_ms" in spec:
            headers["retry-after-ms"] = str(spec["retry_after_ms"])
        payload = {"error": {"message": spec.get("message", message), "type": kind, "param": None, "code": spec.get("code")}}
        return status, headers, payload

    def frames(self, spec: Spec, pieces: list[Piece], usage: dict[str, int], body: dict) -> Iterator[tuple[Piece | None, bytes]]:
        ident = f"chatcmpl-{len(self.requests)}"
        created = int(time.time())

        def chunk(delta: dict, finish: str | None = None, **extra: Any) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            obj = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body.get("model", self.model),
                "choices": [choice],
                **extra,
            }
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        yield None, chunk({"role": "assistant", "content": ""})
        calls = 0
        for piece in pieces:
            if piece.kind == "thinking" and piece.text:
                yield piece, chunk({"reasoning_content": piece.text})
            elif piece.kind == "text":
                yield piece, chunk({"content": piece.text})
            elif piece.kind == "tool_call" and piece.call is not None:
                calls += 1
                head = {
                    "index": piece.call["index"],
                    "id": piece.call["id"],
                    "type": "function",
                    "function": {"name": piece.call["name"], "arguments": ""},
                }
                yield piece, chunk({"tool_calls": [head]})
                # Arguments arrive in fragments, as real servers send them.
                raw = piece.text
                for i in range(0, len(raw), 16) or [0]:
                    part = {"index": piece.call["index"], "function": {"arguments": raw[i : i + 16]}}
                    yield piece, chunk({"tool_calls": [part]})
        finish = spec.get("finish_reason") or ("tool_calls" if calls else "stop")
        yield None, chunk({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            details = {"cached_tokens": usage["cache_read_tokens"]} if usage["cache_read_tokens"] else None
            usage_obj = {
                "prompt_tokens": usage["input_tokens"],
                "completion_tokens": usage["output_tokens"],
                "total_tokens": usage["input_tokens"] + usage["output_tokens"],
                "prompt_tokens_details": details,
            }
            if (spec.get("usage") or {}).get("cost") is not None:
                usage_obj["cost"] = spec["usage"]["cost"]  # as OpenRouter reports it, in US dollars
            obj = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": body.get("model", self.model),
                "choices": [],
                "usage": usage_obj,
            }
            yield None, b"data: " + json.dumps(obj).encode() + b"\n\n"
        yield None, b"data: [DONE]\n\n"


def _load_script(path: str | None) -> Script:
    if path is None:
        default: Spec = {"text": "Hello from the scripted demo model. Configure a real model with 'hermes-editor setup'."}
        return lambda body: default
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, dict):
        return lambda body: data
    if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
        raise SystemExit(f"{path}: expected a JSON list of response specs or one spec object")
    return data


def main(argv: list[str] | None = None) -> int:
    """Serve a script until interrupted; the first stdout line is the base URL."""
    parser = argparse.ArgumentParser(prog="python -m hermes_cli.scripted_model", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="JSON file: a list of response specs, or one spec for every request")
    parser.add_argument("--model", default="scripted")
    args = parser.parse_args(argv)
    server = ScriptedOpenAIServer(_load_script(args.script), host=args.host, port=args.port, model=args.model)
    with server:
        print(server.base_url, flush=True)
        try:
            for _ in itertools.count():
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
