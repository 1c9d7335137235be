"""Typed conversation messages and their one serialiser.

The persisted history is the source of truth. Every model request is built from it and
nothing built for a request is ever written back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

__all__ = [
    "Usage",
    "AssistantMessage",
    "FileDiff",
    "HistoryRepair",
    "ImagePart",
    "Message",
    "SummaryMessage",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolResultMessage",
    "UserMessage",
    "dump_message",
    "load_message",
    "repair_history",
    "searchable_text",
]


class TextPart(BaseModel):
    kind: Literal["text"] = "text"
    text: str


class ImagePart(BaseModel):
    kind: Literal["image"] = "image"
    media_type: str
    data: str  # base64


class ThinkingPart(BaseModel):
    kind: Literal["thinking"] = "thinking"
    text: str
    # Anthropic signs thinking blocks; they must be sent back unchanged with tool use.
    signature: str | None = None
    redacted: bool = False


class ToolCallPart(BaseModel):
    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    # Set when the model sent arguments that are not a JSON object; the loop reports it.
    invalid_arguments: str | None = None


class FileDiff(BaseModel):
    """A change to one file, as shown to the user: absolute path, old text (None when new)."""

    path: str
    old_text: str | None
    new_text: str


class UserMessage(BaseModel):
    kind: Literal["user"] = "user"
    parts: list[Annotated[TextPart | ImagePart, Field(discriminator="kind")]]

    @classmethod
    def of(cls, text: str) -> UserMessage:
        return cls(parts=[TextPart(text=text)])

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


class AssistantMessage(BaseModel):
    kind: Literal["assistant"] = "assistant"
    parts: list[Annotated[TextPart | ThinkingPart | ToolCallPart, Field(discriminator="kind")]] = Field(default_factory=list)
    model: str | None = None
    # True when the stream was cut (cancel, failure); such a message has no tool calls.
    interrupted: bool = False

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]


class ToolResultMessage(BaseModel):
    kind: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool = False
    diffs: list[FileDiff] = Field(default_factory=list)


class SummaryMessage(BaseModel):
    """A summary of everything before it (``/compact``): requests start from here."""

    kind: Literal["summary"] = "summary"
    text: str
    model: str | None = None


Message = Annotated[UserMessage | AssistantMessage | ToolResultMessage | SummaryMessage, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)


def dump_message(message: Message) -> str:
    """Serialise a message to JSON, the one format used in the store and exports."""
    return message.model_dump_json(exclude_defaults=False)


def load_message(data: str | bytes) -> Message:
    """Parse a message serialised by :func:`dump_message`."""
    return _ADAPTER.validate_json(data)


def repair_history(history: list[Message]) -> list[Message]:
    """The history as a model can take it: every tool call answered, empty interruptions dropped.

    A crash can leave a tool call without a result; models reject such a history, so a
    synthetic result is supplied for the request only.
    """
    out: list[Message] = []
    pending: dict[str, str] = {}

    def close_pending() -> None:
        for call_id, name in pending.items():
            out.append(ToolResultMessage(tool_call_id=call_id, tool_name=name, content="Interrupted before a result.", is_error=True))
        pending.clear()

    for message in history:
        if isinstance(message, SummaryMessage):
            pending.clear()
            out = [UserMessage.of(f"<summary of the conversation so far>\n{message.text}\n</summary>")]
            continue
        if isinstance(message, ToolResultMessage):
            if message.tool_call_id in pending:
                pending.pop(message.tool_call_id)
                out.append(message)
            continue  # a result whose call is not in the history is dropped
        close_pending()
        if isinstance(message, AssistantMessage):
            if message.interrupted and not message.text:
                continue
            pending = {c.id: c.name for c in message.tool_calls}
        out.append(message)
    close_pending()
    return out


class HistoryRepair:
    """``repair_history`` of a history that grows, kept up to date: a call whose history starts
    with the messages of the last call (the same objects, as each step's view of a session
    repeats them) reads only those after them, so a step does not pay for the whole conversation."""

    def __init__(self) -> None:
        self._seen: list[Message] = []
        self._out: list[Message] = []
        self._pending: dict[str, str] = {}

    def __call__(self, history: list[Message]) -> list[Message]:
        """The same list as ``repair_history(history)`` (a new list; the messages are shared)."""
        read = len(self._seen)
        # List equality tests identity first, element by element, at C speed.
        if len(history) < read or history[:read] != self._seen:
            self._seen, self._out, self._pending, read = [], [], {}, 0
        for message in history[read:]:
            self._feed(message)
        self._seen += history[read:]
        return self._out + _interrupted(self._pending)

    def _feed(self, message: Message) -> None:
        # Step for step what repair_history does with one message.
        if isinstance(message, SummaryMessage):
            self._pending = {}
            self._out = [UserMessage.of(f"<summary of the conversation so far>\n{message.text}\n</summary>")]
            return
        if isinstance(message, ToolResultMessage):
            if message.tool_call_id in self._pending:
                self._pending.pop(message.tool_call_id)
                self._out.append(message)
            return
        self._out += _interrupted(self._pending)
        self._pending = {}
        if isinstance(message, AssistantMessage):
            if message.interrupted and not message.text:
                return
            self._pending = {c.id: c.name for c in message.tool_calls}
        self._out.append(message)


def _interrupted(pending: dict[str, str]) -> list[Message]:
    return [
        ToolResultMessage(tool_call_id=call_id, tool_name=name, content="Interrupted before a result.", is_error=True)
        for call_id, name in pending.items()
    ]


def searchable_text(message: Message) -> str:
    """The text of a message that history search indexes."""
    if isinstance(message, ToolResultMessage):
        return message.content
    if isinstance(message, (UserMessage, SummaryMessage)):
        return message.text
    pieces = [message.text]
    for call in message.tool_calls:
        pieces.append(f"{call.name} {_flatten(call.arguments)}")
    return "\n".join(p for p in pieces if p)


def _flatten(value: object) -> str:
    if isinstance(value, dict):
        return " ".join(_flatten(v) for v in value.values())
    if isinstance(value, list):
        return " ".join(_flatten(v) for v in value)
    return str(value)


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd
