"""One SQLite connection, configured for several processes sharing one file.

Every surface is its own process and they all write ``state.db``. WAL lets readers go on
while one writer writes; ``BEGIN IMMEDIATE`` takes the write lock up front, so a transaction
can never fail half-way through on a lock upgrade; and what ``busy_timeout`` does not absorb
is retried here with a jittered backoff, so callers never see "database is locked".
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

__all__ = ["BUSY_TIMEOUT_MS", "check_choice", "connect", "dump_json", "execute", "is_busy", "read", "write"]

log = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000
# How long we keep retrying after SQLite itself gave up waiting; generous, since the
# alternative is failing a turn that has already done its work.
RETRY_FOR_SECONDS = 30.0
_FIRST_DELAY = 0.005
_MAX_DELAY = 0.25

_BUSY_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}


async def connect(path: Path) -> aiosqlite.Connection:
    """Open ``path`` with WAL, ``busy_timeout``, ``synchronous=NORMAL`` and foreign keys on."""
    # isolation_level=None: the sqlite3 module must not open transactions behind our back;
    # every write transaction is an explicit BEGIN IMMEDIATE in write().
    conn = await aiosqlite.connect(path, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        # First, so that everything after it (the WAL switch included) waits for locks.
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # Switching to WAL takes an exclusive lock, and a second process opening a new file at
        # the same moment can get SQLITE_BUSY without the busy handler being consulted.
        mode = await read(conn, lambda c: _scalar(c, "PRAGMA journal_mode = WAL"))
        if str(mode).lower() != "wal":
            log.warning("%s: journal_mode is %s, not wal (network filesystem?); writers will block readers", path, mode)
        # NORMAL is durable against application crashes in WAL mode; only a power cut can lose
        # the last transactions, never corrupt the file.
        await conn.execute("PRAGMA synchronous = NORMAL")
        await conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        await conn.close()
        raise
    return conn


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying another connection holds a lock we need."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        # Extended codes (SQLITE_BUSY_SNAPSHOT, ...) carry the primary code in the low byte.
        return code & 0xFF in _BUSY_CODES
    message = str(exc).lower()
    return "locked" in message or "busy" in message


async def write(conn: aiosqlite.Connection, body: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
    """Run ``body`` inside ``BEGIN IMMEDIATE`` ... ``COMMIT``, retrying the whole transaction when busy.

    ``body`` may run more than once, so it must do nothing outside the database that it
    cannot repeat. Any other error rolls back and propagates.
    """

    async def attempt() -> T:
        await conn.execute("BEGIN IMMEDIATE")
        try:
            result = await body(conn)
            await conn.execute("COMMIT")
        except BaseException:
            # Also on cancellation: a transaction left open would hold the write lock and
            # block every other process until this connection closed.
            await _rollback(conn)
            raise
        return result

    return await _retrying(attempt)


async def read(conn: aiosqlite.Connection, body: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
    """Run a read-only ``body`` outside a transaction, retrying when busy.

    Readers in WAL mode rarely wait, but they can during recovery after a crash or while
    another process is switching the journal mode.
    """
    return await _retrying(lambda: body(conn))


async def execute(conn: aiosqlite.Connection, sql: str, params: tuple[Any, ...]) -> int:
    """Run one statement; the number of rows it changed.

    One trip to the connection's thread: a statement that changes rows has run to its end when
    ``execute`` returns (SQLite has reset it), so its cursor needs no second trip to be closed;
    it is freed with the object."""
    cursor = await conn.execute(sql, params)
    return cursor.rowcount


def check_choice(value: str, allowed: frozenset[str], what: str) -> None:
    """ValueError unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(sorted(allowed))}, not {value!r}")


def dump_json(value: dict[str, Any]) -> str:
    """Compact JSON for a column."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


async def _retrying(op: Callable[[], Awaitable[T]]) -> T:
    deadline = time.monotonic() + RETRY_FOR_SECONDS
    delay = _FIRST_DELAY
    while True:
        try:
            return await op()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        # Jitter, so that writers that collided once do not collide again in lockstep.
        await asyncio.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, _MAX_DELAY)


async def _rollback(conn: aiosqlite.Connection) -> None:
    try:
        await conn.execute("ROLLBACK")
    except sqlite3.OperationalError:
        pass  # no transaction was open (BEGIN or COMMIT itself failed and SQLite already rolled back)
    except ValueError:
        pass  # the connection is already closed


async def _scalar(conn: aiosqlite.Connection, sql: str) -> object:
    async with conn.execute(sql) as cursor:
        row = await cursor.fetchone()
    return None if row is None else row[0]
