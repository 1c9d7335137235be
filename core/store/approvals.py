"""Approval questions and the "always" rules a project remembers, as rows of the store:
questions are created pending and answered once (the first answer wins, across processes).
Mixed into :class:`core.store.sessions.SessionStore`.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import aiosqlite

from core.store import db
from core.store.records import APPROVAL_STATUSES, RULE_DECISIONS, ApprovalRecord, ApprovalStatus, RuleDecision

T = TypeVar("T")


class ApprovalQueries:
    """Approvals and approval rules."""

    if TYPE_CHECKING:
        # What the store supplies.
        async def _write(self, body: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T: ...
        async def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]: ...
        async def _fetchone(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Row | None: ...

    async def create_approval(
        self, *, session_id: str, tool_call_id: str, tool_name: str, title: str, detail: dict[str, Any]
    ) -> ApprovalRecord:
        """Record a pending question about one tool call."""
        record = ApprovalRecord(
            id=uuid.uuid4().hex,
            session_id=session_id,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            title=title,
            detail=dict(detail),
            status="pending",
            decided_by=None,
            created_at=time.time(),
            decided_at=None,
        )
        detail_json = db.dump_json(record.detail)

        async def body(conn: aiosqlite.Connection) -> None:
            await db.execute(
                conn,
                "INSERT INTO approvals (id, session_id, tool_call_id, tool_name, title, detail, status, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
                (record.id, session_id, tool_call_id, tool_name, title, detail_json, record.created_at),
            )

        await self._write(body)
        return record

    async def resolve_approval(self, approval_id: str, status: ApprovalStatus, decided_by: str | None, *, always: bool = False) -> bool:
        """Answer a pending question; True if this call's answer won, False if it was already answered.

        ``always``: the answer was "always allow" / "always reject" (the asking process makes it a rule)."""
        if status == "pending":
            raise ValueError("an approval cannot be resolved to 'pending'")
        db.check_choice(status, APPROVAL_STATUSES, "approval status")

        async def body(conn: aiosqlite.Connection) -> int:
            # The status guard is the whole race: whichever UPDATE commits first changes the
            # row, and every later one matches nothing.
            return await db.execute(
                conn,
                "UPDATE approvals SET status = ?, decided_by = ?, decided_at = ?, always = ? WHERE id = ? AND status = 'pending'",
                (status, decided_by, time.time(), int(always), approval_id),
            )

        return bool(await self._write(body))

    async def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        """The approval with this id, or None."""
        row = await self._fetchone("SELECT * FROM approvals WHERE id = ?", (approval_id,))
        return ApprovalRecord.from_row(row) if row else None

    async def pending_approvals(self, session_id: str | None = None) -> list[ApprovalRecord]:
        """Unanswered questions, oldest first, for one session or for all."""
        if session_id is None:
            rows = await self._fetchall("SELECT * FROM approvals WHERE status = 'pending' ORDER BY created_at, id", ())
        else:
            rows = await self._fetchall(
                "SELECT * FROM approvals WHERE status = 'pending' AND session_id = ? ORDER BY created_at, id",
                (session_id,),
            )
        return [ApprovalRecord.from_row(row) for row in rows]

    async def add_approval_rule(self, project: str, tool: str, pattern: str, decision: RuleDecision) -> None:
        """Remember an "always" answer for a project; a later rule for the same tool and pattern replaces it."""
        db.check_choice(decision, RULE_DECISIONS, "rule decision")

        async def body(conn: aiosqlite.Connection) -> None:
            await db.execute(
                conn,
                "INSERT INTO approval_rules (project, tool, pattern, decision, created_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (project, tool, pattern) DO UPDATE SET"
                " decision = excluded.decision, created_at = excluded.created_at",
                (project, tool, pattern, decision, time.time()),
            )

        await self._write(body)

    async def approval_rules(self, project: str) -> list[tuple[str, str, RuleDecision]]:
        """The project's remembered rules as ``(tool, pattern, decision)``."""
        rows = await self._fetchall(
            "SELECT tool, pattern, decision FROM approval_rules WHERE project = ? ORDER BY tool, pattern", (project,)
        )
        return [(row["tool"], row["pattern"], row["decision"]) for row in rows]
