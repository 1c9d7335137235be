"""Telegram through python-telegram-bot: long polling (or a webhook with a secret token).

Updates of different chats are handled at the same time (one chat waiting on the store or on a
command does not hold up the others); one chat's updates are handled one after the other, in the
order Telegram sent them (``ChatOrder``). Private chats are direct places; in groups the bot answers when mentioned (``@name``), replied
to, or sent a command meant for it (``/new`` or ``/new@name``). A forum topic is its own
conversation (``Place.thread``). Replies are rendered to Telegram's HTML subset and sent again
as plain text when Telegram refuses the markup (``hermes_gateway.telegram_io``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable
from typing import Any
from urllib.parse import urlsplit

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.constants import ChatAction, ChatType
from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TelegramError, TimedOut
from telegram.ext import (
    Application,
    ApplicationBuilder,
    BaseUpdateProcessor,
    CallbackQueryHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from core.config import Config
from hermes_gateway.platform import Attachment, Button, Events, Incoming, Limits, Place, Platform, PlatformDown, Press, Sender, identity
from hermes_gateway.render import LIMIT
from hermes_gateway.telegram_http import AiohttpRequest
from hermes_gateway.telegram_io import Target, edit_text, fit_chunks, send_text

__all__ = ["DEFAULT_API", "ChatOrder", "TelegramPlatform"]

log = logging.getLogger(__name__)

DEFAULT_API = "https://api.telegram.org/bot"
# Seconds before a rejected token is tried again: only a new token (and a restart) helps.
REJECTED_TOKEN_RETRY = 300.0


# Updates handled at once (across chats; a chat's own wait for their turn, in order).
MAX_CONCURRENT_UPDATES = 256
# Seconds a request to the Bot API waits for a free connection of the pool.
POOL_TIMEOUT = 30.0


class ChatOrder(BaseUpdateProcessor):
    """Handle updates of different chats concurrently and each chat's in the order they came.

    python-telegram-bot hands updates to ``do_process_update`` in the order Telegram sent them;
    each waits for the one before it from the same chat (a button press counts for the chat of
    its message) and for no other.
    """

    def __init__(self, max_concurrent_updates: int = MAX_CONCURRENT_UPDATES) -> None:
        super().__init__(max_concurrent_updates)
        self._last: dict[object, asyncio.Event] = {}  # chat -> done when its latest update is handled

    async def do_process_update(self, update: object, coroutine: Awaitable[Any]) -> None:
        chat = getattr(update, "effective_chat", None)
        key: object = chat.id if chat is not None else None
        before = self._last.get(key)
        done = self._last[key] = asyncio.Event()
        try:
            if before is not None:
                try:
                    await before.wait()
                except BaseException:
                    getattr(coroutine, "close", lambda: None)()  # never started (shutting down)
                    raise
            await coroutine
        finally:
            done.set()
            if self._last.get(key) is done:
                del self._last[key]

    async def initialize(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass


def _target(place: Place) -> Target:
    return Target(int(place.chat), int(place.thread) if place.thread else None)


def _keyboard(buttons: list[Button] | None) -> InlineKeyboardMarkup | None:
    if not buttons:
        return None
    return InlineKeyboardMarkup([[InlineKeyboardButton(b.label, callback_data=b.data) for b in buttons]])


class TelegramPlatform(Platform):
    name = "telegram"

    def __init__(self, config: Config) -> None:
        super().__init__()
        cfg = config.telegram
        assert cfg.token is not None
        self.mode = cfg.mode
        self._config = cfg
        self.limits = Limits(text=LIMIT, edit_interval=cfg.edit_interval)
        base = (cfg.api_base_url or DEFAULT_API).rstrip("/")
        # Over aiohttp (hermes_gateway.telegram_http): a third of httpx's CPU per call. With many
        # chats at once every connection can be busy for a moment: a call waits for one
        # (python-telegram-bot gives up after 1 s by default, and the reply would be lost).
        self._requests = (
            AiohttpRequest(pool_size=1, read_timeout=cfg.poll_timeout + 10),
            AiohttpRequest(pool_timeout=POOL_TIMEOUT),
        )
        self.application: Application = (
            ApplicationBuilder()
            .token(cfg.token.get_secret_value())
            .base_url(base)
            .base_file_url(re.sub(r"/bot$", "/file/bot", base))
            .get_updates_request(self._requests[0])
            .request(self._requests[1])
            .concurrent_updates(ChatOrder())
            .build()
        )
        self._events: Events | None = None
        self._handlers = False

    @property
    def bot(self) -> Any:
        return self.application.bot

    # -- connecting -----------------------------------------------------------------------

    async def start(self, events: Events) -> None:
        self._events = events
        app = self.application
        if not self._handlers:
            app.add_handler(CallbackQueryHandler(self._on_press))
            app.add_handler(MessageHandler(filters.UpdateType.MESSAGE, self._on_message))
            app.add_error_handler(self._on_error)
            self._handlers = True
        try:
            await app.initialize()
            self.account = f"@{app.bot.username}" if app.bot.username else ""
            if not app.running:
                await app.start()
            await self._start_updates()
        except TelegramError as exc:
            raise self._down(exc) from exc

    def _down(self, exc: TelegramError) -> PlatformDown:
        if isinstance(exc, InvalidToken):
            return PlatformDown(
                "Telegram rejected the bot token (401 Unauthorized): check TELEGRAM_BOT_TOKEN or [telegram] token "
                "(from @BotFather), then restart the gateway",
                REJECTED_TOKEN_RETRY,
            )
        if isinstance(exc, RetryAfter):
            wait = exc.retry_after if isinstance(exc.retry_after, (int, float)) else exc.retry_after.total_seconds()
            return PlatformDown(f"Telegram asks to wait {float(wait):.0f}s (flood control)", float(wait))
        if isinstance(exc, Conflict):
            return PlatformDown(f"another client uses this bot token ({exc.message})")
        if isinstance(exc, TimedOut):
            return PlatformDown("Telegram did not answer in time (timed out)")
        if isinstance(exc, NetworkError):
            return PlatformDown(f"cannot reach Telegram ({exc.message})")
        return PlatformDown(f"Telegram error: {getattr(exc, 'message', exc)}")

    async def _start_updates(self) -> None:
        cfg = self._config
        updater = self.application.updater
        assert updater is not None
        if updater.running:
            return
        if cfg.mode == "webhook":
            assert cfg.webhook_secret is not None
            await updater.start_webhook(
                listen=cfg.webhook_listen,
                port=cfg.webhook_port,
                # The listener serves the public URL's path (a reverse proxy forwards it as is).
                url_path=urlsplit(cfg.webhook_url or "").path.strip("/"),
                webhook_url=cfg.webhook_url,
                secret_token=cfg.webhook_secret.get_secret_value(),
            )
        else:
            await updater.start_polling(poll_interval=0.0, timeout=int(cfg.poll_timeout), drop_pending_updates=False)

    async def stop_receiving(self) -> None:
        """No new updates (the first step of a graceful shutdown); sending still works."""
        updater = self.application.updater
        if updater is not None and updater.running:
            await updater.stop()

    async def stop(self) -> None:
        app = self.application
        for step in (self.stop_receiving, app.stop if app.running else None, app.shutdown):
            if step is None:
                continue
            try:
                await step()
            except Exception as exc:
                log.debug("telegram shutdown step failed: %s", exc, exc_info=True)
        for request in self._requests:  # also when the bot never started (shutdown skips them then)
            await request.shutdown()

    # -- receiving ------------------------------------------------------------------------

    def _place(self, message: Any) -> Place:
        thread = message.message_thread_id if getattr(message, "is_topic_message", False) else None
        chat = message.chat
        return Place(self.name, str(chat.id), str(thread) if thread else None, direct=chat.type == ChatType.PRIVATE)

    def _addressed(self, message: Any, text: str) -> bool:
        """In a group, the bot answers only when mentioned, replied to, or sent a command meant for it."""
        if message.chat.type == ChatType.PRIVATE:
            return True
        username = self.bot.username or ""
        if username and f"@{username}".lower() in text.lower():
            return True
        if text.startswith("/"):
            word = text.split(maxsplit=1)[0]
            return "@" not in word
        reply = message.reply_to_message
        return bool(reply and reply.from_user and reply.from_user.id == self.bot.id)

    async def _on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.message
        user = update.effective_user
        if message is None or user is None or self._events is None:
            return
        raw = message.text or message.caption or ""
        text = raw
        username = self.bot.username or ""
        if username:
            text = re.sub(rf"@{re.escape(username)}\b", "", text, flags=re.IGNORECASE).strip()
        incoming = Incoming(
            place=self._place(message),
            sender=Sender(identity(self.name, user.id), user.full_name, bool(user.is_bot)),
            text=text,
            addressed=self._addressed(message, raw),
            attachments=self._attachments(message),
            message_id=str(message.message_id),
        )
        await self._events.message(incoming)

    def _attachments(self, message: Any) -> list[Attachment]:
        found: list[Attachment] = []
        if message.photo:
            photo = message.photo[-1]
            found.append(Attachment(f"photo-{photo.file_unique_id}.jpg", "image/jpeg", photo.file_size, self._fetcher(photo.file_id)))
        document = message.document
        if document is not None:
            name = document.file_name or f"file-{document.file_unique_id}"
            found.append(Attachment(name, document.mime_type or "", document.file_size, self._fetcher(document.file_id)))
        for audio, voice in ((message.voice, True), (message.audio, False)):
            if audio is None:
                continue
            # A voice note is transcribed; an audio file (music, a recording sent as a file) is a file.
            mime = audio.mime_type or "audio/ogg"
            name = getattr(audio, "file_name", None) or f"voice-{audio.file_unique_id}.{'ogg' if 'ogg' in mime else 'audio'}"
            found.append(Attachment(name, mime, audio.file_size, self._fetcher(audio.file_id), voice=voice))
        return found

    def _fetcher(self, file_id: str) -> Any:
        async def fetch() -> bytes:
            file = await self.bot.get_file(file_id)
            return bytes(await file.download_as_bytearray())

        return fetch

    async def _on_press(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        user = update.effective_user
        if query is None or user is None or not query.data or self._events is None:
            return
        message = query.message
        if message is not None and getattr(message, "chat", None) is not None:
            place = self._place(message)
        else:
            place = Place(self.name, str(user.id), None, direct=True)

        async def answer(text: str, alert: bool) -> None:
            try:
                await query.answer(text, show_alert=alert)
            except TelegramError:
                log.debug("could not answer a button press", exc_info=True)

        await self._events.press(
            Press(
                place=place,
                sender=Sender(identity(self.name, user.id), user.full_name, bool(user.is_bot)),
                data=query.data,
                message_id=str(message.message_id) if message is not None else None,
                answer=answer,
            )
        )

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.error("telegram handler failed: %s", context.error, exc_info=context.error)

    # -- sending --------------------------------------------------------------------------

    async def send(self, place: Place, markdown: str, *, buttons: list[Button] | None = None) -> str:
        sent = await send_text(self.bot, _target(place), markdown, reply_markup=_keyboard(buttons))
        return str(sent.message_id)

    async def edit(self, place: Place, message_id: str, markdown: str, *, buttons: list[Button] | None = None) -> None:
        await edit_text(self.bot, _target(place), int(message_id), markdown, reply_markup=_keyboard(buttons))

    async def draft(self, place: Place, message_id: str | None, text: str) -> str:
        """A streaming draft goes as plain text (half-written Markdown would render oddly)."""
        target = _target(place)
        if message_id is None:
            sent = await self.bot.send_message(text=text[:LIMIT], **target.kwargs())
            return str(sent.message_id)
        await edit_text(self.bot, target, int(message_id), text, html=False)
        return message_id

    async def send_file(self, place: Place, name: str, data: bytes, mime: str, caption: str = "") -> str:
        target = _target(place)
        if mime in ("audio/ogg", "audio/opus"):
            sent = await self.bot.send_voice(voice=data, filename=name, caption=caption[:1024] or None, **target.kwargs())
        else:
            sent = await self.bot.send_document(document=data, filename=name, caption=caption[:1024] or None, **target.kwargs())
        return str(sent.message_id)

    async def typing(self, place: Place) -> None:
        try:
            await self.bot.send_chat_action(action=ChatAction.TYPING, **_target(place).kwargs())
        except TelegramError:
            pass

    def split(self, markdown: str) -> list[str]:
        return fit_chunks(markdown)
