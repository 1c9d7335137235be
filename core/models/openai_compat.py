"""OpenAI-compatible chat completions (OpenAI, OpenRouter, Ollama, vLLM, llama.cpp, LM Studio).

The ``openai`` SDK is imported on first use, never at import time.
"""

from __future__ import annotations

import json
import weakref
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
    from openai import AsyncOpenAI

__all__ = ["OpenAIChatModel", "chat_messages", "chat_tools"]

_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "max_tokens": "length",
    "content_filter": "refusal",
    "refusal": "refusal",
}


class OpenAIChatModel(SdkModel):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint."""

    def _client_class(self) -> type[AsyncOpenAI]:
        import openai  # lazy: the SDK costs hundreds of milliseconds to import

        return openai.AsyncOpenAI

    def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The chat-completions request body for one step (without ``stream``)."""
        params: dict[str, Any] = {"model": self.ref.model, "messages": chat_messages(request)}
        if request.tools:
            params["tools"] = chat_tools(request.tools)
        # The key varies by server (max_tokens vs max_completion_tokens), so it goes in as data.
        params[self.profile.max_tokens_param] = request.max_tokens
        if request.reasoning_effort and self.profile.reasoning_levels:
            params["reasoning_effort"] = request.reasoning_effort
        if self.profile.stream_usage:
            params["stream_options"] = {"include_usage": True}
        if "openrouter.ai" in (self.base_url or ""):
            params["usage"] = {"include": True}  # OpenRouter then reports the request's cost in usage.cost
        return params

    async def _open(self, client: AsyncOpenAI, request: ModelRequest) -> Any:
        params = self.build_params(request)
        model = params.pop("model")
        # The body is already plain JSON. Passed as typed arguments, the SDK would walk every
        # message of the history through its TypedDict transform on every step (tens of ms on a
        # long conversation); as extra_body it is sent as it is.
        return await client.chat.completions.create(model=model, messages=[], stream=True, extra_body=params)

    def _assembly(self) -> _Assembly:
        return _Assembly(self.profile.reasoning_fields)


class _Assembly:
    """Accumulates streamed deltas into the final AssistantMessage."""

    def __init__(self, reasoning_fields: Sequence[str]) -> None:
        self.reasoning_fields = tuple(reasoning_fields)
        self.segments: list[list[str]] = []  # [kind, text] in stream order
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()

    async def feed(self, chunks: AsyncIterator[Any]) -> AsyncGenerator[ModelEvent, None]:
        async for chunk in chunks:
            if getattr(chunk, "usage", None) is not None:
                self._read_usage(chunk.usage)
            for choice in chunk.choices or []:
                if choice.finish_reason:
                    self.finish_reason = choice.finish_reason
                delta = choice.delta
                if delta is None:
                    continue
                for text in self._reasoning(delta):
                    self._append("thinking", text)
                    yield ThinkingChunk(text)
                for content in (delta.content, getattr(delta, "refusal", None)):
                    if isinstance(content, str) and content:
                        self._append("text", content)
                        yield TextChunk(content)
                for call_delta in delta.tool_calls or []:
                    announced = self._merge_call(call_delta)
                    if announced is not None:
                        yield announced

    def finish(self, label: str) -> ResponseDone:
        if self.finish_reason is None:
            # Servers always close a complete stream with a finish_reason; its absence means a cut.
            raise ModelError(ErrorKind.CONNECTION, "the stream ended before the response was complete", model=label)
        parts: list[TextPart | ThinkingPart | ToolCallPart] = [
            ThinkingPart(text=text) if kind == "thinking" else TextPart(text=text) for kind, text in self.segments
        ]
        for index in sorted(self.calls):
            call = self.calls[index]
            arguments, invalid = parse_arguments("".join(call["arguments"]))
            parts.append(ToolCallPart(id=call["id"] or f"call_{index}", name=call["name"], arguments=arguments, invalid_arguments=invalid))
        reason = _FINISH.get(self.finish_reason, "stop")
        if self.calls and reason == "stop":
            # Some servers say "stop" even when the step ended in tool calls.
            reason = "tool_calls"
        message = AssistantMessage(parts=parts, model=label)
        return ResponseDone(message=message, finish_reason=reason, usage=self.usage)

    def _reasoning(self, delta: Any) -> list[str]:
        extra = getattr(delta, "model_extra", None) or {}
        found = []
        for field in self.reasoning_fields:
            value = getattr(delta, field, None) if field in type(delta).model_fields else extra.get(field)
            if isinstance(value, str) and value:
                found.append(value)
        return found

    def _append(self, kind: str, text: str) -> None:
        if self.segments and self.segments[-1][0] == kind:
            self.segments[-1][1] += text
        else:
            self.segments.append([kind, text])

    def _merge_call(self, delta: Any) -> ToolCallChunk | None:
        index = delta.index if delta.index is not None else len(self.calls)
        call = self.calls.setdefault(index, {"id": None, "name": "", "arguments": [], "announced": False})
        if delta.id:
            call["id"] = delta.id
        function = delta.function
        if function is not None:
            if function.name:
                call["name"] = call["name"] or function.name
            if function.arguments:
                call["arguments"].append(function.arguments)
        if not call["announced"] and call["id"] and call["name"]:
            call["announced"] = True
            return ToolCallChunk(id=call["id"], name=call["name"])
        return None

    def _read_usage(self, usage: Any) -> None:
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        # input_tokens is the whole prompt, cached part included (as OpenAI reports it).
        self.usage = Usage(
            input_tokens=usage.prompt_tokens or 0,
            output_tokens=usage.completion_tokens or 0,
            cache_read_tokens=cached or 0,
            cost_usd=_reported_cost(usage),
        )


