"""The cron scheduler inside the gateway: claim due runs, run them, deliver their results.

Each pass claims runs in the store (``JobStore.claim_due``: one transaction, unique per
slot, leased), so several gateways on one store never run a slot twice. Each run is a fresh
session in the job's project with the ``cron`` toolset, in the job's mode (read-only by
default); nobody is there to answer approval questions, so they are denied. The result goes
to the job's chat, chunked; failures are delivered too; a reply of ``[SILENT]`` delivers
nothing. Delivery is retried with backoff, tracked apart from the run's own status. Without a
chat platform (``bot`` is None) the result stays in the store and the delivery is recorded
as skipped.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from telegram.error import TelegramError

from core.events import Decision, PermissionNeeded, TextDelta, TurnEnded
from core.messages import UserMessage
from core.policy.approvals import as_mode
from hermes_gateway.telegram_io import Target, send_long

if TYPE_CHECKING:
    from core.agent.loop import Agent
    from core.config import Config
    from core.store.gateway import GatewayStore
    from core.store.jobs import JobStore, RunRecord

__all__ = ["SILENT", "Scheduler"]

log = logging.getLogger(__name__)

SILENT = "[SILENT]"
_PREAMBLE = (
    "This is a scheduled job running without a user present; nobody can answer questions or approve "
    "changes. Do the task and reply with the result to deliver. If there is nothing worth reporting, "
    f"reply with exactly {SILENT}.\n\nTask: "
)


class Scheduler:
    """Claims and runs cron jobs, and delivers their results, until stopped."""

    def __init__(self, config: Config, agent: Agent, bot: Any | None, jobs: JobStore, gateway_store: GatewayStore) -> None:
        self._config = config
        self._agent = agent
        self._bot = bot
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

    async def pass_once(self) -> None:
        """Claim due runs and start them; then deliver what is waiting."""
        cfg = self._config.cron
        for run in await self._jobs.claim_due(self.owner, grace=cfg.catch_up_grace, lease=cfg.lease):
            task = asyncio.create_task(self._execute(run), name=f"cron-{run.id}")
            self._runs.add(task)
            task.add_done_callback(self._runs.discard)
        await self.deliver_due()

    async def _execute(self, run: RunRecord) -> None:
        from core.host.local import LocalHost

        jobs, cfg = self._jobs, self._config.cron
        job = await jobs.get_job(run.job_id)
        if job is None:
            await jobs.finish_run(run.id, self.owner, status="failed", error="the job was removed", deliver=False)
            return
        renew = asyncio.create_task(self._keep_lease(run.id))
        session_id = None
        try:
            agent = self._agent
            session = await agent.new_session(Path(job.project), LocalHost(self._config.secrets), mode=as_mode(job.mode))
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
        self.wake()  # deliver now rather than at the next tick

    async def _keep_lease(self, run_id: str) -> None:
        lease = self._config.cron.lease
        while True:
            await asyncio.sleep(lease / 3)
            if not await self._jobs.renew_lease(run_id, self.owner, time.time() + lease):
                log.warning("lost the lease on cron run %s", run_id)
                return

    async def deliver_due(self) -> None:
        """Send every result whose delivery is due; count failures for retry with backoff."""
        jobs, cfg = self._jobs, self._config.cron
        for run in await jobs.claim_deliveries():
            job = await jobs.get_job(run.job_id)
            if self._bot is None:
                await jobs.delivery_skipped(run.id, "no chat platform is configured; the result is kept in the store")
                continue
            if job is None or job.chat_id is None:
                await jobs.delivery_done(run.id)  # nowhere to send: the result stays in `cron runs`
                continue
            try:
                await send_long(self._bot, Target(job.chat_id, job.thread_id), delivery_text(job.name, job.id, run))
            except (TelegramError, OSError) as exc:
                status = await jobs.delivery_failed(run.id, str(exc), max_attempts=cfg.delivery_attempts, delay=cfg.delivery_retry_delay)
                log.warning("delivery of cron run %s failed (%s); %s", run.id, exc, status)
                continue
            await jobs.delivery_done(run.id)

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
