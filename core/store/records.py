"""The rows the store hands out: small frozen values, never live database objects."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Literal, get_args

from core.messages import Message, load_message

__all__ = [
    "APPROVAL_STATUSES",
    "ApprovalRecord",
    "ApprovalStatus",
    "RuleDecision",
    "SearchHit",
    "SessionRecord",
    "StoredMessage",
    "Surface",
]

Surface = Literal["acp", "mcp", "gateway", "cli"]
ApprovalStatus = Literal["pending", "allowed", "denied", "cancelled", "expired"]
RuleDecision = Literal["allow", "deny"]
Role = Literal["user", "assistant", "tool_result"]

SURFACES: frozenset[str] = frozenset(get_args(Surface))
APPROVAL_STATUSES: frozenset[str] = frozenset(get_args(ApprovalStatus))
RULE_DECISIONS: frozenset[str] = frozenset(get_args(RuleDecision))


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One conversation: where it runs, which surface started it, and what it has cost."""

    id: str
    title: str | None
    cwd: str
    surface: Surface
    model: str | None
    parent_id: str | None
    created_at: float
    updated_at: float
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float | None
    meta: dict[str, Any]
    # The parent's tool call that ran this session as a subagent (``parent_id`` is the parent); None otherwise.
    parent_call_id: str | None = None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> SessionRecord:
        return cls(
            id=row["id"],
            title=row["title"],
            cwd=row["cwd"],
            surface=row["surface"],
            model=row["model"],
            parent_id=row["parent_id"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cache_read_tokens=row["cache_read_tokens"],
            cache_write_tokens=row["cache_write_tokens"],
            cost_usd=row["cost_usd"],
            meta=json.loads(row["meta"] or "{}"),
            parent_call_id=row["parent_call_id"],
        )


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as persisted: its row id, its position in the session, and when it was written."""

    id: int
    session_id: str
    seq: int
    message: Message
    created_at: float

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> StoredMessage:
        return cls(
            id=row["id"],
            session_id=row["session_id"],
            seq=row["seq"],
            message=load_message(row["content"]),
            created_at=row["created_at"],
        )


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result. ``snippet`` marks matches with ``[`` ``]``; higher ``score`` is better."""

    session_id: str
    session_title: str | None
    message_id: int
    seq: int
    role: Role
    snippet: str
    score: float
    created_at: float


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """A question put to the user about one tool call, and its answer once there is one."""

    id: str
    session_id: str
    tool_call_id: str
    tool_name: str
    title: str
    detail: dict[str, Any]
    status: ApprovalStatus
    decided_by: str | None
    created_at: float
    decided_at: float | None
    always: bool = False  # the answer was "always allow" / "always reject"

    @property
    def offers_always(self) -> bool:
        """Whether the question may be answered "always" (older rows do not say: no)."""
        return bool((self.detail or {}).get("offer_always", False))

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> ApprovalRecord:
        return cls(
            id=row["id"],
            session_id=row["session_id"],
            tool_call_id=row["tool_call_id"],
            tool_name=row["tool_name"],
            title=row["title"],
            detail=json.loads(row["detail"] or "{}"),
            status=row["status"],
            decided_by=row["decided_by"],
            created_at=row["created_at"],
            decided_at=row["decided_at"],
            always=bool(row["always"]),
        )
