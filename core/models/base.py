"""The one model protocol: ``stream(request)`` yields model events, ending in ``ResponseDone``."""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union

from core.messages import AssistantMessage, Message, Usage

__all__ = [
    "ErrorKind",
    "Model",
    "ModelError",
    "ModelEvent",
    "ModelRequest",
    "ResponseDone",
    "Retrying",
    "TextChunk",
    "ThinkingChunk",
    "ToolCallChunk",
    "ToolSpec",
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as a model sees it."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


@dataclass(slots=True)
class ModelRequest:
    """Everything one model step needs. Built fresh from history each step."""

    system: str
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 8192
    # Text for this request only (a learning nudge): adapters put it last, after the cached
    # prefix, set apart from the user's words; never persisted.
    ephemeral: str | None = None
    # "low" | "medium" | "high" for models that take a reasoning effort; None sends nothing.
    reasoning_effort: str | None = None
    # The most output tokens the context window leaves beside this request's input (0: the
    # window is unknown): an adapter that raises max_tokens (room for thinking) stays under it.
    reply_room: int = 0


@dataclass(frozen=True, slots=True)
class TextChunk:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ThinkingChunk:
    text: str
    kind: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """A tool call has begun streaming (its arguments arrive later, whole, in ResponseDone)."""

    id: str
    name: str
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class Retrying:
    """A step failed in a way that retrying can help; the step starts again after ``delay``."""

    error: ModelError
    attempt: int
    delay: float
    model: str
    kind: Literal["retrying"] = "retrying"


@dataclass(frozen=True, slots=True)
class ResponseDone:
    message: AssistantMessage
    # "stop" | "tool_calls" | "length" | "refusal"
    finish_reason: str
    usage: Usage
    kind: Literal["done"] = "done"


ModelEvent = Union[TextChunk, ThinkingChunk, ToolCallChunk, Retrying, ResponseDone]


class ErrorKind(str, enum.Enum):
    AUTH = "auth"
    RATE_LIMIT = "rate_limit"
    OVERLOADED = "overloaded"
    SERVER = "server_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    CONTEXT_TOO_LONG = "context_too_long"
    BAD_REQUEST = "bad_request"
    BAD_RESPONSE = "bad_response"

    @property
    def retryable(self) -> bool:
        return self in _RETRYABLE


_RETRYABLE = {
    ErrorKind.RATE_LIMIT,
    ErrorKind.OVERLOADED,
    ErrorKind.SERVER,
    ErrorKind.TIMEOUT,
    ErrorKind.CONNECTION,
    ErrorKind.BAD_RESPONSE,
}

_ADVICE = {
    ErrorKind.AUTH: "Check the API key for this provider (config.toml or its environment variable).",
    ErrorKind.RATE_LIMIT: "The provider is rate-limiting requests; wait a moment or configure a fallback model.",
    ErrorKind.OVERLOADED: "The provider is overloaded; try again shortly or configure a fallback model.",
    ErrorKind.SERVER: "The provider had an internal error; try again or configure a fallback model.",
    ErrorKind.TIMEOUT: "The request timed out; check the network or the provider's status.",
    ErrorKind.CONNECTION: "Could not reach the provider; check base_url and the network.",
    ErrorKind.CONTEXT_TOO_LONG: "The conversation is too long for this model; start a new session or use a model with a larger context.",
    ErrorKind.BAD_REQUEST: "The provider rejected the request; check the model name and provider settings.",
    ErrorKind.BAD_RESPONSE: "The provider sent a response that could not be read; try again.",
}


class ModelError(Exception):
    """A classified provider failure. Its message never contains credentials."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.model = model

    @property
    def retryable(self) -> bool:
        return self.kind.retryable

    def user_message(self) -> str:
        where = f" from {self.model}" if self.model else ""
        status = f" (HTTP {self.status})" if self.status else ""
        return f"Model error{where}: {self.kind.value}{status}: {self.message}. {_ADVICE[self.kind]}"


class Model(Protocol):
    """A model one can stream a step from."""

    name: str
    # The family whose working notes the prompt gives it when its provider's profile names one
    # (core.models.families; "none": no notes), None when its name says.
    family: str | None

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...

    async def aclose(self) -> None: ...