def _reported_cost(usage: Any) -> float | None:
    """The cost a provider reports with the usage (OpenRouter's ``usage.cost``, in US dollars)."""
    extra = getattr(usage, "model_extra", None) or {}
    cost = extra.get("cost", getattr(usage, "cost", None))
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0:
        return None
    return float(cost)


def chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """Our typed history as chat-completions messages (thinking is never sent back).

    A message's entry is built once and shared by every later request that carries it (a step
    of a long conversation builds only its new entries): never change an entry in place."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        entry = _entries.get(message)
        if entry is not None:
            out.append(entry)
    if request.ephemeral:
        _add_ephemeral(out, request.ephemeral)
    return out


def _chat_entry(message: object) -> dict[str, Any] | None:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": _user_content(message)}
    if isinstance(message, AssistantMessage):
        return _assistant_entry(message)
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    return None


class _Entries:
    """Chat entries of messages by identity (messages are never changed in place). Entries hold
    weak references, so an id reused by a later object is never taken for the old one."""

    def __init__(self, limit: int = 16384) -> None:
        self.limit = limit
        self._entries: dict[int, tuple[weakref.ref[Any], dict[str, Any] | None]] = {}

    def get(self, message: object) -> dict[str, Any] | None:
        found = self._entries.get(id(message))
        if found is not None and found[0]() is message:
            return found[1]
        entry = _chat_entry(message)
        if len(self._entries) >= self.limit:
            live = {k: v for k, v in self._entries.items() if v[0]() is not None}
            self._entries = live if len(live) < self.limit // 2 else {}
        self._entries[id(message)] = (weakref.ref(message), entry)
        return entry


_entries = _Entries()


def _add_ephemeral(out: list[dict[str, Any]], text: str) -> None:
    """Request-only text goes last, so the prefix the next request repeats never holds it, and
    set apart from the user's words (a user turn of its own after tool results). The last entry
    is replaced, not changed: it is shared with other requests."""
    last = out[-1] if out else None
    if last is None or last["role"] != "user":
        out.append({"role": "user", "content": text})
    elif isinstance(last["content"], str):
        out[-1] = {**last, "content": f"{last['content']}\n\n{text}"}
    else:
        out[-1] = {**last, "content": [*last["content"], {"type": "text", "text": text}]}


def _user_content(message: UserMessage) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in message.parts):
        return message.text
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ImagePart):
            url = f"data:{part.media_type};base64,{part.data}"
            content.append({"type": "image_url", "image_url": {"url": url}})
        else:
            content.append({"type": "text", "text": part.text})
    return content


def _assistant_entry(message: AssistantMessage) -> dict[str, Any] | None:
    text = message.text
    calls = [
        {
            "id": call.id,
            "type": "function",
            # Invalid arguments go back as {} so strict servers don't reject the whole history.
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for call in message.tool_calls
    ]
    if not text and not calls:
        return None  # an interrupted step with nothing said; some servers reject empty turns
    entry: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        entry["tool_calls"] = calls
    return entry


def chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs in the chat-completions ``tools`` format."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}} for t in tools]
