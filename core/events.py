"""What a turn yields, in order. Surfaces render these; the core never calls a surface."""

from __future__ import annotations

import asyncio
import enum
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from core.messages import FileDiff, Usage

__all__ = [
    "Decision",
    "ApprovalRequest",
    "DiffContent",
    "Event",
    "Location",
    "Notice",
    "PermissionNeeded",
    "PlanEntry",
    "PlanUpdated",
    "StopReason",
    "TerminalContent",
    "TextContent",
    "TextDelta",
    "ThoughtDelta",
    "TitleChanged",
    "ToolContent",
    "ToolFinished",
    "ToolKind",
    "ToolStarted",
    "ToolUpdated",
    "TurnEnded",
    "UsageUpdated",
]

# The ACP tool kinds; other surfaces use them as plain labels.
ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]


@dataclass(frozen=True, slots=True)
class Location:
    path: str  # absolute
    line: int | None = None


@dataclass(frozen=True, slots=True)
class DiffContent:
    path: str  # absolute
    old_text: str | None  # None for a new file
    new_text: str
    type: Literal["diff"] = "diff"


@dataclass(frozen=True, slots=True)
class TextContent:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class TerminalContent:
    terminal_id: str
    type: Literal["terminal"] = "terminal"


ToolContent = Union[DiffContent, TextContent, TerminalContent]


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ThoughtDelta:
    text: str
    kind: Literal["thought"] = "thought"


@dataclass(frozen=True, slots=True)
class ToolStarted:
    call_id: str
    name: str
    title: str
    tool_kind: ToolKind
    locations: list[Location] = field(default_factory=list)
    raw_input: dict[str, Any] = field(default_factory=dict)
    kind: Literal["tool_started"] = "tool_started"


@dataclass(frozen=True, slots=True)
class ToolUpdated:
    call_id: str
    content: list[ToolContent] | None = None
    title: str | None = None
    locations: list[Location] | None = None
    kind: Literal["tool_updated"] = "tool_updated"


@dataclass(frozen=True, slots=True)
class ToolFinished:
    call_id: str
    status: Literal["completed", "failed"]
    content: list[ToolContent] = field(default_factory=list)
    raw_output: str = ""
    kind: Literal["tool_finished"] = "tool_finished"


@dataclass(frozen=True, slots=True)
class PlanEntry:
    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


@dataclass(frozen=True, slots=True)
class PlanUpdated:
    entries: list[PlanEntry]
    kind: Literal["plan"] = "plan"


class Decision(str, enum.Enum):
    """The user's answer to a permission question."""

    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"
    REJECT_ALWAYS = "reject_always"
    CANCELLED = "cancelled"

    @property
    def allowed(self) -> bool:
        return self in (Decision.ALLOW_ONCE, Decision.ALLOW_ALWAYS)


@dataclass(slots=True)
class ApprovalRequest:
    """One question to the user. Surfaces show ``title``, ``diffs`` and ``command``."""

    session_id: str
    tool_call_id: str
    tool_name: str
    tool_kind: str
    title: str
    reason: str
    diffs: list[FileDiff] = field(default_factory=list)
    command: str | None = None
    paths: list[str] = field(default_factory=list)
    # False for what must ask every time (dangerous commands, secrets, paths outside the
    # project): surfaces then leave "always allow" out of the choices.
    offer_always: bool = True
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    future: asyncio.Future[Decision] | None = None


@dataclass(frozen=True, slots=True)
class PermissionNeeded:
    """A tool call waits for the user. The surface asks and answers through the broker."""

    request: ApprovalRequest
    kind: Literal["permission"] = "permission"


@dataclass(frozen=True, slots=True)
class UsageUpdated:
    """A model request's usage (``step``); the session's so far, its subagents' included
    (``total``); and how much of the context window the session's own conversation fills."""

    step: Usage
    total: Usage
    context_tokens: int
    context_window: int = 0
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True, slots=True)
class TitleChanged:
    """The session got a title (after its first exchange)."""

    title: str
    kind: Literal["title"] = "title"


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user should see that is not the model's words (a retry, an error)."""

    text: str
    level: Literal["info", "warning", "error"] = "info"
    kind: Literal["notice"] = "notice"


@dataclass(frozen=True, slots=True)
class TurnEnded:
    stop_reason: StopReason
    error: str | None = None
    kind: Literal["turn_ended"] = "turn_ended"


Event = Union[
    TextDelta,
    ThoughtDelta,
    ToolStarted,
    ToolUpdated,
    ToolFinished,
    PlanUpdated,
    PermissionNeeded,
    UsageUpdated,
    TitleChanged,
    Notice,
    TurnEnded,
]
