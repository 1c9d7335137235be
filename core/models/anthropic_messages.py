"""Anthropic Messages API, with prompt-cache breakpoints on the stable prefix.

The ``anthropic`` SDK is imported on first use, never at import time.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from core.messages import AssistantMessage, ImagePart, TextPart, ThinkingPart, ToolCallPart, ToolResultMessage, Usage, UserMessage
from core.models._common import SdkModel, parse_arguments
from core.models.base import (
    ErrorKind,
    ModelError,
    ModelEvent,
    ModelRequest,
    ResponseDone,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    ToolSpec,
)

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["AnthropicModel", "anthropic_messages", "anthropic_system", "anthropic_tools"]

_CACHE = {"type": "ephemeral"}
# Extended-thinking budgets (tokens) for the reasoning effort levels.
_THINKING_BUDGET = {"low": 2048, "medium": 8192, "high": 24576}
_MIN_THINKING = 1024  # the API's smallest thinking budget
_ANSWER_ROOM = 1024  # tokens of max_tokens kept for the answer when a small window squeezes thinking
_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}


class AnthropicModel(SdkModel):
    """A Claude model behind the Anthropic Messages API."""

    def _client_class(self) -> type[AsyncAnthropic]:
        import anthropic  # lazy: the SDK costs hundreds of milliseconds to import

        return anthropic.AsyncAnthropic

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages request body for one step (without ``stream``)."""
        params: dict[str, Any] = {
            "model": self.ref.model,
            "max_tokens": request.max_tokens,
            "messages": anthropic_messages(request),
        }
        if request.system:
            params["system"] = anthropic_system(request.system)
        if request.tools:
            params["tools"] = anthropic_tools(request.tools)
        budget = _THINKING_BUDGET.get(request.reasoning_effort or "")
        if budget and self.profile.reasoning_levels:
            # The budget counts against max_tokens, which must stay larger (by room for the answer),
            # and within what the context window leaves: a small window thinks less, or not at all.
            max_tokens = max(request.max_tokens, budget + 4096)
            if request.reply_room:
                max_tokens = min(max_tokens, max(request.reply_room, request.max_tokens))
                budget = min(budget, max_tokens - _ANSWER_ROOM)
            if budget >= _MIN_THINKING:
                params["thinking"] = {"type": "enabled", "budget_tokens": budget}
                params["max_tokens"] = max_tokens
        return params

    async def _open(self, client: AsyncAnthropic, request: ModelRequest) -> Any:
        params = self.build_params(request)
        model, max_tokens = params.pop("model"), params.pop("max_tokens")
        # Sent as extra_body, the plain-JSON body skips the SDK's per-step transform of the history.
        return await client.messages.create(model=model, max_tokens=max_tokens, messages=[], stream=True, extra_body=params)

    def _assembly(self) -> _Assembly:
        return _Assembly()


