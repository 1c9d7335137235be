"""Cron jobs and runs in the shared store, claimed with leases so that no slot runs twice.

Every state change is one ``BEGIN IMMEDIATE`` transaction. A run row is unique per
``(job_id, scheduled_at)``: two gateways that find the same slot due both try to insert it
and exactly one succeeds. The winner holds a lease (``lease_owner``, ``lease_until``) that it
renews while the run goes on; a run whose lease lapsed (its gateway died) is taken over once,
then given up as failed. Delivery of a run's result is tracked apart from the run itself.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
import uuid
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import aiosqlite

from core.store import db
from core.store.schedule import Schedule, due_slots, next_fire
from core.store.sessions import SessionStore

__all__ = [
    "DeliveryRecord",
    "Destination",
    "DestinationError",
    "JobRecord",
    "JobStore",
    "RunRecord",
    "chat_key_of_target",
    "chat_target",
    "parse_destination",
    "scheduler_running",
]

# A run whose gateway vanished is retried this many times in all, then failed.
MAX_RUN_ATTEMPTS = 2
MAX_DELIVERY_BACKOFF = 1800.0


_WEBHOOK_NAME = re.compile(r"[A-Za-z0-9_-]+")


class DestinationError(ValueError):
    """A delivery destination that cannot be used as written."""


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a run's result goes besides the store and the job's chat.

    ``file``: ``value`` is an absolute path the result is appended to. ``webhook``: ``value`` is
    an http(s) URL the result is POSTed to, or the name of a ``[cron.webhooks.NAME]`` entry
    (whose URL and headers the configuration holds).
    """

    kind: Literal["file", "webhook"]
    value: str

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.value}"

    @property
    def named(self) -> bool:
        """A webhook named in the configuration rather than a literal URL."""
        return self.kind == "webhook" and not self.value.startswith(("http://", "https://"))


def parse_destination(text: str, *, base: Path) -> Destination:
    """``file:PATH``, ``webhook:URL`` (http or https) or ``webhook:NAME``; a bare http(s) URL is a webhook.

    A relative or ``~`` path is made absolute (relative to ``base``) and its links resolved, so
    what is stored is the file that will be written.
    """
    text = text.strip()
    kind, sep, value = text.partition(":")
    if text.startswith(("http://", "https://")):
        kind, value = "webhook", text
    elif kind not in ("file", "webhook") and value.startswith("//"):
        raise DestinationError(f"{kind}:// is not allowed: webhooks take only http and https URLs")
    elif not sep or kind not in ("file", "webhook") or not value.strip():
        raise DestinationError(
            f"unknown destination {text!r}: write file:PATH (the result is appended to it) or webhook:URL "
            "(an http or https URL, or the NAME of a [cron.webhooks.NAME] entry in config.toml)"
        )
    value = value.strip()
    if kind == "file":
        path = Path(value).expanduser()
        if not path.is_absolute():
            path = base / path
        resolved = path.resolve()
        if resolved.is_dir():
            raise DestinationError(f"{resolved} is a directory; name a file to append the results to")
        return Destination("file", str(resolved))
    if "://" in value:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https"):
            raise DestinationError(f"webhook {parts.scheme}:// is not allowed: only http and https URLs")
        if not parts.hostname:
            raise DestinationError(f"webhook URL {value!r} has no host")
        return Destination("webhook", value)
    if not _WEBHOOK_NAME.fullmatch(value):
        raise DestinationError(f"webhook {value!r} is neither an http(s) URL nor the name of a [cron.webhooks.NAME] entry")
    return Destination("webhook", value)


def chat_target(chat_key: str) -> str:
    """The delivery target of a run's result in a chat: ``chat:<place key>`` (``chat:discord:123:0``)."""
    return f"chat:{chat_key}"


def chat_key_of_target(target: str) -> str | None:
    """The place key of a chat target; None for another kind of target. The older ``chat:123`` (a
    Telegram chat id) is ``telegram:123:0``."""
    kind, sep, value = target.partition(":")
    if kind != "chat" or not sep or not value:
        return None
    return f"telegram:{value}:0" if re.fullmatch(r"-?[0-9]+", value) else value


