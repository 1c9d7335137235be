"""The gateway process: the store, two agents (chat and cron), the chat platforms, the loops.

Every configured platform (``hermes_gateway.platforms``) runs in this one process. Each is
connected on its own, retried with capped, jittered backoff when it cannot connect, without
holding up the others or the scheduler. Their messages and button presses all go through one
``Router`` (the authorisation gate, then answers, commands and prompts). Turns run as
background tasks so presses are handled while a turn waits for an answer.

With no platform configured the gateway runs the scheduler only: due jobs run and their
results stay in the store (``hermes-editor cron runs``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config import Config
from core.store.schedule import local_zone

if TYPE_CHECKING:
    from core.agent.loop import Agent
    from core.store import SessionStore
    from core.store.gateway import GatewayStore
    from core.store.jobs import JobStore
    from hermes_gateway.lock import GatewayLock
    from hermes_gateway.platform import Platform
    from surface_support.pairing import Pairing

__all__ = ["Gateway", "GatewayError", "PlatformState", "lock_token", "retry_delay"]

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 5.0
# Reconnecting a platform: the first wait, doubled per failure up to the cap, jittered.
RETRY_FIRST = 1.0
RETRY_CAP = 300.0
_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")


class GatewayError(Exception):
    """A configuration problem that stops the gateway before it starts; the message says what to fix."""


@dataclass(slots=True)
class PlatformState:
    """Where a platform stands: ``connecting``, ``retrying`` (after ``attempts`` failures, the last
    saying ``error``; the next try at ``retry_at``) or ``connected`` (as ``account``)."""

    state: str
    error: str | None
    attempts: int
    retry_at: float | None
    account: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "error": self.error, "attempts": self.attempts, "retry_at": self.retry_at, "account": self.account}


def retry_delay(attempt: int) -> float:
    """Seconds before retry number ``attempt`` (1-based): 1s, 2s, 4s ... capped at 5 minutes, each
    between half and all of that (jitter, so gateways cut off together do not return in step)."""
    ceiling = min(RETRY_CAP, RETRY_FIRST * 2 ** min(attempt - 1, 30))
    return random.uniform(ceiling / 2, ceiling)


def lock_token(config: Config) -> str | None:
    """What names this gateway's lock: the Telegram token (as before), else every configured
    platform's account (hashed into the file name); None for a scheduler-only gateway."""
    from hermes_gateway.platforms import configured

    if config.telegram.token is not None:
        return config.telegram.token.get_secret_value()
    names = configured(config)
    if not names:
        return None
    parts = []
    for name in names:
        section = getattr(config, name)
        account = next(
            (
                getattr(section, key)
                for key in ("token", "bot_token", "phone_number_id", "account", "user_id", "address")
                if getattr(section, key, None)
            ),
            name,
        )
        parts.append(f"{name}={account.get_secret_value() if hasattr(account, 'get_secret_value') else account}")
    return "|".join(parts)


def check_config(config: Config) -> dict[str, str]:
    """The configured projects (name -> resolved path); raises GatewayError for what is missing."""
    if not config.gateway.projects:
        raise GatewayError('No projects: add [gateway] projects = { name = "/path/to/project" } to config.toml.')
    if config.telegram.token is not None and config.telegram.mode == "webhook":
        secret = config.telegram.webhook_secret.get_secret_value() if config.telegram.webhook_secret is not None else ""
        if not secret or not config.telegram.webhook_url:
            raise GatewayError(
                "Webhook mode needs [telegram] webhook_url and webhook_secret (a secret token Telegram sends back "
                "in X-Telegram-Bot-Api-Secret-Token; updates without it are refused)."
            )
        if not _SECRET_TOKEN.fullmatch(secret):
            raise GatewayError("[telegram] webhook_secret must be 1-256 characters of A-Z, a-z, 0-9, _ and - (Telegram's rule).")
        import importlib.util

        if importlib.util.find_spec("tornado") is None:
            raise GatewayError("Webhook mode needs the webhook extra: pip install 'python-telegram-bot[webhooks]' (or use polling).")
    projects: dict[str, str] = {}
    for name, raw in config.gateway.projects.items():
        path = Path(raw).expanduser().resolve()
        if not path.is_dir():
            raise GatewayError(f"[gateway] projects.{name}: {path} is not a directory.")
        projects[name] = str(path)
    return projects