class _Assembly:
    """Accumulates raw stream events into the final AssistantMessage."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop_reason: str | None = None
        self.stopped = False
        self.input = self.output = self.cache_read = self.cache_write = 0

    async def feed(self, events: AsyncIterator[Any]) -> AsyncGenerator[ModelEvent, None]:
        async for event in events:
            kind = event.type
            if kind == "message_start":
                self._read_usage(event.message.usage)
            elif kind == "content_block_start":
                block = event.content_block
                entry: dict[str, Any] = {"type": block.type, "text": [], "json": []}
                if block.type == "tool_use":
                    entry.update(id=block.id, name=block.name)
                    yield ToolCallChunk(id=block.id, name=block.name)
                elif block.type == "redacted_thinking":
                    entry["text"].append(block.data)
                elif block.type == "thinking":
                    entry["signature"] = block.signature or None
                    if block.thinking:
                        entry["text"].append(block.thinking)
                        yield ThinkingChunk(block.thinking)
                elif block.type == "text" and block.text:
                    entry["text"].append(block.text)
                    yield TextChunk(block.text)
                self.blocks[event.index] = entry
            elif kind == "content_block_delta":
                chunk = self._apply_delta(self.blocks.get(event.index), event.delta)
                if chunk is not None:
                    yield chunk
            elif kind == "message_delta":
                self.stop_reason = event.delta.stop_reason or self.stop_reason
                self._read_usage(event.usage)
            elif kind == "message_stop":
                self.stopped = True

    def _apply_delta(self, entry: dict[str, Any] | None, delta: Any) -> ModelEvent | None:
        if entry is None:
            raise ModelError(ErrorKind.BAD_RESPONSE, "a content delta arrived for a block that never started")
        if delta.type == "text_delta":
            entry["text"].append(delta.text)
            return TextChunk(delta.text)
        if delta.type == "thinking_delta":
            entry["text"].append(delta.thinking)
            return ThinkingChunk(delta.thinking)
        if delta.type == "signature_delta":
            entry["signature"] = delta.signature
        elif delta.type == "input_json_delta":
            entry["json"].append(delta.partial_json)
        return None

    def finish(self, label: str) -> ResponseDone:
        if not self.stopped:
            raise ModelError(ErrorKind.CONNECTION, "the stream ended before message_stop", model=label)
        parts: list[TextPart | ThinkingPart | ToolCallPart] = []
        for index in sorted(self.blocks):
            block = self.blocks[index]
            text = "".join(block["text"])
            if block["type"] == "text":
                parts.append(TextPart(text=text))
            elif block["type"] == "thinking":
                parts.append(ThinkingPart(text=text, signature=block.get("signature")))
            elif block["type"] == "redacted_thinking":
                parts.append(ThinkingPart(text=text, redacted=True))
            elif block["type"] == "tool_use":
                arguments, invalid = parse_arguments("".join(block["json"]))
                parts.append(ToolCallPart(id=block["id"], name=block["name"], arguments=arguments, invalid_arguments=invalid))
        reason = _STOP.get(self.stop_reason or "end_turn", "stop")
        # input_tokens is the whole prompt, cache reads and writes included, as OpenAI reports it.
        usage = Usage(
            input_tokens=self.input + self.cache_read + self.cache_write,
            output_tokens=self.output,
            cache_read_tokens=self.cache_read,
            cache_write_tokens=self.cache_write,
        )
        return ResponseDone(message=AssistantMessage(parts=parts, model=label), finish_reason=reason, usage=usage)

    def _read_usage(self, usage: Any) -> None:
        # message_delta repeats cumulative counts; a missing field keeps the earlier value.
        if usage is None:
            return
        self.input = getattr(usage, "input_tokens", None) or self.input
        self.output = getattr(usage, "output_tokens", None) or self.output
        self.cache_read = getattr(usage, "cache_read_input_tokens", None) or self.cache_read
        self.cache_write = getattr(usage, "cache_creation_input_tokens", None) or self.cache_write


def anthropic_system(system: str) -> list[dict[str, Any]]:
    """The system prompt as one cached block: it is the stable prefix every step shares."""
    return [{"type": "text", "text": system, "cache_control": dict(_CACHE)}]


def anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool definitions, with a cache breakpoint after the last one (tools precede system)."""
    out = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]
    if out:
        out[-1]["cache_control"] = dict(_CACHE)
    return out


def anthropic_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """Our typed history as Messages API turns, consecutive same-role turns merged."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            # Tool results of one step become one user turn (and may be followed by user text).
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in request.messages:
        if isinstance(message, UserMessage):
            add("user", [_user_block(p) for p in message.parts if not (isinstance(p, TextPart) and not p.text)])
        elif isinstance(message, AssistantMessage):
            add("assistant", _assistant_blocks(message))
        elif isinstance(message, ToolResultMessage):
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}
            if message.is_error:
                block["is_error"] = True
            add("user", [block])
    _mark_last_block(out)
    if request.ephemeral:
        # After the breakpoint, in a block of its own: the next request's prefix (cached up to
        # the breakpoint) never held it, so dropping or moving it costs no cache.
        add("user", [{"type": "text", "text": request.ephemeral}])
    return out


def _user_block(part: TextPart | ImagePart) -> dict[str, Any]:
    if isinstance(part, ImagePart):
        return {"type": "image", "source": {"type": "base64", "media_type": part.media_type, "data": part.data}}
    return {"type": "text", "text": part.text}


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ThinkingPart):
            if part.redacted:
                blocks.append({"type": "redacted_thinking", "data": part.text})
            elif part.signature:
                # Signed thinking must go back byte-for-byte or tool use after it is rejected.
                blocks.append({"type": "thinking", "thinking": part.text, "signature": part.signature})
            # Unsigned thinking came from another provider; Anthropic would reject it.
        elif isinstance(part, TextPart):
            if part.text:  # the API rejects empty text blocks
                blocks.append({"type": "text", "text": part.text})
        else:
            blocks.append({"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments})
    return blocks


# Content blocks the API looks back over from a breakpoint for an earlier cache entry (about 20).
_LOOKBACK = 18


def _mark_last_block(messages: list[dict[str, Any]]) -> None:
    """Cache breakpoint on the last message's last cacheable block: the next step reuses it all.

    The step before ended where the last exchange (the model's calls, then their results)
    begins; when that exchange holds more blocks than the API looks back over (many calls at
    once), the end of the step before is marked too, so what it cached is still found (four
    breakpoints in all: tools, system and these two)."""
    if not messages:
        return
    _mark(messages[-1])
    if len(messages) >= 3 and len(messages[-1]["content"]) + len(messages[-2]["content"]) >= _LOOKBACK:
        _mark(messages[-3])


def _mark(message: dict[str, Any]) -> None:
    for block in reversed(message["content"]):
        if block["type"] not in ("thinking", "redacted_thinking"):
            block["cache_control"] = dict(_CACHE)
            return
