"""The gateway's rows: pairing codes and the users they admitted, chat bindings, who started
each gateway session, remote approvals.

Kept out of ``sessions.py``; it shares the :class:`SessionStore`'s connection and lock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import aiosqlite

from core.store import db
from core.store.records import SessionRecord
from core.store.sessions import SessionStore

__all__ = ["ChatBinding", "GatewayStore", "PairingCode", "SessionStarter"]


@dataclass(frozen=True, slots=True)
class PairingCode:
    code: str
    user_id: int
    chat_id: int
    name: str | None
    status: str  # pending | approved | rejected | expired (made room for newer codes)
    created_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class ChatBinding:
    """Which project, session and mode one chat (or forum topic) is in."""

    chat_key: str
    project: str | None
    session_id: str | None
    mode: str | None


@dataclass(frozen=True, slots=True)
class SessionStarter:
    """Who started a gateway session: a chat user in a chat, or the maker of a cron job."""

    session_id: str
    user_id: int
    chat_key: str | None
    origin: str  # chat | cron


class GatewayStore:
    """Pairing, users, chat bindings and remote-approval bookkeeping."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    # -- pairing --------------------------------------------------------------------------

    async def pending_codes(self, now: float) -> list[PairingCode]:
        rows = await self._store._fetchall(
            "SELECT * FROM pairing_codes WHERE status = 'pending' AND expires_at > ? ORDER BY created_at", (now,)
        )
        return [PairingCode(**dict(r)) for r in rows]

    async def code_for_user(self, user_id: int) -> PairingCode | None:
        """The user's most recent code, whatever its state."""
        row = await self._store._fetchone("SELECT * FROM pairing_codes WHERE user_id = ? ORDER BY created_at DESC LIMIT 1", (user_id,))
        return PairingCode(**dict(row)) if row else None

    async def issue_code(self, code: PairingCode, *, max_pending: int) -> PairingCode:
        """The user's live code if they have one; else ``code``, inserted. At most ``max_pending``
        codes wait at once: past that the oldest are expired to make room, so that a flood of
        strangers can never keep a newcomer from getting a code. One transaction."""

        async def body(conn: aiosqlite.Connection) -> PairingCode:
            now = code.created_at
            async with conn.execute(
                "SELECT * FROM pairing_codes WHERE user_id = ? AND status = 'pending' AND expires_at > ? ORDER BY created_at DESC LIMIT 1",
                (code.user_id, now),
            ) as cursor:
                live = await cursor.fetchone()
            if live is not None:
                return PairingCode(**dict(live))
            async with conn.execute("SELECT COUNT(*) FROM pairing_codes WHERE status = 'pending' AND expires_at > ?", (now,)) as cursor:
                row = await cursor.fetchone()
            count = int(row[0]) if row else 0
            if count >= max_pending:
                await db.execute(
                    conn,
                    "UPDATE pairing_codes SET status = 'expired' WHERE code IN (SELECT code FROM pairing_codes"
                    " WHERE status = 'pending' AND expires_at > ? ORDER BY created_at, rowid LIMIT ?)",
                    (now, count - max_pending + 1),
                )
            await db.execute(
                conn,
                "INSERT INTO pairing_codes (code, user_id, chat_id, name, status, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, 'pending', ?, ?)",
                (code.code, code.user_id, code.chat_id, code.name, code.created_at, code.expires_at),
            )
            return code

        return await self._store._write(body)

    async def recent_failures(self, since: float) -> int:
        row = await self._store._fetchone("SELECT COUNT(*) AS n FROM pairing_attempts WHERE ok = 0 AND at > ?", (since,))
        return int(row["n"]) if row else 0

    async def approve_code(self, code: str, now: float) -> PairingCode | None:
        """Approve a pending, unexpired code and admit its user; records the attempt either way."""

        async def body(conn: aiosqlite.Connection) -> PairingCode | None:
            async with conn.execute(
                "SELECT * FROM pairing_codes WHERE code = ? AND status = 'pending' AND expires_at > ?", (code, now)
            ) as cursor:
                row = await cursor.fetchone()
            await db.execute(conn, "INSERT INTO pairing_attempts (at, ok) VALUES (?, ?)", (now, int(row is not None)))
            if row is None:
                return None
            found = PairingCode(**dict(row))
            await db.execute(conn, "UPDATE pairing_codes SET status = 'approved' WHERE code = ?", (code,))
            await db.execute(
                conn,
                "INSERT INTO gateway_users (user_id, name, chat_id, approved_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (user_id) DO UPDATE SET name = excluded.name, approved_at = excluded.approved_at",
                (found.user_id, found.name, found.chat_id, now),
            )
            return found

        return await self._store._write(body)

    async def reject_code(self, code: str) -> bool:
        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(conn, "UPDATE pairing_codes SET status = 'rejected' WHERE code = ? AND status = 'pending'", (code,))

        return bool(await self._store._write(body))

    async def is_user_allowed(self, user_id: int) -> bool:
        row = await self._store._fetchone("SELECT 1 FROM gateway_users WHERE user_id = ?", (user_id,))
        return row is not None

    async def users(self) -> list[tuple[int, str | None, float]]:
        rows = await self._store._fetchall("SELECT user_id, name, approved_at FROM gateway_users ORDER BY approved_at", ())
        return [(r["user_id"], r["name"], r["approved_at"]) for r in rows]

    async def revoke_user(self, user_id: int) -> bool:
        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(conn, "DELETE FROM gateway_users WHERE user_id = ?", (user_id,))

        return bool(await self._store._write(body))

    # -- chats ----------------------------------------------------------------------------

    async def binding(self, chat_key: str) -> ChatBinding:
        row = await self._store._fetchone("SELECT * FROM gateway_chats WHERE chat_key = ?", (chat_key,))
        if row is None:
            return ChatBinding(chat_key, None, None, None)
        return ChatBinding(chat_key, row["project"], row["session_id"], row["mode"])

    async def bind(self, binding: ChatBinding) -> None:
        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "INSERT INTO gateway_chats (chat_key, project, session_id, mode, updated_at) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (chat_key) DO UPDATE SET project = excluded.project, session_id = excluded.session_id,"
                " mode = excluded.mode, updated_at = excluded.updated_at",
                (binding.chat_key, binding.project, binding.session_id, binding.mode, time.time()),
            )

        await self._store._write(body)

    async def set_turn_user(self, chat_key: str, user_id: int) -> None:
        """Record whose turn runs in this chat now (tools acting in the turn act for them)."""

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(conn, "UPDATE gateway_chats SET turn_user = ? WHERE chat_key = ?", (user_id, chat_key))

        await self._store._write(body)

    async def session_chats(self, session_id: str) -> list[tuple[str, int | None]]:
        """(chat key, user of its turn) for every chat bound to ``session_id``."""
        rows = await self._store._fetchall(
            "SELECT chat_key, turn_user FROM gateway_chats WHERE session_id = ? ORDER BY chat_key", (session_id,)
        )
        return [(r["chat_key"], r["turn_user"]) for r in rows]

    # -- who started which session --------------------------------------------------------

    async def record_starter(self, session_id: str, user_id: int, *, chat_key: str | None, origin: str) -> None:
        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "INSERT OR IGNORE INTO gateway_sessions (session_id, user_id, chat_key, origin, created_at) VALUES (?, ?, ?, ?, ?)",
                (session_id, user_id, chat_key, origin, time.time()),
            )

        await self._store._write(body)

    async def starter(self, session_id: str) -> SessionStarter | None:
        """Who started the session; None for a session the gateway's owner holds (editor, machine, older)."""
        row = await self._store._fetchone("SELECT * FROM gateway_sessions WHERE session_id = ?", (session_id,))
        if row is None:
            return None
        return SessionStarter(row["session_id"], row["user_id"], row["chat_key"], row["origin"])

    async def sessions_started_by(self, user_id: int, limit: int = 500) -> list[SessionRecord]:
        """The sessions ``user_id`` started, most recently updated first."""
        rows = await self._store._fetchall(
            "SELECT s.* FROM sessions s JOIN gateway_sessions g ON g.session_id = s.id WHERE g.user_id = ?"
            " ORDER BY s.updated_at DESC, s.id DESC LIMIT ?",
            (user_id, limit),
        )
        return [SessionRecord.from_row(r) for r in rows]

    async def sessions_with_prefix(self, prefix: str, limit: int = 10) -> list[SessionRecord]:
        """Sessions whose id starts with ``prefix`` (lowercase hex), newest first."""
        rows = await self._store._fetchall(
            "SELECT * FROM sessions WHERE substr(id, 1, ?) = ? ORDER BY updated_at DESC LIMIT ?", (len(prefix), prefix, limit)
        )
        return [SessionRecord.from_row(r) for r in rows]

    async def readable_sessions(self, session_id: str, owner: int | None) -> set[str] | None:
        """Which sessions a turn of ``session_id`` may read from the store: None for all, else a set.

        Whatever a turn reads lands in this session's history, so it is limited by every chat user
        other than the owner who can read this session back: its starter and the users of the
        chats it is bound to. They may read the sessions that all of them started (and this one).
        """
        users = {user for _, user in await self.session_chats(session_id) if user is not None}
        starter = await self.starter(session_id)
        if starter is not None:
            users.add(starter.user_id)
        users.discard(owner)
        if not users:
            return None
        allowed: set[str] | None = None
        for user in users:
            theirs = {r.id for r in await self.sessions_started_by(user)}
            allowed = theirs if allowed is None else allowed & theirs
        return (allowed or set()) | {session_id}

    # -- remote approvals -----------------------------------------------------------------

    async def mark_remote_sent(self, approval_id: str, chat_id: int) -> bool:
        """Record that a question went to the owner's chat; False when some gateway already sent it."""

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "INSERT OR IGNORE INTO gateway_remote_approvals (approval_id, chat_id, sent_at) VALUES (?, ?, ?)",
                (approval_id, chat_id, time.time()),
            )

        return bool(await self._store._write(body))

    async def set_remote_message(self, approval_id: str, message_id: int) -> None:
        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn, "UPDATE gateway_remote_approvals SET message_id = ? WHERE approval_id = ?", (message_id, approval_id)
            )

        await self._store._write(body)
