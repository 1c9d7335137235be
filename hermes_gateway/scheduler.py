"""The cron scheduler inside the gateway: claim due runs, run them, deliver their results.

Each pass claims runs in the store (``JobStore.claim_due``: one transaction, unique per
slot, leased), so several gateways on one store never run a slot twice. Each run is a fresh
session in the job's project with the ``cron`` toolset, in the job's mode (read-only by
default); nobody is there to answer approval questions, so they are denied. The result stays
in the store and goes to each of the job's destinations: its chat (chunked), files (appended,
one locked write per run) and webhooks (a JSON POST); failures are delivered too; a reply of
``[SILENT]`` delivers nothing. Each destination is retried with backoff on its own, tracked
apart from the run's own status. A chat destination is ``chat:<place key>``
(``chat:discord:123:0``); when its platform is not running in this gateway the chat is recorded
as skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import httpx

from core.events import Decision, PermissionNeeded, TextDelta, TurnEnded
from core.messages import UserMessage
from core.policy.approvals import as_mode
from core.redaction import scrub
from core.store.jobs import Destination
from core.store.schedule import fmt_time
from hermes_gateway.platform import Place, send_long

if TYPE_CHECKING:
    from core.agent.loop import Agent
    from core.config import Config
    from core.store.gateway import GatewayStore
    from core.store.jobs import JobRecord, JobStore, RunRecord
    from hermes_gateway.platform import Platform

__all__ = ["SILENT", "Scheduler", "append_result", "delivery_text", "file_text", "webhook_payload"]

Outcome = tuple[Literal["delivered", "skipped", "failed"], str | None]
NO_PLATFORM = "no chat platform is configured; the result is kept in the store"

log = logging.getLogger(__name__)

SILENT = "[SILENT]"
_PREAMBLE = (
    "This is a scheduled job running without a user present; nobody can answer questions or approve "
    "changes. Do the task and reply with the result to deliver. If there is nothing worth reporting, "
    f"reply with exactly {SILENT}.\n\nTask: "
)


class Scheduler:
    """Claims and runs cron jobs, and delivers their results, until stopped."""

    def __init__(self, config: Config, agent: Agent, platforms: dict[str, Platform], jobs: JobStore, gateway_store: GatewayStore) -> None:
        self._config = config
        self._agent = agent
        # The chat platforms of this gateway (empty: scheduler only); filled as they are built.
        self._platforms = platforms
        self._jobs = jobs
        self._gateway_store = gateway_store
        self.owner = f"gateway-{uuid.uuid4().hex[:8]}"
        self._runs: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()

    @property
    def running(self) -> int:
        return len(self._runs)

    def wake(self) -> None:
        """Look for work now (a job was added or run from chat)."""
        self._wake.set()

    async def loop(self) -> None:
        cfg = self._config.cron
        await self.sync_builtin_jobs()
        while True:
            try:
                await self.pass_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scheduler pass failed")
            try:
                # Not wait_for: on 3.11 it can swallow a cancel that lands as the wake is set.
                async with asyncio.timeout(cfg.tick):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()

    async def sync_builtin_jobs(self) -> None:
        """Make the built-in jobs (the curator) match the configuration this gateway started with."""
        from core.learning.curator_job import sync_job

        try:
            await sync_job(self._jobs, self._config)
        except Exception:
            log.exception("could not set up the curator's job")

    async def pass_once(self) -> None:
        """Claim due runs and start them; then deliver what is waiting."""
        cfg = self._config.cron
        for run in await self._jobs.claim_due(self.owner, grace=cfg.catch_up_grace, lease=cfg.lease):
            task = asyncio.create_task(self._execute(run), name=f"cron-{run.id}")
            self._runs.add(task)
            task.add_done_callback(self._runs.discard)
        await self.deliver_due()

    async def _execute(self, run: RunRecord) -> None:
        from core.host.select import host_for

        jobs, cfg = self._jobs, self._config.cron
        job = await jobs.get_job(run.job_id)
        if job is None:
            await jobs.finish_run(run.id, self.owner, status="failed", error="the job was removed", deliver=False)
            return
        if job.kind != "agent":
            await self._execute_builtin(job, run)
            return
        renew = asyncio.create_task(self._keep_lease(run.id))
        session_id = None
        session = None
        try:
            agent = self._agent
            session = await agent.new_session(Path(job.project), host_for(self._config, Path(job.project)), mode=as_mode(job.mode))
            session_id = session.id
            if job.owner_id is not None:  # the run is its maker's; a machine job's run is the owner's
                await self._gateway_store.record_starter(session.id, job.owner_id, chat_key=None, origin="cron")
            await jobs.set_run_session(run.id, session.id)
            text: list[str] = []
            error = None
            async with asyncio.timeout(cfg.run_timeout):
                async for event in agent.run_turn(session, UserMessage.of(_PREAMBLE + job.prompt)):
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                    elif isinstance(event, PermissionNeeded):
                        request = event.request
                        await agent.broker.answer(request.id, Decision.REJECT_ONCE, by="cron")
                    elif isinstance(event, TurnEnded):
                        error = event.error
            reply = "".join(text).strip()
            if error:
                await jobs.finish_run(run.id, self.owner, status="failed", result=reply, error=error, session_id=session_id)
            elif reply == SILENT or reply.endswith(SILENT):
                await jobs.finish_run(run.id, self.owner, status="silent", result=reply, session_id=session_id, deliver=False)
            else:
                await jobs.finish_run(run.id, self.owner, status="ok", result=reply, session_id=session_id)
        except asyncio.CancelledError:
            await asyncio.shield(
                jobs.finish_run(run.id, self.owner, status="failed", error="interrupted: the gateway stopped", session_id=session_id)
            )
            raise
        except TimeoutError:
            await jobs.finish_run(
                run.id, self.owner, status="failed", error=f"timed out after {int(cfg.run_timeout)}s", session_id=session_id
            )
        except Exception as exc:
            log.exception("cron run %s failed", run.id)
            await jobs.finish_run(run.id, self.owner, status="failed", error=f"{type(exc).__name__}: {exc}", session_id=session_id)
        finally:
            renew.cancel()
            if session is not None:  # the run's session ends with it (a container goes)
                with contextlib.suppress(Exception):
                    await asyncio.shield(session.host.aclose())
        self.wake()  # deliver now rather than at the next tick

    async def _execute_builtin(self, job: JobRecord, run: RunRecord) -> None:
        """A built-in job (the curator) runs its own code instead of an agent turn; its report is the
        run's result, delivered as any; a report with nothing in it is kept silent."""
        from core.learning.curator_job import run_builtin

        jobs, cfg = self._jobs, self._config.cron
        renew = asyncio.create_task(self._keep_lease(run.id))
        try:
            async with asyncio.timeout(cfg.run_timeout):
                report, worth = await run_builtin(job.kind, self._config, run_id=run.id)
            await jobs.finish_run(run.id, self.owner, status="ok" if worth else "silent", result=report, deliver=worth)
        except asyncio.CancelledError:
            await asyncio.shield(jobs.finish_run(run.id, self.owner, status="failed", error="interrupted: the gateway stopped"))
            raise
        except TimeoutError:
            await jobs.finish_run(run.id, self.owner, status="failed", error=f"timed out after {int(cfg.run_timeout)}s")
        except Exception as exc:
            log.exception("built-in cron run %s (%s) failed", run.id, job.kind)
            await jobs.finish_run(run.id, self.owner, status="failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            renew.cancel()
        self.wake()

    async def _keep_lease(self, run_id: str) -> None:
        lease = self._config.cron.lease
        while True:
            await asyncio.sleep(lease / 3)
            if not await self._jobs.renew_lease(run_id, self.owner, time.time() + lease):
                log.warning("lost the lease on cron run %s", run_id)
                return

    async def deliver_due(self) -> None:
        """Send every result whose delivery is due to each destination still waiting for it;
        count failures per destination for retry with backoff."""
        jobs, cfg = self._jobs, self._config.cron
        for run in await jobs.claim_deliveries():
            job = await jobs.get_job(run.job_id)
            if job is None:
                await jobs.delivery_skipped(run.id, "the job was removed; the result is kept in the store")
                continue
            targets = ([f"chat:{job.chat_key}"] if job.chat_key is not None else []) + [d.spec for d in job.destinations(cfg.deliver)]
            if not targets:
                if not self._platforms:
                    await jobs.delivery_skipped(run.id, NO_PLATFORM)
                else:
                    await jobs.delivery_done(run.id)  # nowhere to send: the result stays in `cron runs`
                continue
            due = await jobs.open_deliveries(run.id, targets)
            outcomes = await asyncio.gather(*(self._attempt(job, run, d.target) for d in due))
            for delivery, (outcome, error) in zip(due, outcomes, strict=True):
                status = await jobs.record_delivery(
                    run.id, delivery.target, outcome, error, max_attempts=cfg.delivery_attempts, delay=cfg.delivery_retry_delay
                )
                if outcome == "failed":
                    log.warning("delivery of cron run %s to %s failed (%s); %s", run.id, _shown(delivery.target), error, status)

    async def _attempt(self, job: JobRecord, run: RunRecord, target: str) -> Outcome:
        """One destination's attempt; an unexpected error counts as a failed attempt (a webhook's
        by its type only: its text may quote the URL)."""
        try:
            return await self._deliver_to(job, run, target)
        except Exception as exc:
            if target.startswith("webhook:"):
                return "failed", f"unexpected {type(exc).__name__}"
            return "failed", f"unexpected {type(exc).__name__}: {exc}"

    async def _deliver_to(self, job: JobRecord, run: RunRecord, target: str) -> Outcome:
        kind, _, value = target.partition(":")
        if kind == "chat":
            platform_name, chat, thread = Place.parse_key(value if value.count(":") >= 2 else f"telegram:{value}:0")
            platform = self._platforms.get(platform_name)
            if platform is None:
                return "skipped", NO_PLATFORM if not self._platforms else f"{platform_name} is not running in this gateway"
            try:
                await send_long(platform, platform.place_for(chat, thread), delivery_text(job.name, job.id, run))
            except Exception as exc:
                return "failed", f"{type(exc).__name__}: {exc}"
            return "delivered", None
        if kind == "file":
            try:
                await asyncio.to_thread(append_result, Path(value), file_text(job, run))
            except OSError as exc:
                return "failed", f"cannot append to {value}: {exc.strerror or exc}"
            return "delivered", None
        return await self._post(Destination("webhook", value), job, run)

    async def _post(self, hook: Destination, job: JobRecord, run: RunRecord) -> Outcome:
        """POST the run as JSON; any 2xx is delivered. Errors name the URL's origin only (a
        webhook URL often carries its own secret), and header values are never shown."""
        cfg = self._config.cron
        headers = {"User-Agent": "hermes-editor", "Idempotency-Key": run.id}
        if hook.named:
            entry = cfg.webhooks.get(hook.value)
            if entry is None:
                return "failed", f"no webhook named {hook.value!r}: add [cron.webhooks.{hook.value}] with its url to config.toml"
            url = entry.url
            headers |= {name: value.get_secret_value() for name, value in entry.headers.items()}
        else:
            url = hook.value
        origin = _origin(url)
        try:
            async with httpx.AsyncClient(timeout=cfg.webhook_timeout, follow_redirects=False) as client:
                response = await client.post(url, json=webhook_payload(job, run), headers=headers)
        except httpx.HTTPError as exc:
            return "failed", f"could not reach {origin}: {type(exc).__name__}"
        if 200 <= response.status_code < 300:
            return "delivered", None
        return "failed", f"{origin} answered HTTP {response.status_code}"

    async def drain(self, grace: float) -> None:
        if not self._runs:
            return
        _, pending = await asyncio.wait(set(self._runs), timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=10)


def delivery_text(name: str, job_id: str, run: RunRecord) -> str:
    """What the chat receives for one run."""
    head = f"⏰ {name} ({job_id})"
    if run.catch_up and run.status != "missed":
        head += " — catch-up run after downtime"
    if run.status == "missed":
        return f"{head}\n{run.error}"
    if run.status == "failed":
        body = f"❌ The run failed: {run.error}"
        if run.result:
            body += f"\n\n{run.result}"
        return f"{head}\n{body}"
    return f"{head}\n\n{run.result or '(no output)'}"


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


def _shown(target: str) -> str:
    """A destination for the log: a webhook URL by its origin only."""
    kind, _, value = target.partition(":")
    return f"webhook {_origin(value)}" if kind == "webhook" and "://" in value else target


def webhook_payload(job: JobRecord, run: RunRecord) -> dict[str, Any]:
    """The JSON a webhook receives for one run."""
    return {
        "job_id": job.id,
        "job_name": job.name,
        "run_id": run.id,
        "status": run.status,
        "catch_up": bool(run.catch_up),
        "scheduled_at": _iso(run.scheduled_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "result": scrub(run.result) if run.result else None,
        "error": scrub(run.error) if run.error else None,
    }


def file_text(job: JobRecord, run: RunRecord) -> str:
    """What a file destination gets appended for one run: a heading, then the result or error."""
    head = f"## {fmt_time(run.finished_at or run.scheduled_at, job.timezone)} · {job.name} (job {job.id}, run {run.id}) · {run.status}"
    if run.catch_up and run.status != "missed":
        head += " · catch-up run after downtime"
    parts = [head]
    if run.error:
        parts.append(("The run failed: " if run.status == "failed" else "") + run.error)
    if run.result or run.status == "ok":
        parts.append(run.result or "(no output)")
    return scrub("\n\n".join(parts)) + "\n\n"


def append_result(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` in one locked write, so runs delivering at once never interleave.

    Missing folders are made. The path was resolved when the job was made; if it now leads
    elsewhere through a link (one put in its way later), nothing is written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise NotADirectoryError(errno.ENOTDIR, f"{path.parent} (or a folder above it) is a file, not a folder") from None
    if os.path.realpath(path) != str(path):
        raise OSError(0, f"it now leads to {os.path.realpath(path)} through a link; not written")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)
