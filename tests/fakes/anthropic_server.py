"""A scripted Anthropic Messages server on 127.0.0.1, for driving the real ``anthropic`` SDK.

Same spec format as :mod:`hermes_cli.scripted_model`, plus ``signature`` (sent with the
thinking block) and ``redacted_thinking`` (the data of a redacted thinking block). Overloaded
is HTTP 529 with an ``overloaded_error`` body, as the real API sends it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hermes_cli.scripted_model import Piece, ScriptedServer, Spec

__all__ = ["ScriptedAnthropicServer"]

_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit."),
    500: ("api_error", "Internal server error."),
    529: ("overloaded_error", "Overloaded"),
}

_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens", "refusal": "refusal"}


def _event(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


class ScriptedAnthropicServer(ScriptedServer):
    """Anthropic Messages: POST /v1/messages. ``base_url`` has no /v1; the SDK appends it."""

    post_paths = ("/v1/messages",)
    base_path = ""

    def error_response(self, spec: Spec) -> tuple[int, dict[str, str], dict]:
        error = spec["error"]
        status = 529 if error == "overloaded" else int(error)
        kind, message = _ERRORS.get(status, ("api_error" if status >= 500 else "invalid_request_error", f"Error {status}."))
        headers = {"retry-after": str(spec["retry_after"])} if "retry_after" in spec else {}
        return status, headers, {"type": "error", "error": {"type": kind, "message": spec.get("message", message)}}

    def frames(self, spec: Spec, pieces: list[Piece], usage: dict[str, int], body: dict) -> Iterator[tuple[Piece | None, bytes]]:
        message = {
            "id": f"msg_{len(self.requests):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", self.model),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage["input_tokens"],
                "output_tokens": 1,
                "cache_read_input_tokens": usage["cache_read_tokens"],
                "cache_creation_input_tokens": usage["cache_write_tokens"],
            },
        }
        yield None, _event("message_start", {"type": "message_start", "message": message})
        index = -1
        open_kind: str | None = None

        def close() -> Iterator[tuple[Piece | None, bytes]]:
            yield None, _event("content_block_stop", {"type": "content_block_stop", "index": index})

        if spec.get("redacted_thinking"):
            index += 1
            block = {"type": "redacted_thinking", "data": spec["redacted_thinking"]}
            yield None, _event("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})
            yield from close()
        calls = 0
        for piece in pieces:
            if piece.kind != open_kind or piece.kind == "tool_call":
                if open_kind is not None:
                    yield from close()
                index += 1
                open_kind = piece.kind
                yield (
                    None,
                    _event(
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": self._block(piece)},
                    ),
                )
            if piece.kind == "thinking":
                delta: dict[str, Any] = (
                    {"type": "signature_delta", "signature": piece.signature}
                    if piece.signature
                    else {"type": "thinking_delta", "thinking": piece.text}
                )
                yield piece, self._delta(index, delta)
            elif piece.kind == "text":
                yield piece, self._delta(index, {"type": "text_delta", "text": piece.text})
            else:
                calls += 1
                # Partial JSON arrives in fragments, as the real API sends it.
                for i in range(0, len(piece.text), 16):
                    yield piece, self._delta(index, {"type": "input_json_delta", "partial_json": piece.text[i : i + 16]})
        if open_kind is not None:
            yield from close()
        finish = spec.get("finish_reason") or ("tool_calls" if calls else "stop")
        stop_reason = _STOP_REASONS.get(finish, finish)
        delta_usage = {"output_tokens": usage["output_tokens"]}
        yield (
            None,
            _event(
                "message_delta",
                {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}, "usage": delta_usage},
            ),
        )
        yield None, _event("message_stop", {"type": "message_stop"})

    def stream_error_frame(self, spec: Spec) -> bytes:
        failure = {"error": spec["stream_error"], **({"message": spec["message"]} if "message" in spec else {})}
        _, _, payload = self.error_response(failure)
        return _event("error", payload)

    def malformed_frame(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type": "content_block_delta", oops\n\n'

    @staticmethod
    def _block(piece: Piece) -> dict:
        if piece.kind == "thinking":
            return {"type": "thinking", "thinking": "", "signature": ""}
        if piece.kind == "text":
            return {"type": "text", "text": ""}
        assert piece.call is not None
        return {"type": "tool_use", "id": piece.call["id"], "name": piece.call["name"], "input": {}}

    @staticmethod
    def _delta(index: int, delta: dict) -> bytes:
        return _event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
