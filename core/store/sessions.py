"""``SessionStore``: sessions, their messages (searchable), approvals and approval rules.

One store is one connection. Every process (each editor window's ``hermes-acp``,
``hermes-mcp``, the gateway) opens its own on the same ``state.db``; SQLite's locking, WAL
and the retries in :mod:`core.store.db` make that safe.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Generator
from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import aiosqlite

from core.config import home
from core.messages import AssistantMessage, Message, ToolResultMessage, Usage, dump_message, load_message, searchable_text
from core.redaction import scrub
from core.store import db
from core.store.approvals import ApprovalQueries
from core.store.migrations import OWN_TEXT, migrate
from core.store.records import (
    SURFACES,
    SearchHit,
    SessionRecord,
    StoredMessage,
    Surface,
)

__all__ = [
    "COMMON_WORD_MESSAGES",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TERMS",
    "SearchQueryError",
    "SessionNotFoundError",
    "SessionStore",
    "StoreOpenError",
    "check_query_size",
    "fts_query",
]

T = TypeVar("T")

_SNIPPET_TOKENS = 12
# A word in more messages than this is ranked by recency instead of bm25, here and in
# core.store.history. Ranking costs FTS5 a pass over every message holding each word (bm25's
# weights count them), so the cut-off bounds the work whatever the size of the history; and a
# word that common says little about which message is wanted (bm25 gives a word in half the
# messages no weight at all).
COMMON_WORD_MESSAGES = 20_000

# The search text (?5) is stored only when it is not the message's own text, which the
# ``text`` column then reads from the JSON (migration m010).
_INSERT_MESSAGE = (
    "INSERT INTO messages (session_id, seq, role, content, body, own_text, tool_name, created_at, completed_at)"
    f" SELECT ?1, ?2, ?3, ?4, CASE WHEN own THEN '' ELSE ?5 END, own, ?6, ?7, ?8 FROM (SELECT ?5 IS {OWN_TEXT.format('?4')} AS own)"
)


MAX_QUERY_CHARS = 2_000
MAX_QUERY_TERMS = 16


class SearchQueryError(ValueError):
    """A search query too large to run; the message says what to do."""


class StoreOpenError(OSError):
    """The store file cannot be opened; the message names it and says what to do."""


class SessionNotFoundError(LookupError):
    """The session id names no stored session."""


class SessionStore(ApprovalQueries):
    """Persistent sessions, messages, approvals and rules on one SQLite file."""

    def __init__(self, conn: aiosqlite.Connection, path: Path) -> None:
        """Wrap an open, migrated connection; use :meth:`open` instead."""
        self._conn = conn
        self.path = path
        # One connection cannot hold two transactions: coroutines sharing this store take
        # turns, and reads never see another coroutine's uncommitted writes.
        self._lock = asyncio.Lock()

    @classmethod
    def open(cls, path: str | PathLike[str] | None = None) -> _Opening:
        """Open (creating and migrating) the store at ``path``, default ``home()/state.db``.

        Use as ``store = await SessionStore.open()`` or ``async with SessionStore.open() as store``.
        """
        return _Opening(cls, Path(path) if path is not None else None)

    async def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""
        await self._conn.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    # -- sessions -------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        cwd: str | PathLike[str],
        surface: Surface,
        model: str | None = None,
        title: str | None = None,
        parent_id: str | None = None,
        session_id: str | None = None,
        meta: dict[str, Any] | None = None,
        parent_call_id: str | None = None,
    ) -> SessionRecord:
        """Create a session; the id is a fresh uuid4 hex unless ``session_id`` is given.

        ``parent_call_id``: the tool call of session ``parent_id`` that runs this one as a subagent.
        """
        db.check_choice(surface, SURFACES, "surface")
        record = SessionRecord(
            id=session_id or uuid.uuid4().hex,
            title=title,
            cwd=str(cwd),
            surface=surface,
            model=model,
            parent_id=parent_id,
            created_at=(now := time.time()),
            updated_at=now,
            input_tokens=0,
            output_tokens=0,
            cache_read_tokens=0,
            cache_write_tokens=0,
            cost_usd=None,
            meta=dict(meta or {}),
            parent_call_id=parent_call_id,
        )
        meta_json = db.dump_json(record.meta)

        async def body(conn: aiosqlite.Connection) -> None:
            await db.execute(
                conn,
                "INSERT INTO sessions (id, title, cwd, surface, model, parent_id, parent_call_id, created_at, updated_at, meta)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record.id, title, record.cwd, surface, model, parent_id, parent_call_id, now, now, meta_json),
            )

        await self._write(body)
        return record

    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session with this id, or None."""
        row = await self._fetchone("SELECT * FROM sessions WHERE id = ?", (session_id,))
        return SessionRecord.from_row(row) if row else None

    async def list_sessions(
        self,
        *,
        cwd: str | PathLike[str] | None = None,
        surface: Surface | None = None,
        limit: int = 50,
        before: float | None = None,
        subagents: bool = True,
    ) -> list[SessionRecord]:
        """Sessions, most recently updated first; pass the last ``updated_at`` as ``before`` for the next page.
        ``subagents=False`` leaves out the sessions subagents ran in (they replay inside their parent)."""
        where: list[str] = ["1 = 1"]
        params: list[Any] = []
        if not subagents:
            where.append("parent_call_id IS NULL")
        if cwd is not None:
            where.append("cwd = ?")
            params.append(str(cwd))
        if surface is not None:
            where.append("surface = ?")
            params.append(surface)
        if before is not None:
            where.append("updated_at < ?")
            params.append(before)
        sql = f"SELECT * FROM sessions WHERE {' AND '.join(where)} ORDER BY updated_at DESC, id DESC LIMIT ?"
        rows = await self._fetchall(sql, (*params, limit))
        return [SessionRecord.from_row(row) for row in rows]

    async def subagent_sessions(self, parent_id: str) -> list[SessionRecord]:
        """The sessions subagents ran in for ``parent_id``'s tool calls, in the order they were started."""
        rows = await self._fetchall(
            "SELECT * FROM sessions WHERE parent_id = ? AND parent_call_id IS NOT NULL ORDER BY created_at, rowid", (parent_id,)
        )
        return [SessionRecord.from_row(row) for row in rows]

    async def subagents_usage(self, session_id: str) -> Usage:
        """The usage of every session subagents ran in for ``session_id`` (and the subagents those
        ran), summed: a session's own totals leave them out."""
        row = await self._fetchone(
            "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cache_read_tokens), 0),"
            " COALESCE(SUM(cache_write_tokens), 0), SUM(cost_usd) FROM sessions WHERE id IN (WITH RECURSIVE sub(id) AS ("
            " SELECT id FROM sessions WHERE parent_id = ? AND parent_call_id IS NOT NULL"
            " UNION SELECT s.id FROM sessions s JOIN sub ON s.parent_id = sub.id WHERE s.parent_call_id IS NOT NULL"
            ") SELECT id FROM sub)",
            (session_id,),
        )
        return Usage(*row) if row is not None else Usage()

    async def update_session(
        self,
        session_id: str,
        *,
        title: str | None = None,
        model: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> None:
        """Change the fields given (None leaves a field as it is).

        ``meta`` is merged into the stored object as a JSON merge patch (RFC 7396), inside the
        write transaction, so two processes setting different keys do not undo each other; a
        key set to None is removed. Does not touch ``updated_at``, which tracks activity.
        """
        meta_json = db.dump_json(meta) if meta is not None else None

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "UPDATE sessions SET title = COALESCE(?, title), model = COALESCE(?, model),"
                " meta = CASE WHEN ? IS NULL THEN meta ELSE json_patch(meta, ?) END WHERE id = ?",
                (title, model, meta_json, meta_json, session_id),
            )

        if not await self._write(body):
            raise SessionNotFoundError(session_id)

    async def add_usage(
        self,
        session_id: str,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        cost_usd: float | None = None,
    ) -> None:
        """Add one request's token counts (and cost, when known) to the session's totals."""

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "UPDATE sessions SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,"
                " cache_read_tokens = cache_read_tokens + ?, cache_write_tokens = cache_write_tokens + ?,"
                # An unknown cost adds nothing; the total stays NULL until some cost is known.
                " cost_usd = CASE WHEN ? IS NULL THEN cost_usd ELSE COALESCE(cost_usd, 0) + ? END"
                " WHERE id = ?",
                (input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, cost_usd, session_id),
            )

        if not await self._write(body):
            raise SessionNotFoundError(session_id)

    async def delete_session(self, session_id: str) -> bool:
        """Delete a session with its messages and approvals; forks keep living, parentless."""

        async def body(conn: aiosqlite.Connection) -> int:
            await db.execute(conn, "DELETE FROM approvals WHERE session_id = ?", (session_id,))
            # Messages go by ON DELETE CASCADE, and their FTS rows by the delete trigger.
            return await db.execute(conn, "DELETE FROM sessions WHERE id = ?", (session_id,))

        return bool(await self._write(body))

    # -- messages -------------------------------------------------------------------------

    async def append_message(self, session_id: str, message: Message, *, created_at: float | None = None) -> StoredMessage:
        """Append a completed message to a session, as the next ``seq``, and bump ``updated_at``."""
        content = dump_message(message)
        clean = scrub(content)
        if clean != content:  # a configured secret got in (a tool printed it, the user pasted it)
            content, message = clean, load_message(clean)
        text = scrub(searchable_text(message))
        tool_name = _tool_name(message)
        now = time.time()
        created = now if created_at is None else created_at

        async def body(conn: aiosqlite.Connection) -> tuple[int, int]:
            if not await db.execute(conn, "UPDATE sessions SET updated_at = MAX(updated_at, ?) WHERE id = ?", (now, session_id)):
                raise SessionNotFoundError(session_id)
            # Safe as max+1 only because BEGIN IMMEDIATE already holds the write lock.
            async with conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?", (session_id,)) as cursor:
                (seq,) = await cursor.fetchone() or (1,)
            async with conn.execute(_INSERT_MESSAGE, (session_id, seq, message.kind, content, text, tool_name, created, now)) as cursor:
                row_id = cursor.lastrowid
            assert row_id is not None
            return row_id, seq

        row_id, seq = await self._write(body)
        return StoredMessage(id=row_id, session_id=session_id, seq=seq, message=message, created_at=created)

    async def copy_messages(self, source_id: str, target_id: str) -> int:
        """Copy every message of one session to the end of another, in one transaction (for forks)."""
        now = time.time()

        async def body(conn: aiosqlite.Connection) -> int:
            if not await db.execute(conn, "UPDATE sessions SET updated_at = MAX(updated_at, ?) WHERE id = ?", (now, target_id)):
                raise SessionNotFoundError(target_id)
            async with conn.execute("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?", (target_id,)) as cursor:
                (offset,) = await cursor.fetchone() or (0,)
            async with conn.execute(
                "INSERT INTO messages (session_id, seq, role, content, body, own_text, tool_name, created_at, completed_at)"
                " SELECT ?, seq + ?, role, content, body, own_text, tool_name, created_at, completed_at"
                " FROM messages WHERE session_id = ? ORDER BY seq",
                (target_id, offset, source_id),
            ) as cursor:
                return cursor.rowcount

        return await self._write(body)

    async def messages(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> list[StoredMessage]:
        """The session's messages in ``seq`` order, those after ``after_seq``, at most ``limit``."""
        rows = await self._fetchall(
            # Only what a StoredMessage holds: ``*`` would also compute the generated search text
            # of every row (a JSON extraction) and copy the indexed body, half the read's time.
            "SELECT id, session_id, seq, content, created_at FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, after_seq, -1 if limit is None else limit),
        )
        return [StoredMessage.from_row(row) for row in rows]

    async def stored_messages(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> list[tuple[int, str]]:
        """``(seq, JSON)`` of the session's messages in ``seq`` order, those after ``after_seq``, at
        most ``limit``: each message as :func:`~core.messages.dump_message` stored it, unparsed
        (for readers that need only some of its fields, such as a replay)."""
        rows = await self._fetchall(
            "SELECT seq, content FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (session_id, after_seq, -1 if limit is None else limit),
        )
        return [(row[0], row[1]) for row in rows]

    async def message_count(self, session_id: str) -> int:
        """How many messages the session has."""
        row = await self._fetchone("SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,))
        return int(row[0]) if row else 0

    async def search(
        self,
        query: str,
        *,
        limit: int = 20,
        session_id: str | None = None,
        cwd: str | PathLike[str] | None = None,
        common_above: int | None = None,
    ) -> list[SearchHit]:
        """Full-text search over message text, best match first; every word must occur.

        Best is bm25 while every word is in at most ``common_above`` messages (default
        :data:`COMMON_WORD_MESSAGES`), else the newest matches (score 0.0).

        ``query`` is free text, never FTS5 syntax: operators and punctuation are matched as words.
        """
        match = fts_query(query)
        if match is None:
            return []
        # The index ranks and cuts the page by itself, and only that page is joined to messages
        # and sessions. The page is a co-routine (CROSS JOIN keeps it the outer loop), so ORDER BY
        # ... LIMIT skips snippet() for rows that cannot enter it. A session is a set of message
        # ids the index rows are checked against (+rowid: as an index constraint FTS5 would seek
        # once per id); a cwd is a set of session ids, checked on the message row.
        where: list[str] = ["messages_fts MATCH ?"]
        params: list[Any] = [match]
        if session_id is not None:
            where.append("+messages_fts.rowid IN (SELECT id FROM messages WHERE session_id = ?)")
            params.append(session_id)
            span = await self._fetchall("SELECT min(id) AS lo, max(id) AS hi FROM messages WHERE session_id = ?", (session_id,))
            if span[0]["lo"] is None:
                return []
            # Bound values: FTS5 then reads only that range of each word's list.
            where.append("messages_fts.rowid BETWEEN ? AND ?")
            params += [span[0]["lo"], span[0]["hi"]]
        if cwd is not None:
            where.append("m.session_id IN (SELECT id FROM sessions WHERE cwd = ?)")
            params.append(str(cwd))
        join = " CROSS JOIN messages m ON m.id = messages_fts.rowid" if cwd is not None else ""
        # A word in more messages than COMMON_WORD_MESSAGES has next to no bm25 weight, and
        # ranking it means a pass over its whole list: such a query gets the newest matches,
        # which FTS5 finds by reading its lists backwards until the page is full (score 0).
        newest = await self._has_common_word(match, common_above)
        score = "0.0" if newest else "bm25(messages_fts)"
        order = "messages_fts.rowid DESC" if newest else "bm25, messages_fts.rowid DESC"
        page = (
            f"SELECT messages_fts.rowid AS id, {score} AS bm25,"
            f" snippet(messages_fts, 0, '[', ']', '…', {_SNIPPET_TOKENS}) AS snippet"
            f" FROM messages_fts{join} WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
        )
        sql = (
            "SELECT m.session_id, s.title, m.id, m.seq, m.role, m.created_at, hit.snippet, hit.bm25"
            f" FROM ({page}) AS hit CROSS JOIN messages m ON m.id = hit.id CROSS JOIN sessions s ON s.id = m.session_id"
            " ORDER BY hit.bm25, hit.id DESC"
        )
        rows = await self._fetchall(sql, (*params, limit))
        return [
            SearchHit(
                session_id=row["session_id"],
                session_title=row["title"],
                message_id=row["id"],
                seq=row["seq"],
                role=row["role"],
                snippet=row["snippet"],
                # bm25() is lower-is-better; flipped so that callers can read it as a score.
                score=-row["bm25"] or 0.0,
                created_at=row["created_at"],
            )
            for row in rows
        ]

    async def _has_common_word(self, match: str, common_above: int | None) -> bool:
        """Whether a phrase of ``match`` (quoted phrases, as :func:`fts_query` makes them) is in
        more than COMMON_WORD_MESSAGES messages (see :meth:`any_in_more_than`)."""
        phrases = re.findall(r'"(?:[^"]|"")*"', match)
        common = COMMON_WORD_MESSAGES if common_above is None else common_above
        return await self.any_in_more_than("messages_fts", phrases, common)

    async def any_in_more_than(self, table: str, phrases: list[str], count: int) -> bool:
        """Whether one of ``phrases`` matches more than ``count`` rows of the full-text ``table``:
        a probe reads at most ``count + 1`` entries of each list, one phrase after the other, and
        stops at the first that has them (``UNION ALL ... LIMIT 1`` runs its arms in turn)."""
        if not phrases:
            return False
        probe = " UNION ALL ".join(f"SELECT * FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT 1 OFFSET ?)" for _ in phrases)
        params = tuple(v for phrase in phrases for v in (phrase, count))
        return bool(await self._fetchall(f"{probe} LIMIT 1", params))

    # -- plumbing -------------------------------------------------------------------------

    async def select(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        """Rows of one ``SELECT`` statement over the store's tables, for readers such as
        :mod:`core.store.history`; any other statement raises ValueError (sqlite runs only one)."""
        head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if head != "SELECT":  # WITH may lead into DELETE or UPDATE
            raise ValueError("select() runs only SELECT statements")
        return await self._fetchall(sql, params)

    async def _write(self, body: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        async with self._lock:
            return await db.write(self._conn, body)

    async def _fetchall(self, sql: str, params: tuple[Any, ...]) -> list[sqlite3.Row]:
        async def body(conn: aiosqlite.Connection) -> list[sqlite3.Row]:
            # One trip to the connection's thread (execute, fetch and close there), not three.
            return list(await conn.execute_fetchall(sql, params))

        async with self._lock:
            return await db.read(self._conn, body)

    async def _fetchone(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Row | None:
        """The row of a statement that returns at most one (by key, an aggregate): one trip to
        the connection's thread, as :meth:`_fetchall` (a cursor's execute, fetch and close are three)."""
        rows = await self._fetchall(sql, params)
        return rows[0] if rows else None


class _Opening:
    """What :meth:`SessionStore.open` returns: await it, or use it with ``async with``."""

    def __init__(self, cls: type[SessionStore], path: Path | None) -> None:
        self._cls = cls
        self._path = path
        self._store: SessionStore | None = None

    async def _open(self) -> SessionStore:
        path = self._path or home() / "state.db"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = await db.connect(path)
        except (OSError, sqlite3.Error) as exc:
            raise StoreOpenError(
                f"cannot open the session store {path}: {exc}. Check that it is a writable SQLite file "
                "(set HERMES_EDITOR_HOME to use another folder)."
            ) from exc
        try:
            await migrate(conn)
        except BaseException:
            await conn.close()
            raise
        return self._cls(conn, path)

    def __await__(self) -> Generator[Any, None, SessionStore]:
        return self._open().__await__()

    async def __aenter__(self) -> SessionStore:
        self._store = await self._open()
        return self._store

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._store is not None:
            await self._store.close()


def check_query_size(text: str, terms: list[str]) -> list[str]:
    """``terms`` without repeats (FTS5 matches words case-blind); SearchQueryError when the query
    is longer than MAX_QUERY_CHARS or has more than MAX_QUERY_TERMS different terms (FTS5's work
    grows with every term, so a huge query would hold a process for minutes)."""
    if len(text) > MAX_QUERY_CHARS:
        raise SearchQueryError(f"the search query has {len(text):,} characters; use at most {MAX_QUERY_CHARS:,}")
    unique = list({term.casefold(): term for term in reversed(terms)}.values())[::-1]
    if len(unique) > MAX_QUERY_TERMS:
        raise SearchQueryError(
            f"the search query has {len(unique)} different terms; use at most {MAX_QUERY_TERMS} (the most distinctive words)"
        )
    return unique


def fts_query(text: str) -> str | None:
    """Turn free text into an FTS5 query matching every word; None when there is nothing to search.

    Each whitespace-separated token becomes a quoted phrase (inner quotes doubled), so
    ``AND``, ``NEAR(``, ``-``, ``*``, ``col:`` and stray quotes are only ever words. Repeated
    words count once; a query too large raises SearchQueryError (see ``check_query_size``).
    """
    # FTS5 reads the query as a C string: a NUL would cut it inside a quoted phrase.
    tokens = check_query_size(text, text.replace("\x00", " ").split())
    if not tokens:
        return None
    return " ".join('"' + token.replace('"', '""') + '"' for token in tokens)


def _tool_name(message: Message) -> str | None:
    if isinstance(message, ToolResultMessage):
        return message.tool_name
    if isinstance(message, AssistantMessage):
        return " ".join(call.name for call in message.tool_calls) or None
    return None
