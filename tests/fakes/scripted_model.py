"""An in-process scripted model for loop tests: a real ``core.models.base.Model``, no HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from core.messages import AssistantMessage, TextPart, ThinkingPart, ToolCallPart, Usage
from core.models.base import ModelError, ModelEvent, ModelRequest, ResponseDone, TextChunk, ToolCallChunk

__all__ = ["Reply", "ScriptedModel", "call"]


def call(call_id: str, name: str, **arguments: Any) -> ToolCallPart:
    """A tool call as a model makes it."""
    return ToolCallPart(id=call_id, name=name, arguments=arguments)


@dataclass(slots=True)
class Reply:
    """One scripted answer: text (streamed in ``chunk_size`` pieces; 0: whole), tool calls, finish reason
    (default: "tool_calls" when there are calls, else "stop") and usage. ``hold`` keeps the stream open
    after the text until it is cancelled; ``error`` is raised instead of answering."""

    text: str = ""
    tool_calls: list[ToolCallPart] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    chunk_size: int = 0
    hold: bool = False
    error: ModelError | None = None


class ScriptedModel:
    """Answers requests with the script's replies in order ("" once the script is spent) and records
    every request. ``held`` is set once a ``hold`` reply has streamed its text."""

    def __init__(self, script: list[Reply], name: str = "scripted") -> None:
        self.name = name
        self.family: str | None = None
        self.script = list(script)
        self.requests: list[ModelRequest] = []
        self.held = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        reply = self.script.pop(0) if self.script else Reply()
        if reply.error is not None:
            raise reply.error
        size = reply.chunk_size or len(reply.text)
        for start in range(0, len(reply.text), max(size, 1)):
            yield TextChunk(reply.text[start : start + size])
        if reply.hold:
            self.held.set()
            await asyncio.Event().wait()  # until cancelled
        for tool_call in reply.tool_calls:
            yield ToolCallChunk(tool_call.id, tool_call.name)
        parts: list[TextPart | ThinkingPart | ToolCallPart] = [TextPart(text=reply.text)] if reply.text else []
        parts.extend(reply.tool_calls)
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        yield ResponseDone(AssistantMessage(parts=parts, model=self.name), finish, reply.usage)

    async def aclose(self) -> None:
        return None
