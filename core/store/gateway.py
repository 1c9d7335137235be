"""The gateway's rows: pairing codes and the users they admitted, identity links, chat bindings,
who started each gateway session, remote approvals.

Users are identities, ``"<platform>:<native id>"`` (``telegram:123``, ``discord:456``,
``email:ada@example.org``), and chats are place keys, ``"<platform>:<chat>:<thread or 0>"``
(``telegram:-100200:7``). A person who uses several platforms links their identities: each
linked identity names the identity it was linked to as its *person*, and an identity never
linked is its own person. What a person owns (the sessions they started, their cron jobs, the
turn running in a chat) is stored under the person, so it follows them from one platform to
another.

Kept out of ``sessions.py``; it shares the :class:`SessionStore`'s connection and lock.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass

import aiosqlite

from core.store import db
from core.store.records import SessionRecord
from core.store.sessions import SessionStore

__all__ = [
    "LINK_ALPHABET",
    "ChatBinding",
    "GatewayStore",
    "PairingCode",
    "SessionStarter",
    "identity_of",
    "place_key_of",
]

# Link codes: no look-alikes (0/O, 1/I/L), as pairing codes.
LINK_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
LINK_CODE_LENGTH = 8
LINK_CODE_TTL = 600.0
# Wrong link codes an identity may send in an hour before its attempts are refused unread.
MAX_LINK_FAILURES = 5
LINK_LOCKOUT = 3600.0

_PLATFORM = r"[a-z][a-z0-9_]*"
_IDENTITY = re.compile(rf"({_PLATFORM}):(\S.*)")
_PLACE_KEY = re.compile(rf"({_PLATFORM}):(\S.*):([^:\s]+)")


def identity_of(value: str | int) -> str:
    """The identity a person typed or configured: ``discord:456`` as it is, a bare number (``123``)
    as a Telegram user id (``telegram:123``). ValueError names the forms it takes."""
    text = str(value).strip()
    if text.isdigit():
        return f"telegram:{text}"
    if _IDENTITY.fullmatch(text):
        return text
    raise ValueError(f"{text!r} is not a user: write platform:id (discord:456, email:ada@example.org) or a number (a Telegram user id)")


def place_key_of(value: str | int) -> str:
    """The place key a person typed or configured: ``discord:123:0`` as it is, a bare number
    (``-100200``) as a Telegram chat without a thread (``telegram:-100200:0``). ValueError names the forms."""
    text = str(value).strip()
    if re.fullmatch(r"-?[0-9]+", text):
        return f"telegram:{text}:0"
    if _PLACE_KEY.fullmatch(text):
        return text
    raise ValueError(
        f"{text!r} is not a chat: write platform:chat:thread (thread 0 for none, e.g. discord:123:0) or a number (a Telegram chat id)"
    )


def _clean_code(code: str) -> str:
    return "".join(code.split()).upper().replace("-", "")


@dataclass(frozen=True, slots=True)
class PairingCode:
    """A code an unknown user was given: ``user_id`` is their identity, ``chat_key`` the place they asked in."""

    code: str
    user_id: str
    chat_key: str
    name: str | None
    status: str  # pending | approved | rejected | expired (made room for newer codes)
    created_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class ChatBinding:
    """Which project, session and mode one place (a chat, or a thread in it) is in."""

    chat_key: str
    project: str | None
    session_id: str | None
    mode: str | None


@dataclass(frozen=True, slots=True)
class SessionStarter:
    """Who started a gateway session: a person in a chat, or the maker of a cron job (a person)."""

    session_id: str
    user_id: str
    chat_key: str | None
    origin: str  # chat | cron


class GatewayStore:
    """Pairing, users, identity links, chat bindings and remote-approval bookkeeping."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    # -- pairing --------------------------------------------------------------------------

    async def pending_codes(self, now: float) -> list[PairingCode]:
        rows = await self._store._fetchall(
            "SELECT * FROM pairing_codes WHERE status = 'pending' AND expires_at > ? ORDER BY created_at", (now,)
        )
        return [PairingCode(**dict(r)) for r in rows]

    async def code_for_user(self, user_id: str) -> PairingCode | None:
        """The identity's most recent code, whatever its state."""
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
                "INSERT INTO pairing_codes (code, user_id, chat_key, name, status, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, 'pending', ?, ?)",
                (code.code, code.user_id, code.chat_key, code.name, code.created_at, code.expires_at),
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
                "INSERT INTO gateway_users (user_id, name, chat_key, approved_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (user_id) DO UPDATE SET name = excluded.name, approved_at = excluded.approved_at",
                (found.user_id, found.name, found.chat_key, now),
            )
            return found

        return await self._store._write(body)

    async def reject_code(self, code: str) -> bool:
        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(conn, "UPDATE pairing_codes SET status = 'rejected' WHERE code = ? AND status = 'pending'", (code,))

        return bool(await self._store._write(body))

    async def is_user_allowed(self, user_id: str) -> bool:
        """Whether this identity was paired (exactly this one; see :meth:`person_of` for links)."""
        row = await self._store._fetchone("SELECT 1 FROM gateway_users WHERE user_id = ?", (user_id,))
        return row is not None

    async def users(self) -> list[tuple[str, str | None, float]]:
        """(identity, name, paired at) of every paired identity, oldest first."""
        rows = await self._store._fetchall("SELECT user_id, name, approved_at FROM gateway_users ORDER BY approved_at", ())
        return [(r["user_id"], r["name"], r["approved_at"]) for r in rows]

    async def revoke_user(self, user_id: str) -> bool:
        """Take back an identity's pairing and its link to a person (it then reaches the bot through
        neither); identities linked to it keep their links. False when it had neither."""

        async def body(conn: aiosqlite.Connection) -> int:
            paired = await db.execute(conn, "DELETE FROM gateway_users WHERE user_id = ?", (user_id,))
            linked = await db.execute(conn, "DELETE FROM gateway_links WHERE identity = ?", (user_id,))
            return paired + linked

        return bool(await self._store._write(body))

    # -- identity links -------------------------------------------------------------------

    async def person_of(self, identity: str) -> str:
        """The person an identity belongs to: the identity it was linked to, else itself."""
        row = await self._store._fetchone("SELECT person FROM gateway_links WHERE identity = ?", (identity,))
        return str(row["person"]) if row else identity

    async def identities_of(self, person: str) -> list[str]:
        """Every identity of the person ``person`` belongs to: the person first, then those linked to it, oldest link first."""
        person = await self.person_of(person)
        rows = await self._store._fetchall("SELECT identity FROM gateway_links WHERE person = ? ORDER BY linked_at, identity", (person,))
        return [person, *(r["identity"] for r in rows)]

    async def links(self) -> list[tuple[str, str, float]]:
        """(identity, person, linked at) of every link, oldest first."""
        rows = await self._store._fetchall("SELECT identity, person, linked_at FROM gateway_links ORDER BY linked_at, identity", ())
        return [(r["identity"], r["person"], r["linked_at"]) for r in rows]

    async def issue_link_code(self, identity: str, *, ttl: float = LINK_CODE_TTL, now: float | None = None) -> tuple[str, float]:
        """A new one-time code (and when it expires) that links another identity to this one's
        person when sent from there (:meth:`redeem_link_code`). An identity holds one live code:
        issuing again replaces it. The gateway gives codes only to identities allowed to use it."""
        now = time.time() if now is None else now
        expires_at = now + ttl

        async def body(conn: aiosqlite.Connection) -> str:
            await db.execute(conn, "DELETE FROM gateway_link_codes WHERE identity = ? OR expires_at <= ?", (identity, now))
            while True:
                code = "".join(secrets.choice(LINK_ALPHABET) for _ in range(LINK_CODE_LENGTH))
                inserted = await db.execute(
                    conn,
                    "INSERT OR IGNORE INTO gateway_link_codes (code, identity, created_at, expires_at, used) VALUES (?, ?, ?, ?, 0)",
                    (code, identity, now, expires_at),
                )
                if inserted:
                    return code

        return await self._store._write(body), expires_at

    async def redeem_link_code(self, code: str, identity: str, *, now: float | None = None) -> str | None:
        """Link ``identity`` to the person of the code's issuer; returns that person.

        None when no live code matches, when ``identity`` issued it itself (the code stays live), or
        when ``identity`` sent too many wrong codes in the last hour. A code works once.

        An identity that is a person itself brings what is its own: the identities linked to it,
        and the sessions, jobs and chat turns stored under it, are the issuer's person's from now
        on. An identity linked to another person moves alone: what is stored under that person
        stays theirs (the others linked there share it).
        """
        now = time.time() if now is None else now
        wanted = _clean_code(code)

        async def body(conn: aiosqlite.Connection) -> str | None:
            async with conn.execute(
                "SELECT COUNT(*) FROM gateway_link_attempts WHERE identity = ? AND at > ?", (identity, now - LINK_LOCKOUT)
            ) as cursor:
                row = await cursor.fetchone()
            if row is not None and int(row[0]) >= MAX_LINK_FAILURES:
                return None
            async with conn.execute(
                "SELECT identity FROM gateway_link_codes WHERE code = ? AND used = 0 AND expires_at > ?", (wanted, now)
            ) as cursor:
                found = await cursor.fetchone()
            if found is None:
                await db.execute(conn, "DELETE FROM gateway_link_attempts WHERE at <= ?", (now - LINK_LOCKOUT,))
                await db.execute(conn, "INSERT INTO gateway_link_attempts (identity, at) VALUES (?, ?)", (identity, now))
                return None
            issuer = str(found["identity"])
            if issuer == identity:
                return None
            await db.execute(conn, "UPDATE gateway_link_codes SET used = 1 WHERE code = ?", (wanted,))
            person = await _person(conn, issuer)
            old = await _person(conn, identity)
            if old == identity:
                await _merge(conn, identity, person, now)
            elif old != person:
                await db.execute(conn, "UPDATE gateway_links SET person = ?, linked_at = ? WHERE identity = ?", (person, now, identity))
            return person

        return await self._store._write(body)

    async def link_code_person(self, code: str, *, now: float | None = None) -> str | None:
        """The person a live link code would link to (its issuer's), without using it or counting
        a miss; None when no live code matches. For a check before :meth:`redeem_link_code`."""
        now = time.time() if now is None else now
        row = await self._store._fetchone(
            "SELECT identity FROM gateway_link_codes WHERE code = ? AND used = 0 AND expires_at > ?", (_clean_code(code), now)
        )
        return await self.person_of(str(row["identity"])) if row else None

    async def unlink(self, identity: str) -> bool:
        """Undo ``identity``'s link: it is its own person again (what is stored under the person
        stays the person's). False when it was not linked (a person itself, or unknown)."""

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(conn, "DELETE FROM gateway_links WHERE identity = ?", (identity,))

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

    async def set_turn_user(self, chat_key: str, user: str) -> None:
        """Record whose turn runs at this place now (a person: tools acting in the turn act for them)."""

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(conn, "UPDATE gateway_chats SET turn_user = ? WHERE chat_key = ?", (user, chat_key))

        await self._store._write(body)

    async def session_chats(self, session_id: str) -> list[tuple[str, str | None]]:
        """(place key, person whose turn ran there last) for every place bound to ``session_id``."""
        rows = await self._store._fetchall(
            "SELECT chat_key, turn_user FROM gateway_chats WHERE session_id = ? ORDER BY chat_key", (session_id,)
        )
        return [(r["chat_key"], r["turn_user"]) for r in rows]

    # -- who started which session --------------------------------------------------------

    async def record_starter(self, session_id: str, user: str, *, chat_key: str | None, origin: str) -> None:
        """Record that ``user`` (a person) started the session, at ``chat_key`` (None for a cron run)."""

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "INSERT OR IGNORE INTO gateway_sessions (session_id, user_id, chat_key, origin, created_at) VALUES (?, ?, ?, ?, ?)",
                (session_id, user, chat_key, origin, time.time()),
            )

        await self._store._write(body)

    async def starter(self, session_id: str) -> SessionStarter | None:
        """Who started the session; None for a session the gateway's owner holds (editor, machine, older)."""
        row = await self._store._fetchone("SELECT * FROM gateway_sessions WHERE session_id = ?", (session_id,))
        if row is None:
            return None
        return SessionStarter(row["session_id"], row["user_id"], row["chat_key"], row["origin"])

    async def sessions_started_by(self, user: str, limit: int = 500) -> list[SessionRecord]:
        """The sessions ``user`` (a person) started, most recently updated first."""
        rows = await self._store._fetchall(
            "SELECT s.* FROM sessions s JOIN gateway_sessions g ON g.session_id = s.id WHERE g.user_id = ?"
            " ORDER BY s.updated_at DESC, s.id DESC LIMIT ?",
            (user, limit),
        )
        return [SessionRecord.from_row(r) for r in rows]

    async def sessions_with_prefix(self, prefix: str, limit: int = 10) -> list[SessionRecord]:
        """Sessions whose id starts with ``prefix`` (lowercase hex), newest first."""
        rows = await self._store._fetchall(
            "SELECT * FROM sessions WHERE substr(id, 1, ?) = ? ORDER BY updated_at DESC LIMIT ?", (len(prefix), prefix, limit)
        )
        return [SessionRecord.from_row(r) for r in rows]

    async def readable_sessions(self, session_id: str, owners: frozenset[str]) -> set[str] | None:
        """Which sessions a turn of ``session_id`` may read from the store: None for all, else a set.

        Whatever a turn reads lands in this session's history, so it is limited by every person
        other than the owner (``owners``: the owner's identities) who can read this session back:
        its starter and the people whose turns ran in the places it is bound to. They may read
        the sessions that all of them started (and this one).
        """
        users = {user for _, user in await self.session_chats(session_id) if user is not None}
        starter = await self.starter(session_id)
        if starter is not None:
            users.add(starter.user_id)
        users -= owners
        if not users:
            return None
        allowed: set[str] | None = None
        for user in users:
            theirs = {r.id for r in await self.sessions_started_by(user)}
            allowed = theirs if allowed is None else allowed & theirs
        return (allowed or set()) | {session_id}

    # -- remote approvals -----------------------------------------------------------------

    async def mark_remote_sent(self, approval_id: str, chat_key: str) -> bool:
        """Record that a question went to the owner's place ``chat_key``; False when some gateway already sent it."""

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "INSERT OR IGNORE INTO gateway_remote_approvals (approval_id, chat_key, sent_at) VALUES (?, ?, ?)",
                (approval_id, chat_key, time.time()),
            )

        return bool(await self._store._write(body))

    async def set_remote_message(self, approval_id: str, message_id: str) -> None:
        """The platform's id of the message that asked (platforms' message ids are text)."""

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn, "UPDATE gateway_remote_approvals SET message_id = ? WHERE approval_id = ?", (str(message_id), approval_id)
            )

        await self._store._write(body)


async def _person(conn: aiosqlite.Connection, identity: str) -> str:
    async with conn.execute("SELECT person FROM gateway_links WHERE identity = ?", (identity,)) as cursor:
        row = await cursor.fetchone()
    return str(row["person"]) if row else identity


async def _merge(conn: aiosqlite.Connection, old: str, person: str, now: float) -> None:
    """Make everyone and everything of the person ``old`` the person ``person``'s (inside a write)."""
    await db.execute(conn, "UPDATE gateway_links SET person = ? WHERE person = ?", (person, old))
    await db.execute(
        conn,
        "INSERT INTO gateway_links (identity, person, linked_at) VALUES (?, ?, ?)"
        " ON CONFLICT (identity) DO UPDATE SET person = excluded.person, linked_at = excluded.linked_at",
        (old, person, now),
    )
    await db.execute(conn, "UPDATE gateway_sessions SET user_id = ? WHERE user_id = ?", (person, old))
    await db.execute(conn, "UPDATE gateway_chats SET turn_user = ? WHERE turn_user = ?", (person, old))
    await db.execute(conn, "UPDATE cron_jobs SET owner_id = ? WHERE owner_id = ?", (person, old))
