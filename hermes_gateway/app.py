"""The gateway process: the store, two agents (chat and cron), the Telegram application, loops.

Updates flow through python-telegram-bot's ``Application`` (httpx underneath): the
authorisation gate first (group -1), then commands, messages and button presses. Turns run
as background tasks so button presses are handled while a turn waits for an answer.

With no platform configured (no Telegram token) the gateway runs the scheduler only: due
jobs run and their results stay in the store (``hermes-editor cron runs``).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import mimetypes
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from telegram import Update
from telegram.ext import Application, ApplicationBuilder, CallbackQueryHandler, ContextTypes, MessageHandler, TypeHandler, filters

from core.config import Config, home
from core.store.schedule import local_zone
from hermes_gateway.telegram_io import Target

if TYPE_CHECKING:
    from core.agent.loop import Agent
    from core.store import SessionStore
    from core.store.gateway import GatewayStore
    from core.store.jobs import JobStore
    from hermes_gateway.lock import GatewayLock
    from surface_support.pairing import Pairing

__all__ = ["Gateway", "GatewayError", "PlatformState", "retry_delay"]

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 5.0
# Reconnecting to Telegram at start-up: the first wait, doubled per failure up to the cap, jittered.
RETRY_FIRST = 1.0
RETRY_CAP = 300.0
DEFAULT_API = "https://api.telegram.org/bot"
_TEXT_INLINE_LIMIT = 100_000
_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")


class GatewayError(Exception):
    """A configuration problem that stops the gateway before it starts; the message says what to fix."""


@dataclass(slots=True)
class PlatformState:
    """Where Telegram stands: ``connecting``, ``retrying`` (after ``attempts`` failures, the last
    saying ``error``; the next try at ``retry_at``) or ``connected``."""

    state: str
    error: str | None
    attempts: int
    retry_at: float | None

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "error": self.error, "attempts": self.attempts, "retry_at": self.retry_at}


def retry_delay(attempt: int) -> float:
    """Seconds before retry number ``attempt`` (1-based): 1s, 2s, 4s ... capped at 5 minutes, each
    between half and all of that (jitter, so gateways cut off together do not return in step)."""
    ceiling = min(RETRY_CAP, RETRY_FIRST * 2 ** min(attempt - 1, 30))
    return random.uniform(ceiling / 2, ceiling)


def _is_telegram_error(exc: BaseException) -> bool:
    from telegram.error import TelegramError

    return isinstance(exc, TelegramError)


def check_config(config: Config) -> dict[str, str]:
    """The configured projects (name -> resolved path); raises GatewayError for what is missing."""
    if config.telegram.token is None:
        raise GatewayError("No Telegram bot token: set TELEGRAM_BOT_TOKEN or [telegram] token in config.toml (from @BotFather).")
    if not config.gateway.projects:
        raise GatewayError('No projects: add [gateway] projects = { name = "/path/to/project" } to config.toml.')
    if config.telegram.mode == "webhook":
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
        self.config = config
        self.platform = config.telegram.token is not None
        if self.platform:
            self.projects = check_config(config)
        elif not config.cron.enabled:
            raise GatewayError("Nothing to run: no Telegram bot token (TELEGRAM_BOT_TOKEN or [telegram] token) and [cron] enabled = false.")
        else:
            self.projects = {}
        self.secrets = config.secrets
        self.timezone = config.cron.timezone or local_zone()
        self.default_mode = "ask"
        self.lock = lock
        self.started_at = time.time()
        self.last_update_at: float | None = None
        self.platform_state = PlatformState("connecting", None, 0, None)
        self._loops: list[asyncio.Task[None]] = []
        self._closed = False

    # -- building -------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the store and build the agents and the Telegram application (no network yet)."""
        from core.agent.builder import build_agent
        from core.store import SessionStore
        from core.store.gateway import GatewayStore
        from core.store.jobs import JobStore
        from hermes_gateway.access import SessionAccess
        from hermes_gateway.auth import Gate
        from hermes_gateway.chats import Conversations
        from hermes_gateway.commands import Commands
        from hermes_gateway.parts import ChatBot, Projects
        from hermes_gateway.remote import RemoteApprovals
        from hermes_gateway.scheduler import Scheduler
        from surface_support.pairing import Pairing
        from toolsets import toolset

        cfg = self.config
        self.store: SessionStore = await SessionStore.open()
        self.gateway_store: GatewayStore = GatewayStore(self.store)
        self.jobs: JobStore = JobStore(self.store)
        self.pairing: Pairing = Pairing(self.gateway_store, cfg.telegram.allowed_users)
        self.agent: Agent = build_agent(cfg, "gateway", toolset=toolset, store=self.store)
        # Cron runs share the chat agent's model client.
        self.cron_agent: Agent = build_agent(cfg, "cron", toolset=toolset, store=self.store, model=self.agent.model)
        if not self.platform:
            self.scheduler = Scheduler(cfg, self.cron_agent, None, self.jobs, self.gateway_store)
            return
        assert cfg.telegram.token is not None
        base = (cfg.telegram.api_base_url or DEFAULT_API).rstrip("/")
        builder: ApplicationBuilder = (
            ApplicationBuilder()
            .token(cfg.telegram.token.get_secret_value())
            .base_url(base)
            .base_file_url(re.sub(r"/bot$", "/file/bot", base))
            .get_updates_read_timeout(cfg.telegram.poll_timeout + 10)
        )
        self.application: Application = builder.build()
        app = self.application
        bot = app.bot
        self.chatbot = ChatBot(bot)
        projects = Projects(self.projects, self.store)
        self.access = SessionAccess(cfg.gateway.owner, projects, self.gateway_store)
        self.conversations = Conversations(cfg, self.agent, bot, self.gateway_store, projects, self.access, self.default_mode)
        self.scheduler = Scheduler(cfg, self.cron_agent, bot, self.jobs, self.gateway_store)
        self.commands = Commands(
            cfg, self.chatbot, self.conversations, self.access, projects, self.gateway_store, self.jobs, self.scheduler, self.timezone
        )
        self.remote = RemoteApprovals(cfg, [self.agent.broker, self.cron_agent.broker], bot, self.store, self.gateway_store)
        app.add_handler(TypeHandler(Update, Gate(self.pairing, self.chatbot)), group=-1)
        app.add_handler(CallbackQueryHandler(self._on_button))
        app.add_handler(MessageHandler(filters.UpdateType.MESSAGE & filters.COMMAND, self.commands.dispatch))
        app.add_handler(
            MessageHandler(
                filters.UpdateType.MESSAGE & (filters.TEXT | filters.PHOTO | filters.Document.ALL) & ~filters.COMMAND, self._on_message
            )
        )
        app.add_error_handler(self._on_error)

    @property
    def bot(self) -> Any:
        return self.application.bot

    # -- running --------------------------------------------------------------------------

    async def serve(self, stop: asyncio.Event) -> None:
        """Run the scheduler and bring the platform up (retried with backoff) until ``stop`` is set;
        then shut down gracefully. The store is closed however this ends."""
        try:
            if not self.platform:
                await self._serve_scheduler_only(stop)
            else:
                await self._serve_platform(stop)
        finally:
            await self.close()

    async def _serve_platform(self, stop: asyncio.Event) -> None:
        from surface_support.approval_watch import watch_foreign_answers

        cfg = self.config
        app = self.application
        # The scheduler and the heartbeat do not wait for Telegram: jobs run while it is unreachable.
        self._loops = [
            asyncio.create_task(self._heartbeat(), name="heartbeat"),
            asyncio.create_task(watch_foreign_answers(self.agent.broker, self.store), name="approval-watch"),
        ]
        if cfg.cron.enabled:
            self._loops.append(asyncio.create_task(self.scheduler.loop(), name="scheduler"))
        connect = asyncio.create_task(self._connect(), name="connect")
        await stop.wait()
        connect.cancel()  # still retrying: give up (a no-op once connected)
        await asyncio.gather(connect, return_exceptions=True)
        log.info("stopping: no new updates; letting work in flight finish (%ss)", cfg.gateway.shutdown_grace)
        await self._quietly(self._stop_updates())
        await asyncio.gather(self.conversations.drain(cfg.gateway.shutdown_grace), self.scheduler.drain(cfg.gateway.shutdown_grace))
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        if app.running:
            await self._quietly(app.stop())
        await self._quietly(app.shutdown())

    async def _connect(self) -> None:
        """Bring Telegram up (getMe, then polling or the webhook), retrying with capped, jittered
        backoff until it works; every failure is logged and shown by ``hermes-editor gateway status``.

        Once polling runs, python-telegram-bot rides out later network failures itself.
        """
        cfg = self.config
        app = self.application
        attempt = 0
        while True:
            try:
                await app.initialize()
                self.chatbot.username = app.bot.username or ""
                if not app.running:
                    await app.start()
                await self._start_updates()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                attempt += 1
                why, delay, level = self._connect_failure(exc, attempt)
                self.platform_state = PlatformState("retrying", why, attempt, time.time() + delay)
                self.write_status("running")
                log.log(
                    level,
                    "Telegram start-up failed (attempt %d): %s; retrying in %.1fs; scheduled jobs keep running",
                    attempt,
                    why,
                    delay,
                    exc_info=exc if not _is_telegram_error(exc) else None,
                )
                await asyncio.sleep(delay)
                continue
            break
        self.platform_state = PlatformState("connected", None, attempt, None)
        self.write_status("running")
        log.info(
            "gateway connected as @%s (%s)%s; projects: %s",
            self.chatbot.username,
            cfg.telegram.mode,
            f" after {attempt} failed attempts" if attempt else "",
            ", ".join(self.projects),
        )
        if self.remote.enabled:
            self._loops.append(asyncio.create_task(self.remote.loop(), name="remote-approvals"))

    def _connect_failure(self, exc: Exception, attempt: int) -> tuple[str, float, int]:
        """What went wrong (secrets scrubbed), how long to wait, and the log level."""
        from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TimedOut

        delay = retry_delay(attempt)
        if isinstance(exc, InvalidToken):
            # Telegram's 401/404: the token is wrong or revoked. Only a new token helps, so the
            # platform is retried at the slowest pace while the scheduler keeps working.
            return (
                "Telegram rejected the bot token (401 Unauthorized): check TELEGRAM_BOT_TOKEN or [telegram] token "
                "(from @BotFather), then restart the gateway",
                RETRY_CAP,
                logging.ERROR,
            )
        if isinstance(exc, RetryAfter):
            wait = exc.retry_after if isinstance(exc.retry_after, (int, float)) else exc.retry_after.total_seconds()
            return f"Telegram asks to wait {float(wait):.0f}s (flood control)", max(delay, float(wait)), logging.WARNING
        if isinstance(exc, Conflict):
            why = f"another client uses this bot token ({exc.message})"
        elif isinstance(exc, TimedOut):
            why = "Telegram did not answer in time (timed out)"
        elif isinstance(exc, NetworkError):
            why = f"cannot reach Telegram ({exc.message})"
        elif _is_telegram_error(exc):
            why = f"Telegram error: {getattr(exc, 'message', exc)}"
        else:
            why = f"{type(exc).__name__}: {exc}"
        return self._scrub(why), delay, logging.WARNING

    def _scrub(self, text: str) -> str:
        for secret in sorted((s for s in self.secrets if s), key=len, reverse=True):
            text = text.replace(secret, "[redacted]")
        return text

    async def _start_updates(self) -> None:
        cfg = self.config
        updater = self.application.updater
        assert updater is not None
        if updater.running:
            return
        if cfg.telegram.mode == "webhook":
            assert cfg.telegram.webhook_secret is not None
            await updater.start_webhook(
                listen=cfg.telegram.webhook_listen,
                port=cfg.telegram.webhook_port,
                # The listener serves the public URL's path (a reverse proxy forwards it as is).
                url_path=urlsplit(cfg.telegram.webhook_url or "").path.strip("/"),
                webhook_url=cfg.telegram.webhook_url,
                secret_token=cfg.telegram.webhook_secret.get_secret_value(),
            )
        else:
            await updater.start_polling(poll_interval=0.0, timeout=int(cfg.telegram.poll_timeout), drop_pending_updates=False)

    async def _stop_updates(self) -> None:
        updater = self.application.updater
        if updater is not None and updater.running:
            await updater.stop()

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
        try:
            self.lock.write_status(
                state=state,
                bot=self.chatbot.username,
                mode=self.config.telegram.mode,
                projects=list(self.projects),
                turns_running=len(self.conversations.running()),
                cron_enabled=self.config.cron.enabled,
                cron_runs_running=self.scheduler.running,
                catch_up_grace=self.config.cron.catch_up_grace,
                remote_approvals=self.remote.enabled,
                last_update_at=self.last_update_at,
                telegram=self.platform_state.as_dict(),
            )
        except OSError:
            log.warning("cannot write the status file", exc_info=True)

    # -- handlers -------------------------------------------------------------------------

    async def _on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        from core.messages import ImagePart, TextPart, UserMessage

        message = update.message
        user = update.effective_user
        if message is None or user is None or not self.chatbot.addressed(message):
            return
        self.last_update_at = time.time()
        text = message.text or message.caption or ""
        if self.chatbot.username:
            text = re.sub(rf"@{re.escape(self.chatbot.username)}\b", "", text, flags=re.IGNORECASE).strip()
        target = self.chatbot.target_of(message)
        parts: list[Any] = []
        try:
            notes, images = await self._attachments(message, target)
        except Exception as exc:
            log.warning("could not fetch an attachment: %s", exc)
            notes, images = [f"(An attachment could not be downloaded: {type(exc).__name__}.)"], []
        body = "\n\n".join([t for t in [text, *notes] if t])
        if not body and not images:
            return
        parts.append(TextPart(text=body or "(see the attached image)"))
        parts += [ImagePart(media_type=mt, data=data) for mt, data in images]
        conversation = await self.conversations.get(target)
        self.conversations.start_turn(conversation, UserMessage(parts=parts), user.id)

    async def _attachments(self, message: Any, target: Target) -> tuple[list[str], list[tuple[str, str]]]:
        """Save files and photos under the state home; text files are given inline, images as images."""
        notes: list[str] = []
        images: list[tuple[str, str]] = []
        limit = self.config.gateway.files_max_bytes
        folder = home() / "gateway" / "uploads" / target.key.replace(":", "_")
        if message.photo:
            photo = message.photo[-1]
            data = await self._download(photo.file_id, limit)
            path = _save(folder, f"photo-{photo.file_unique_id}.jpg", data)
            images.append(("image/jpeg", base64.b64encode(data).decode()))
            notes.append(f"(Photo saved at {path}.)")
        document = message.document
        if document is not None:
            if document.file_size and document.file_size > limit:
                return [f"(The file {document.file_name} is larger than {limit} bytes and was not downloaded.)"], images
            data = await self._download(document.file_id, limit)
            name = Path(document.file_name or f"file-{document.file_unique_id}").name
            path = _save(folder, name, data)
            kind = document.mime_type or mimetypes.guess_type(name)[0] or ""
            if kind.startswith("image/"):
                images.append((kind, base64.b64encode(data).decode()))
                notes.append(f"(Image saved at {path}.)")
            else:
                try:
                    content = data.decode("utf-8")
                except UnicodeDecodeError:
                    content = None
                if content is not None and len(content) <= _TEXT_INLINE_LIMIT:
                    notes.append(f"(File {name}, saved at {path}:)\n```\n{content}\n```")
                else:
                    notes.append(f"(File {name} saved at {path}; {len(data)} bytes.)")
        return notes, images

    async def _download(self, file_id: str, limit: int) -> bytes:
        file = await self.bot.get_file(file_id)
        data = bytes(await file.download_as_bytearray())
        if len(data) > limit:
            raise ValueError("file too large")
        return data

    async def _on_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        if query is None or not query.data:
            return
        self.last_update_at = time.time()
        kind, _, rest = query.data.partition("|")
        approval_id, _, choice = rest.partition("|")
        if kind == "ap":
            await self.conversations.approvals.press(query, approval_id, choice)
        elif kind == "rp":
            await self.remote.press(query, approval_id, choice)
        else:
            await query.answer("This button is no longer valid.")

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.error("handler failed: %s", context.error, exc_info=context.error)


def _save(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{int(time.time())}-{name}"
    path.write_bytes(data)
    return path