def scheduler_running(gateway_dir: Path) -> bool:
    """Whether a gateway with its scheduler on is running: one of its lock files in ``gateway_dir``
    (``$HERMES_EDITOR_HOME/gateway``) is held and its status file does not say cron is off."""
    import fcntl

    if not gateway_dir.is_dir():
        return False
    for status in [*gateway_dir.glob("bot-*.json"), *gateway_dir.glob("scheduler.json")]:
        lock = status.with_suffix(".lock")
        if not lock.exists():
            continue
        fd = os.open(lock, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            held = True
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            held = False
        finally:
            os.close(fd)
        if not held:
            continue
        try:
            data = json.loads(status.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return True  # held, status caught mid-write
        if data.get("cron_enabled", True):
            return True
    return False


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One scheduled job."""

    id: str
    name: str
    schedule: str
    timezone: str
    prompt: str
    project: str
    mode: str
    # The place its results go to (``telegram:-100200:7``); None: no chat.
    chat_key: str | None
    paused: bool
    created_at: float
    next_run_at: float | None
    last_run_at: float | None
    # The person who made it in a chat (``telegram:123``); None: made on the machine (CLI, editor, MCP), the owner's.
    owner_id: str | None = None
    # Destinations besides the store and the chat, as specs (``file:/abs/path``, ``webhook:URL``);
    # None: the ``[cron] deliver`` defaults; empty: none at all.
    deliver: tuple[str, ...] | None = None
    # What it runs: "agent" (its prompt, as an agent turn) or a built-in job's own code ("curator").
    kind: str = "agent"

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> JobRecord:
        # The table keeps columns no longer read (chat_id, thread_id, telegram_owner_id: see m009).
        values = {f.name: row[f.name] for f in fields(cls)}
        deliver = values.pop("deliver")
        return cls(**values | {"paused": bool(row["paused"]), "deliver": None if deliver is None else tuple(json.loads(deliver))})

    def destinations(self, defaults: list[str] | tuple[str, ...] = ()) -> list[Destination]:
        """This job's destinations: its own, or ``defaults`` when it names none (defaults that do
        not parse are left out; the configuration is checked when it is loaded)."""
        found = []
        for spec in self.deliver if self.deliver is not None else defaults:
            try:
                found.append(parse_destination(spec, base=Path(self.project)))
            except DestinationError:
                continue
        return found

    @property
    def parsed(self) -> Schedule:
        return Schedule.from_text(self.schedule)

    def controlled_by(self, user: str | None, owners: frozenset[str]) -> bool:
        """Whether ``user`` (a person) may see and control this job: the gateway's owner (one of
        ``owners``, the owner's identities) and the machine (``user`` None) control every job; any
        other person only the jobs they made."""
        if user is None or user in owners:
            return True
        return self.owner_id is not None and self.owner_id == user


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run of a job (or a missed slot, status ``missed``)."""

    id: str
    job_id: str
    scheduled_at: float
    status: str  # queued | running | ok | silent | failed | missed
    catch_up: int
    lease_owner: str | None
    lease_until: float | None
    attempts: int
    started_at: float | None
    finished_at: float | None
    session_id: str | None
    result: str | None
    error: str | None
    delivery_status: str  # none | pending | delivered | skipped | failed
    delivery_attempts: int
    delivery_next_at: float | None
    delivery_error: str | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> RunRecord:
        return cls(**{k: row[k] for k in row.keys()})  # noqa: SIM118 (a Row iterates its values)


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    """One destination of one run's result: ``chat:<place key>``, ``file:PATH`` or ``webhook:URL|NAME``."""

    run_id: str
    target: str
    status: str  # pending | delivered | skipped | failed
    attempts: int
    next_at: float | None
    error: str | None
    delivered_at: float | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> DeliveryRecord:
        return cls(**{k: row[k] for k in row.keys()})  # noqa: SIM118 (a Row iterates its values)


class JobStore:
    """Cron jobs and runs over an open :class:`SessionStore` (same connection, same lock)."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    # -- jobs -----------------------------------------------------------------------------

    async def add_job(
        self,
        *,
        name: str,
        schedule: Schedule,
        timezone: str,
        prompt: str,
        project: str,
        mode: str = "read-only",
        chat_key: str | None = None,
        owner_id: str | None = None,
        deliver: list[str] | tuple[str, ...] | None = None,
        kind: str = "agent",
        now: float | None = None,
    ) -> JobRecord:
        """Create a job for ``owner_id`` (a person; None: the owner) whose results go to the place
        ``chat_key`` (None: no chat); its first fire time is computed from ``now``. ``deliver``: destination specs (see :func:`parse_destination`);
        None takes the ``[cron] deliver`` defaults at each delivery."""
        now = time.time() if now is None else now
        job_id = uuid.uuid4().hex[:8]
        first = next_fire(schedule, now, anchor=now, tz=timezone)

        async def body(conn: aiosqlite.Connection) -> None:
            await db.execute(
                conn,
                "INSERT INTO cron_jobs (id, name, schedule, timezone, prompt, project, mode, chat_key,"
                " paused, created_at, next_run_at, owner_id, deliver, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?)",
                (
                    job_id,
                    name,
                    schedule.text,
                    timezone,
                    prompt,
                    project,
                    mode,
                    chat_key,
                    now,
                    first,
                    owner_id,
                    None if deliver is None else json.dumps(list(deliver)),
                    kind,
                ),
            )

        await self._store._write(body)
        job = await self.get_job(job_id)
        assert job is not None
        return job

    async def get_job(self, job_id: str) -> JobRecord | None:
        row = await self._store._fetchone("SELECT * FROM cron_jobs WHERE id = ?", (job_id,))
        return JobRecord.from_row(row) if row else None

    async def list_jobs(self, *, chat_key: str | None = None) -> list[JobRecord]:
        """Every job, or those whose results go to the place ``chat_key``, oldest first."""
        if chat_key is None:
            rows = await self._store._fetchall("SELECT * FROM cron_jobs ORDER BY created_at", ())
        else:
            rows = await self._store._fetchall("SELECT * FROM cron_jobs WHERE chat_key = ? ORDER BY created_at", (chat_key,))
        return [JobRecord.from_row(r) for r in rows]

    async def builtin_job(self, kind: str) -> JobRecord | None:
        """The one job of a built-in ``kind`` (``curator``), if there is one."""
        row = await self._store._fetchone("SELECT * FROM cron_jobs WHERE kind = ?", (kind,))
        return JobRecord.from_row(row) if row else None

    async def put_builtin(
        self, kind: str, *, name: str, schedule: Schedule, timezone: str, prompt: str, project: str, chat_key: str | None
    ) -> JobRecord:
        """Make the job of a built-in ``kind``, or bring its schedule, zone and chat up to date. A paused
        job stays paused; its next fire time moves only when the schedule or the zone changed."""
        job = await self.builtin_job(kind)
        if job is None:
            try:
                return await self.add_job(
                    name=name, schedule=schedule, timezone=timezone, prompt=prompt, project=project, chat_key=chat_key, kind=kind
                )
            except sqlite3.IntegrityError:  # another gateway made it first
                job = await self.builtin_job(kind)
                assert job is not None
        if (job.schedule, job.timezone, job.chat_key, job.prompt, job.project) == (schedule.text, timezone, chat_key, prompt, project):
            return job
        upcoming = job.next_run_at
        if (job.schedule, job.timezone) != (schedule.text, timezone) and not job.paused:
            upcoming = next_fire(schedule, time.time(), anchor=job.created_at, tz=timezone)

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "UPDATE cron_jobs SET schedule = ?, timezone = ?, chat_key = ?, prompt = ?, project = ?, next_run_at = ? WHERE id = ?",
                (schedule.text, timezone, chat_key, prompt, project, upcoming, job.id),
            )

        await self._store._write(body)
        updated = await self.get_job(job.id)
        assert updated is not None
        return updated

    async def set_paused(self, job_id: str, paused: bool, *, now: float | None = None) -> bool:
        """Pause or resume; resuming starts from the next slot after now (no catch-up for the pause)."""
        now = time.time() if now is None else now
        job = await self.get_job(job_id)
        if job is None:
            return False
        upcoming = job.next_run_at if paused else next_fire(job.parsed, now, anchor=job.created_at, tz=job.timezone)

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(conn, "UPDATE cron_jobs SET paused = ?, next_run_at = ? WHERE id = ?", (int(paused), upcoming, job_id))

        return bool(await self._store._write(body))

    async def remove_job(self, job_id: str) -> bool:
        async def body(conn: aiosqlite.Connection) -> int:
            await db.execute(conn, "DELETE FROM cron_deliveries WHERE run_id IN (SELECT id FROM cron_runs WHERE job_id = ?)", (job_id,))
            await db.execute(conn, "DELETE FROM cron_runs WHERE job_id = ?", (job_id,))
            return await db.execute(conn, "DELETE FROM cron_jobs WHERE id = ?", (job_id,))

        return bool(await self._store._write(body))

    async def request_run(self, job_id: str, *, now: float | None = None) -> RunRecord | None:
        """Queue a run now (``cron run``); the next scheduler pass of any gateway picks it up."""
        now = time.time() if now is None else now
        run_id = uuid.uuid4().hex[:12]

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "INSERT OR IGNORE INTO cron_runs (id, job_id, scheduled_at, status) SELECT ?, id, ?, 'queued' FROM cron_jobs WHERE id = ?",
                (run_id, now, job_id),
            )

        if not await self._store._write(body):
            return None
        return await self.get_run(run_id)

    # -- claiming -------------------------------------------------------------------------

    async def claim_due(self, owner: str, *, now: float | None = None, grace: float, lease: float) -> list[RunRecord]:
        """Claim every run this gateway should start now, in one transaction.

        That is: the latest due slot of each active job (older ones are counted as missed,
        and a slot older than ``grace`` is recorded as ``missed`` instead of run), queued
        manual runs, and runs whose owner's lease lapsed.
        """
        now = time.time() if now is None else now
        claimed: list[str] = []

        async def body(conn: aiosqlite.Connection) -> list[str]:
            claimed.clear()
            async with conn.execute(
                "SELECT * FROM cron_jobs WHERE paused = 0 AND next_run_at IS NOT NULL AND next_run_at <= ?", (now,)
            ) as cursor:
                jobs = [JobRecord.from_row(r) for r in await cursor.fetchall()]
            for job in jobs:
                assert job.next_run_at is not None
                slots = due_slots(job.parsed, job.next_run_at, now, anchor=job.created_at, tz=job.timezone, grace=grace)
                if slots.run_at is not None:
                    run_id = uuid.uuid4().hex[:12]
                    late = int(now - slots.run_at > max(60.0, lease / 10))
                    inserted = await db.execute(
                        conn,
                        "INSERT OR IGNORE INTO cron_runs (id, job_id, scheduled_at, status, catch_up, lease_owner,"
                        " lease_until, attempts, started_at) VALUES (?, ?, ?, 'running', ?, ?, ?, 1, ?)",
                        (run_id, job.id, slots.run_at, late, owner, now + lease, now),
                    )
                    if inserted:
                        claimed.append(run_id)
                else:
                    # Past the grace window: say so in the chat rather than skip silently.
                    await db.execute(
                        conn,
                        "INSERT OR IGNORE INTO cron_runs (id, job_id, scheduled_at, status, catch_up, finished_at,"
                        " error, delivery_status, delivery_next_at) VALUES (?, ?, ?, 'missed', ?, ?, ?, 'pending', ?)",
                        (
                            uuid.uuid4().hex[:12],
                            job.id,
                            job.next_run_at,
                            slots.missed,
                            now,
                            f"{slots.missed} scheduled run(s) missed while no gateway was running (older than the "
                            f"{int(grace)}s catch-up window)",
                            now,
                        ),
                    )
                await db.execute(
                    conn,
                    "UPDATE cron_jobs SET next_run_at = ?, last_run_at = COALESCE(?, last_run_at) WHERE id = ?",
                    (slots.next_at, slots.run_at, job.id),
                )
            # Manual runs, and runs orphaned by a gateway that stopped mid-run.
            async with conn.execute(
                "SELECT id, status, attempts FROM cron_runs WHERE status = 'queued' OR (status = 'running' AND lease_until < ?)",
                (now,),
            ) as cursor:
                waiting = list(await cursor.fetchall())
            for row in waiting:
                if row["status"] == "running" and row["attempts"] >= MAX_RUN_ATTEMPTS:
                    await db.execute(
                        conn,
                        "UPDATE cron_runs SET status = 'failed', finished_at = ?, error = ?, lease_owner = NULL,"
                        " delivery_status = 'pending', delivery_next_at = ? WHERE id = ?",
                        (now, "the gateway running it stopped, twice; giving up on this slot", now, row["id"]),
                    )
                    continue
                await db.execute(
                    conn,
                    "UPDATE cron_runs SET status = 'running', lease_owner = ?, lease_until = ?, attempts = attempts + 1,"
                    " started_at = ? WHERE id = ?",
                    (owner, now + lease, now, row["id"]),
                )
                claimed.append(row["id"])
            return list(claimed)

        ids = await self._store._write(body)
        return [run for run_id in ids if (run := await self.get_run(run_id)) is not None]

    async def renew_lease(self, run_id: str, owner: str, until: float) -> bool:
        """Extend this gateway's lease; False when the run is no longer ours."""

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "UPDATE cron_runs SET lease_until = ? WHERE id = ? AND lease_owner = ? AND status = 'running'",
                (until, run_id, owner),
            )

        return bool(await self._store._write(body))

    async def finish_run(
        self,
        run_id: str,
        owner: str,
        *,
        status: str,
        result: str | None = None,
        error: str | None = None,
        session_id: str | None = None,
        deliver: bool = True,
        now: float | None = None,
    ) -> bool:
        """Record a run's outcome and queue its delivery (none for ``[SILENT]``)."""
        now = time.time() if now is None else now

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "UPDATE cron_runs SET status = ?, result = ?, error = ?, session_id = COALESCE(?, session_id),"
                " finished_at = ?, lease_owner = NULL, lease_until = NULL, delivery_status = ?, delivery_next_at = ?"
                " WHERE id = ? AND lease_owner = ? AND status = 'running'",
                (status, result, error, session_id, now, "pending" if deliver else "none", now, run_id, owner),
            )

        return bool(await self._store._write(body))

    async def set_run_session(self, run_id: str, session_id: str) -> None:
        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(conn, "UPDATE cron_runs SET session_id = ? WHERE id = ?", (session_id, run_id))

        await self._store._write(body)

    # -- delivery -------------------------------------------------------------------------

    async def claim_deliveries(self, *, now: float | None = None, hold: float = 120.0, limit: int = 20) -> list[RunRecord]:
        """Runs whose result is due for delivery; each is held for ``hold`` seconds meanwhile."""
        now = time.time() if now is None else now

        async def body(conn: aiosqlite.Connection) -> list[str]:
            async with conn.execute(
                "SELECT id FROM cron_runs WHERE delivery_status = 'pending' AND delivery_next_at <= ? ORDER BY delivery_next_at LIMIT ?",
                (now, limit),
            ) as cursor:
                ids = [r["id"] for r in await cursor.fetchall()]
            for run_id in ids:
                await db.execute(conn, "UPDATE cron_runs SET delivery_next_at = ? WHERE id = ?", (now + hold, run_id))
            return ids

        ids = await self._store._write(body)
        return [run for run_id in ids if (run := await self.get_run(run_id)) is not None]

    async def delivery_done(self, run_id: str) -> None:
        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "UPDATE cron_runs SET delivery_status = 'delivered', delivery_attempts = delivery_attempts + 1,"
                " delivery_error = NULL, delivery_next_at = NULL WHERE id = ?",
                (run_id,),
            )

        await self._store._write(body)

    async def delivery_skipped(self, run_id: str, reason: str) -> None:
        """Record that the result was not sent (no platform to send it with); it stays in the store."""

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "UPDATE cron_runs SET delivery_status = 'skipped', delivery_error = ?, delivery_next_at = NULL WHERE id = ?",
                (reason[:500], run_id),
            )

        await self._store._write(body)

    async def delivery_failed(self, run_id: str, error: str, *, max_attempts: int, delay: float = 5.0, now: float | None = None) -> str:
        """Count a failed delivery; returns the new delivery status (``pending`` or ``failed``).

        The next attempt waits ``delay`` seconds, quadrupling per failure (capped at 30 minutes).
        """
        now = time.time() if now is None else now
        run = await self.get_run(run_id)
        if run is None:
            return "failed"
        attempts = run.delivery_attempts + 1
        status = "failed" if attempts >= max_attempts else "pending"
        wait = min(delay * 4 ** (attempts - 1), MAX_DELIVERY_BACKOFF)

        async def body(conn: aiosqlite.Connection) -> int:
            return await db.execute(
                conn,
                "UPDATE cron_runs SET delivery_status = ?, delivery_attempts = ?, delivery_error = ?, delivery_next_at = ? WHERE id = ?",
                (status, attempts, error[:500], None if status == "failed" else now + wait, run_id),
            )

        await self._store._write(body)
        return status

    # -- delivery per destination ---------------------------------------------------------

    async def open_deliveries(self, run_id: str, targets: list[str], *, now: float | None = None) -> list[DeliveryRecord]:
        """The run's destinations due for an attempt now. The first call records ``targets``
        (each pending, due now); later calls keep that list, so a retry goes only to the
        destinations that have not taken the result yet."""
        now = time.time() if now is None else now

        async def body(conn: aiosqlite.Connection) -> None:
            async with conn.execute("SELECT 1 FROM cron_deliveries WHERE run_id = ? LIMIT 1", (run_id,)) as cursor:
                if await cursor.fetchone() is not None:
                    return
            for target in dict.fromkeys(targets):
                await db.execute(
                    conn,
                    "INSERT INTO cron_deliveries (run_id, target, status, attempts, next_at) VALUES (?, ?, 'pending', 0, ?)",
                    (run_id, target, now),
                )

        await self._store._write(body)
        rows = await self._store._fetchall(
            "SELECT * FROM cron_deliveries WHERE run_id = ? AND status = 'pending' AND next_at <= ? ORDER BY rowid", (run_id, now)
        )
        return [DeliveryRecord.from_row(r) for r in rows]

    async def deliveries(self, run_id: str) -> list[DeliveryRecord]:
        """Each destination of a run and how its delivery went."""
        rows = await self._store._fetchall("SELECT * FROM cron_deliveries WHERE run_id = ? ORDER BY rowid", (run_id,))
        return [DeliveryRecord.from_row(r) for r in rows]

    async def record_delivery(
        self,
        run_id: str,
        target: str,
        outcome: Literal["delivered", "skipped", "failed"],
        error: str | None = None,
        *,
        max_attempts: int,
        delay: float = 5.0,
        now: float | None = None,
    ) -> str:
        """Record one attempt at one destination; returns its new status.

        A failure is retried ``delay`` seconds later, quadrupling per failure (capped at 30
        minutes), until ``max_attempts`` attempts failed. The run's own delivery fields then
        sum up its destinations: pending while any is, else failed if any failed, else
        delivered if any took it, else skipped; the error lists each destination's.
        """
        now = time.time() if now is None else now

        async def body(conn: aiosqlite.Connection) -> str:
            async with conn.execute("SELECT attempts FROM cron_deliveries WHERE run_id = ? AND target = ?", (run_id, target)) as cursor:
                row = await cursor.fetchone()
            if row is None:
                return "failed"
            attempts = row["attempts"] + (outcome != "skipped")
            status: str = outcome
            next_at = None
            if outcome == "failed" and attempts < max_attempts:
                status = "pending"
                next_at = now + min(delay * 4 ** (attempts - 1), MAX_DELIVERY_BACKOFF)
            await db.execute(
                conn,
                "UPDATE cron_deliveries SET status = ?, attempts = ?, next_at = ?, error = ?, delivered_at = ? WHERE run_id = ? AND target = ?",
                (status, attempts, next_at, error[:500] if error else None, now if outcome == "delivered" else None, run_id, target),
            )
            await self._sum_up(conn, run_id)
            return status

        return await self._store._write(body)

    @staticmethod
    async def _sum_up(conn: aiosqlite.Connection, run_id: str) -> None:
        async with conn.execute("SELECT * FROM cron_deliveries WHERE run_id = ? ORDER BY rowid", (run_id,)) as cursor:
            found = [DeliveryRecord.from_row(r) for r in await cursor.fetchall()]
        statuses = {d.status for d in found}
        status = next((s for s in ("pending", "failed", "delivered") if s in statuses), "skipped")
        waiting = [d.next_at for d in found if d.status == "pending" and d.next_at is not None]
        errors = "; ".join(f"{d.target}: {d.error}" for d in found if d.error and d.status != "delivered")
        await db.execute(
            conn,
            "UPDATE cron_runs SET delivery_status = ?, delivery_attempts = ?, delivery_next_at = ?, delivery_error = ? WHERE id = ?",
            (status, max((d.attempts for d in found), default=0), min(waiting) if waiting else None, errors[:1000] or None, run_id),
        )

    # -- reading --------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = await self._store._fetchone("SELECT * FROM cron_runs WHERE id = ?", (run_id,))
        return RunRecord.from_row(row) if row else None

    async def runs(self, job_id: str | None = None, *, limit: int = 20) -> list[RunRecord]:
        """Runs, newest slot first."""
        sql = "SELECT * FROM cron_runs {} ORDER BY scheduled_at DESC, id LIMIT ?"
        params: tuple[Any, ...]
        if job_id is None:
            sql, params = sql.format(""), (limit,)
        else:
            sql, params = sql.format("WHERE job_id = ?"), (job_id, limit)
        return [RunRecord.from_row(r) for r in await self._store._fetchall(sql, params)]
