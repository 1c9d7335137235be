"""Housekeeping over stored sessions: find by id prefix, delete with everything keyed by them,
and count what the store holds."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from core.store import db
from core.store.records import SessionRecord
from core.store.sessions import SessionStore

__all__ = ["AmbiguousPrefixError", "StoreStats", "delete_sessions", "find_session", "running_sessions", "sessions_older_than", "stats"]


class AmbiguousPrefixError(LookupError):
    """An id prefix that names more than one session; ``matches`` lists them."""

    def __init__(self, prefix: str, matches: list[SessionRecord]) -> None:
        super().__init__(f"{prefix!r} matches {len(matches)} sessions: " + ", ".join(r.id for r in matches))
        self.prefix = prefix
        self.matches = matches


@dataclass(frozen=True, slots=True)
class StoreStats:
    sessions: int
    messages: int
    by_surface: dict[str, int]
    size_bytes: int
    oldest: float | None
    newest: float | None
    input_tokens: int = 0
    output_tokens: int = 0
    # US dollars over the sessions with a known cost; None when none has one.
    cost_usd: float | None = None
    priced_sessions: int = 0


async def find_session(store: SessionStore, prefix: str) -> SessionRecord | None:
    """The session whose id is ``prefix`` or the only one starting with it; None when none does.

    Raises AmbiguousPrefixError when several ids start with ``prefix``.
    """
    exact = await store.get_session(prefix)
    if exact is not None or not prefix:
        return exact
    rows = await store.select("SELECT * FROM sessions WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT 21", (len(prefix), prefix))
    matches = [SessionRecord.from_row(row) for row in rows]
    if len(matches) > 1:
        raise AmbiguousPrefixError(prefix, matches)
    return matches[0] if matches else None


async def sessions_older_than(store: SessionStore, cutoff: float) -> list[SessionRecord]:
    """Sessions with no activity since ``cutoff`` (epoch seconds), oldest first."""
    rows = await store.select("SELECT * FROM sessions WHERE updated_at < ? ORDER BY updated_at, id", (cutoff,))
    return [SessionRecord.from_row(row) for row in rows]


async def running_sessions(store: SessionStore, session_ids: list[str], *, now: float | None = None) -> set[str]:
    """Those of ``session_ids`` that a process is running right now, as far as the store records it
    (a scheduled run holding a live lease)."""
    if not session_ids:
        return set()
    marks = ", ".join("?" * len(session_ids))
    rows = await store.select(
        f"SELECT DISTINCT session_id FROM cron_runs WHERE status = 'running' AND lease_until > ? AND session_id IN ({marks})",
        (time.time() if now is None else now, *session_ids),
    )
    return {row[0] for row in rows}


async def delete_sessions(store: SessionStore, session_ids: list[str]) -> int:
    """Delete the sessions, in one transaction, with their messages (and so their full-text index
    rows), approvals and the gateway's rows for them, and the sessions their subagents ran in; cron
    runs keep their output, without the session. Forks keep living, parentless. Returns how many of
    ``session_ids`` were deleted."""
    if not session_ids:
        return 0
    marks = ", ".join("?" * len(session_ids))
    ids = tuple(session_ids)

    async def body(conn: aiosqlite.Connection) -> int:
        await db.execute(
            conn,
            f"DELETE FROM gateway_remote_approvals WHERE approval_id IN (SELECT id FROM approvals WHERE session_id IN ({marks}))",
            ids,
        )
        await db.execute(conn, f"DELETE FROM approvals WHERE session_id IN ({marks})", ids)
        await db.execute(conn, f"UPDATE gateway_chats SET session_id = NULL WHERE session_id IN ({marks})", ids)
        await db.execute(conn, f"UPDATE cron_runs SET session_id = NULL WHERE session_id IN ({marks})", ids)
        # Subagents' sessions hold the conversation's work: they go with it (their questions were the parent's).
        await db.execute(
            conn,
            "DELETE FROM sessions WHERE id IN (WITH RECURSIVE sub(id) AS ("
            f" SELECT id FROM sessions WHERE parent_call_id IS NOT NULL AND parent_id IN ({marks})"
            " UNION SELECT s.id FROM sessions s JOIN sub ON s.parent_id = sub.id WHERE s.parent_call_id IS NOT NULL"
            ") SELECT id FROM sub)",
            ids,
        )
        # Messages and gateway_sessions go by ON DELETE CASCADE (forks' parent_id by SET NULL);
        # the FTS and trigram rows by the messages' delete triggers.
        return await db.execute(conn, f"DELETE FROM sessions WHERE id IN ({marks})", ids)

    return await store._write(body)


async def stats(store: SessionStore) -> StoreStats:
    """Counts of sessions and messages, sessions per surface, the store's size on disk, the
    oldest and newest session's start, and the tokens and known cost of every session."""
    (row,) = await store.select(
        "SELECT COUNT(*), MIN(created_at), MAX(created_at), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),"
        " SUM(cost_usd), COUNT(cost_usd) FROM sessions"
    )
    (messages,) = await store.select("SELECT COUNT(*) FROM messages")
    surfaces = await store.select("SELECT surface, COUNT(*) FROM sessions GROUP BY surface ORDER BY surface")
    size = 0
    for suffix in ("", "-wal", "-shm"):
        try:
            size += Path(str(store.path) + suffix).stat().st_size
        except OSError:
            continue
    return StoreStats(
        sessions=int(row[0]),
        messages=int(messages[0]),
        by_surface={surface: int(count) for surface, count in surfaces},
        size_bytes=size,
        oldest=row[1],
        newest=row[2],
        input_tokens=int(row[3]),
        output_tokens=int(row[4]),
        cost_usd=float(row[5]) if row[5] is not None else None,
        priced_sessions=int(row[6]),
    )