class Gateway:
    """Everything one ``hermes-gateway run`` holds."""

    def __init__(self, config: Config, lock: GatewayLock | None = None) -> None:
        from hermes_gateway.platforms import configured

        self.config = config
        self.names = configured(config)
        self.platform = bool(self.names)
        if self.platform:
            self.projects = check_config(config)
        elif not config.cron.enabled:
            raise GatewayError(
                "Nothing to run: no chat platform is configured (a Telegram bot token: TELEGRAM_BOT_TOKEN or [telegram] token; "
                "or a [discord], [slack], [whatsapp], "
                "[signal], [matrix] or [email] section with its credentials) and [cron] enabled = false."
            )
        else:
            self.projects = {}
        self.secrets = config.secrets
        self.timezone = config.cron.timezone or local_zone()
        self.default_mode = "ask"
        self.lock = lock
        self.started_at = time.time()
        self.platforms: dict[str, Platform] = {}
        self.states: dict[str, PlatformState] = {name: PlatformState("connecting", None, 0, None) for name in self.names}
        self._loops: list[asyncio.Task[None]] = []
        self._closed = False

    @property
    def last_update_at(self) -> float | None:
        router = getattr(self, "router", None)
        return router.last_update_at if router is not None else None

    # -- building -------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the store, build the agents and the platforms' adapters (no network yet)."""
        from core.agent.builder import build_agent
        from core.store import SessionStore
        from core.store.gateway import GatewayStore
        from core.store.jobs import JobStore
        from hermes_gateway.access import SessionAccess
        from hermes_gateway.chats import Conversations
        from hermes_gateway.commands import Commands
        from hermes_gateway.conversation import Router
        from hermes_gateway.parts import Projects
        from hermes_gateway.platform import PlatformConfigError
        from hermes_gateway.platforms import build
        from hermes_gateway.remote import RemoteApprovals
        from hermes_gateway.scheduler import Scheduler
        from surface_support.pairing import Pairing
        from toolsets import toolset

        cfg = self.config
        self.store: SessionStore = await SessionStore.open()
        self.gateway_store: GatewayStore = GatewayStore(self.store)
        self.jobs: JobStore = JobStore(self.store)
        self.pairing: Pairing = Pairing(self.gateway_store, allowed_identities(cfg))
        self.agent: Agent = build_agent(cfg, "gateway", toolset=toolset, store=self.store)
        # Cron runs share the chat agent's model client.
        self.cron_agent: Agent = build_agent(cfg, "cron", toolset=toolset, store=self.store, model=self.agent.model)
        self.scheduler = Scheduler(cfg, self.cron_agent, self.platforms, self.jobs, self.gateway_store)
        if not self.platform:
            return
        for name in self.names:
            try:
                self.platforms[name] = build(name, cfg)
            except PlatformConfigError as exc:
                raise GatewayError(f"[{name}]: {exc}") from None
        owners = cfg.owner_identities()
        projects = Projects(self.projects, self.store)
        self.access = SessionAccess(owners, projects, self.gateway_store)
        self.conversations = Conversations(cfg, self.agent, self.platforms, self.gateway_store, projects, self.access, self.default_mode)
        self.commands = Commands(
            cfg, self.platforms, self.conversations, self.access, projects, self.gateway_store, self.jobs, self.scheduler, self.timezone
        )
        self.remote = RemoteApprovals(
            cfg, [self.agent.broker, self.cron_agent.broker], self.platforms, owners, self.store, self.gateway_store
        )
        self.router = Router(cfg, self.platforms, self.pairing, self.conversations, self.commands, self.remote)

    # -- running --------------------------------------------------------------------------

    async def serve(self, stop: asyncio.Event) -> None:
        """Run the scheduler and bring each platform up (retried with backoff) until ``stop`` is set;
        then shut down gracefully. The store is closed however this ends."""
        try:
            if not self.platform:
                await self._serve_scheduler_only(stop)
            else:
                await self._serve_platforms(stop)
        finally:
            await self.close()

    async def _serve_platforms(self, stop: asyncio.Event) -> None:
        from surface_support.approval_watch import watch_foreign_answers

        cfg = self.config
        # The scheduler and the heartbeat wait for no platform: jobs run while one is unreachable.
        self._loops = [
            asyncio.create_task(self._heartbeat(), name="heartbeat"),
            asyncio.create_task(watch_foreign_answers(self.agent.broker, self.store), name="approval-watch"),
        ]
        if cfg.cron.enabled:
            self._loops.append(asyncio.create_task(self.scheduler.loop(), name="scheduler"))
        connects = [asyncio.create_task(self._connect(name), name=f"connect-{name}") for name in self.platforms]
        await stop.wait()
        for connect in connects:
            connect.cancel()  # still retrying: give up (a no-op once connected)
        await asyncio.gather(*connects, return_exceptions=True)
        log.info("stopping: no new messages; letting work in flight finish (%ss)", cfg.gateway.shutdown_grace)
        for platform in self.platforms.values():
            await self._quietly(platform.stop_receiving())
        await asyncio.gather(self.conversations.drain(cfg.gateway.shutdown_grace), self.scheduler.drain(cfg.gateway.shutdown_grace))
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        await asyncio.gather(*(self._quietly(p.stop()) for p in self.platforms.values()))

    async def _connect(self, name: str) -> None:
        """Bring one platform up, retrying with capped, jittered backoff until it works; every
        failure is logged and shown by ``hermes-editor gateway status``. Once connected, the
        adapter's library rides out later network failures itself."""
        from hermes_gateway.platform import PlatformDown

        platform = self.platforms[name]
        attempt = 0
        while True:
            try:
                await platform.start(self.router)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                attempt += 1
                delay = retry_delay(attempt)
                if isinstance(exc, PlatformDown):
                    why = exc.why
                    if exc.retry_after is not None:
                        delay = max(delay, exc.retry_after) if exc.retry_after < RETRY_CAP else RETRY_CAP
                    level = logging.ERROR if exc.retry_after is not None and exc.retry_after >= RETRY_CAP else logging.WARNING
                else:
                    why, level = f"{type(exc).__name__}: {exc}", logging.WARNING
                why = self._scrub(why)
                self.states[name] = PlatformState("retrying", why, attempt, time.time() + delay)
                self.write_status("running")
                log.log(
                    level,
                    "%s start-up failed (attempt %d): %s; retrying in %.1fs; scheduled jobs keep running",
                    name.title(),
                    attempt,
                    why,
                    delay,
                    exc_info=exc if not isinstance(exc, PlatformDown) else None,
                )
                await self._quietly(platform.stop())
                await asyncio.sleep(delay)
                continue
            break
        self.states[name] = PlatformState("connected", None, attempt, None, platform.account)
        self.write_status("running")
        log.info(
            "%s connected as %s%s; projects: %s",
            name,
            platform.account or "?",
            f" after {attempt} failed attempts" if attempt else "",
            ", ".join(self.projects),
        )
        if self.remote.enabled and not any(t.get_name() == "remote-approvals" for t in self._loops):
            self._loops.append(asyncio.create_task(self.remote.loop(), name="remote-approvals"))

    def _scrub(self, text: str) -> str:
        for secret in sorted((s for s in self.secrets if s), key=len, reverse=True):
            text = text.replace(secret, "[redacted]")
        return text

    @staticmethod
    async def _quietly(step: Any) -> None:
        """A shutdown step that must not stop the rest of the shutdown."""
        try:
            await step
        except Exception as exc:
            log.debug("shutdown step failed: %s", exc, exc_info=True)

    async def _serve_scheduler_only(self, stop: asyncio.Event) -> None:
        """Run due jobs until ``stop`` is set; results stay in the store, nothing is sent to a chat."""
        cfg = self.config
        log.info("gateway started with no platform configured: running scheduled jobs only")
        self._loops = [
            asyncio.create_task(self._heartbeat(), name="heartbeat"),
            asyncio.create_task(self.scheduler.loop(), name="scheduler"),
        ]
        await stop.wait()
        log.info("stopping: letting cron runs in flight finish (%ss)", cfg.gateway.shutdown_grace)
        await self.scheduler.drain(cfg.gateway.shutdown_grace)
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)

    async def close(self) -> None:
        """Close the chats' hosts, the model client and the store (the store's thread would keep the process alive)."""
        conversations = getattr(self, "conversations", None)
        if conversations is not None:
            await conversations.close_hosts()
        try:
            await self.agent.model.aclose()
        except Exception:
            log.debug("model close failed", exc_info=True)
        store = getattr(self, "store", None)
        if store is not None and not self._closed:
            self._closed = True
            await store.close()

    async def _heartbeat(self) -> None:
        while True:
            self.write_status("running")
            await asyncio.sleep(HEARTBEAT_SECONDS)

    def write_status(self, state: str) -> None:
        if self.lock is None:
            return
        if not self.platform:
            try:
                self.lock.write_status(
                    state=state,
                    platform=None,
                    cron_enabled=True,
                    cron_runs_running=self.scheduler.running,
                    catch_up_grace=self.config.cron.catch_up_grace,
                )
            except OSError:
                log.warning("cannot write the status file", exc_info=True)
            return
        telegram = self.platforms.get("telegram")
        try:
            self.lock.write_status(
                state=state,
                bot=telegram.account.lstrip("@") if telegram is not None else "",
                mode=self.config.telegram.mode if telegram is not None else None,
                projects=list(self.projects),
                turns_running=len(self.conversations.running()) if hasattr(self, "conversations") else 0,
                cron_enabled=self.config.cron.enabled,
                cron_runs_running=self.scheduler.running,
                catch_up_grace=self.config.cron.catch_up_grace,
                remote_approvals=self.remote.enabled if hasattr(self, "remote") else False,
                last_update_at=self.last_update_at,
                platforms={name: state.as_dict() for name, state in self.states.items()},
                **({"telegram": self.states["telegram"].as_dict()} if "telegram" in self.states else {}),
            )
        except OSError:
            log.warning("cannot write the status file", exc_info=True)


def allowed_identities(config: Config) -> set[str]:
    """Every configured platform's ``allowed_users`` as identities (never names)."""
    from hermes_gateway.platforms import ADAPTERS

    found = {f"telegram:{user}" for user in config.telegram.allowed_users}
    for name in ADAPTERS:
        section = getattr(config, name, None)
        if name != "telegram" and section is not None:
            found |= {f"{name}:{user}" for user in section.allowed_users}
    return found
