"""Slack: a Bolt app (slack-bolt's ``AsyncApp``) over Socket Mode, or over the Events API as an option.

Socket Mode (the default) needs nothing exposed: the app-level token (``xapp-``) opens a
websocket with ``apps.connections.open`` and Slack pushes events through it; every envelope is
acked by Bolt. The Events API mode instead listens on ``events_listen:events_port`` at
``events_path`` for Slack's signed requests (``X-Slack-Signature``, ``X-Slack-Request-Timestamp``,
five minutes of clock skew at most); a request that fails the check gets 401 and goes no further.

Slack's quirks, and what this adapter does about them:

- Places. A DM's place is keyed by the *user* id (``slack:U123:0``), not the DM channel id, so
  the owner's direct place (remote approvals, cron) is the same conversation as their DMs; the DM
  channel (``D...``) is learned from events or opened with ``conversations.open``. In channels a
  thread is the conversation: a mention at the top level is answered in a thread under it
  (``Place.thread`` = the thread's ``thread_ts``, or the mention's own ``ts``).
- Addressing. In channels the bot answers mentions and messages in threads it is already in
  (threads it wrote in since it started, or whose first message is its own); Slack sends a
  mention twice (a ``message`` and an ``app_mention`` event for the same ``ts``), so each message
  is delivered once. Its own messages (``bot_id``), edits (``message_changed``) and other
  subtypes are ignored.
- Commands. Slack's message box takes a leading ``/`` as a slash command, so ``/new`` is
  written ``@hermes /new`` in a channel, `` /new`` (a space first) in a DM, or through the app's
  slash command (``/hermes new``, configured as ``[slack] slash_command``) in the DM.
- Text. Markdown is rendered to mrkdwn (``*bold*``, ``_italic_``, ``~strike~``, code,
  ``<url|label>``; ``&``, ``<`` and ``>`` escaped). A message with buttons carries its text in
  section blocks (3000 characters each) and an actions block; when Slack refuses the blocks,
  the message goes again as plain text. ``limits.text`` is 3900 (Slack asks for at most 4000).
- Edits (streaming) use ``chat.update``, which Slack rate-limits to about one a second per
  message: edits of one message are spaced ``limits.edit_interval`` apart (at least 1.2 s), and
  an answer of 429 is retried once after its ``Retry-After`` (at most 30 s).
- Buttons are Block Kit buttons whose ``value`` is ``Button.data``; a press is acked at once
  and ``Press.answer`` is an ephemeral message (``chat.postEphemeral``) to the presser alone.
- Files come as ``file_share`` messages and are downloaded from ``url_private_download`` with
  the bot token (sent only to Slack's own hosts); audio clips recorded in Slack are voice notes.
  Uploads go through ``files_upload_v2``; Slack says nothing about the message it makes, so
  ``send_file`` returns the file id.
- Slack shows no typing indicator for bots in chats, so ``typing`` does nothing.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler, AsyncRateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

from hermes_gateway.platform import (
    Attachment,
    Button,
    Events,
    Incoming,
    Limits,
    Place,
    Platform,
    PlatformConfigError,
    PlatformDown,
    Press,
    Sender,
    identity,
)
from hermes_gateway.render import split_markdown

if TYPE_CHECKING:
    from core.config import Config

__all__ = ["SlackError", "SlackPlatform", "from_slack_text", "to_mrkdwn"]

log = logging.getLogger(__name__)

TEXT_LIMIT = 3900  # Slack asks for at most 4000 characters in a message's text
SECTION_LIMIT = 3000  # a section block's text
MIN_EDIT_INTERVAL = 1.2  # chat.update: about one a second per message
RETRY_AFTER_CAP = 30.0
CONNECT_TIMEOUT = 20.0
_REMEMBERED = 10_000  # threads, message ids and edit times kept in memory
_AUTH_ERRORS = {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive", "no_permission"}
_MARKUP_REFUSED = {"invalid_blocks", "invalid_blocks_format", "msg_too_long", "markdown_text_conflict"}
_HINTS = {
    "not_in_channel": "the bot is not in that channel: invite it there (/invite @{bot})",
    "channel_not_found": "Slack does not know that channel or the bot cannot see it: invite the bot there (/invite @{bot})",
    "is_archived": "the channel is archived",
    "restricted_action": "the workspace does not let the bot post there",
    "missing_scope": "the app lacks the scope {needed}: add it under OAuth & Permissions, then reinstall the app",
    "ratelimited": "Slack is rate limiting the bot; it is tried again later",
    "message_not_found": "the message is gone (deleted in Slack)",
    "cant_update_message": "the message is not the bot's own",
    "msg_too_long": "the message is longer than Slack takes",
    "invalid_blocks": "Slack refused the message's blocks",
}


class SlackError(Exception):
    """A Web API call Slack refused; the message names the method, Slack's error and what to do."""

    def __init__(self, method: str, error: str, hint: str) -> None:
        super().__init__(f"Slack refused {method} ({error}): {hint}")
        self.method = method
        self.error = error


class _RetryOnceAfter(AsyncRateLimitErrorRetryHandler):
    """One retry of an answer of 429, after Slack's ``Retry-After`` (capped, so a turn never hangs)."""

    def __init__(self) -> None:
        super().__init__(max_retry_count=1)

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        if response is None:
            raise error or RuntimeError("rate limited without a response")
        state.next_attempt_requested = True
        value: Any = next((v for k, v in response.headers.items() if k.lower() == "retry-after"), "1")
        if isinstance(value, list):
            value = value[0] if value else "1"
        try:
            delay = float(value)
        except (TypeError, ValueError):
            delay = 1.0
        await asyncio.sleep(min(max(delay, 0.0), RETRY_AFTER_CAP))
        state.increment_current_attempt()


class _Recent:
    """A bounded set that forgets its oldest entries."""

    def __init__(self, size: int = _REMEMBERED) -> None:
        self._items: collections.OrderedDict[Any, None] = collections.OrderedDict()
        self._size = size

    def add(self, item: Any) -> bool:
        """Add ``item``; False when it was already there."""
        if item in self._items:
            self._items.move_to_end(item)
            return False
        self._items[item] = None
        if len(self._items) > self._size:
            self._items.popitem(last=False)
        return True

    def __contains__(self, item: Any) -> bool:
        return item in self._items


class SlackPlatform(Platform):
    """Slack through Bolt: Socket Mode or the Events API, the Web API for everything sent."""

    name = "slack"

    def __init__(self, config: Config) -> None:
        super().__init__()
        section = config.slack
        if section.bot_token is None:
            raise PlatformConfigError("[slack] bot_token is not set: copy the Bot User OAuth Token (xoxb-...) or export SLACK_BOT_TOKEN")
        self._bot_token = section.bot_token.get_secret_value().strip()
        if self._bot_token.startswith("xapp-"):
            raise PlatformConfigError("[slack] bot_token is an app-level token (xapp-...): put it in app_token and the xoxb-... token here")
        self._mode = section.mode
        self._app_token = section.app_token.get_secret_value().strip() if section.app_token else ""
        self._signing_secret = section.signing_secret.get_secret_value().strip() if section.signing_secret else ""
        if self._mode == "socket" and not self._app_token:
            raise PlatformConfigError(
                '[slack] mode = "socket" needs app_token: an app-level token (xapp-...) with connections:write, '
                'or export SLACK_APP_TOKEN; or set mode = "events" with a signing_secret'
            )
        if self._mode == "socket" and not self._app_token.startswith("xapp-"):
            raise PlatformConfigError("[slack] app_token must be an app-level token (xapp-...), made under Basic Information")
        if self._mode == "events" and not self._signing_secret:
            raise PlatformConfigError(
                '[slack] mode = "events" needs signing_secret (Basic Information > Signing Secret) or SLACK_SIGNING_SECRET'
            )
        self._base_url = section.api_base_url or "https://slack.com/api/"
        self._events_listen = section.events_listen
        self._events_port = section.events_port
        self._events_path = section.events_path
        self._slash_command = section.slash_command
        self.limits = Limits(text=TEXT_LIMIT, edit_interval=max(MIN_EDIT_INTERVAL, section.edit_interval), edits=True, buttons=True)

        self._client: AsyncWebClient | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None
        self._events: Events | None = None
        self._bot_user = ""
        self._bot_id = ""
        self._bot_name = "hermes"
        self._mention: re.Pattern[str] | None = None
        self._dm_channels: dict[str, str] = {}  # user id -> DM channel id
        self._dm_users: dict[str, str] = {}  # DM channel id -> user id
        self._threads = _Recent()  # (channel, thread_ts) the bot is in
        self._seen = _Recent()  # (channel, ts) already delivered
        self._names: dict[str, str] = {}
        self._last_edit: collections.OrderedDict[tuple[str, str], float] = collections.OrderedDict()

    # -- connecting -----------------------------------------------------------------------------

    def _web_client(self, token: str | None) -> AsyncWebClient:
        handlers: list[AsyncRetryHandler] = [_RetryOnceAfter(), AsyncConnectionErrorRetryHandler()]
        return AsyncWebClient(token=token, base_url=self._base_url, retry_handlers=handlers, logger=log)

    async def start(self, events: Events) -> None:
        await self.stop()
        client = self._web_client(self._bot_token)
        auth = await self._check(client.auth_test, "bot_token", "the Bot User OAuth Token (xoxb-...), SLACK_BOT_TOKEN")
        self._bot_user = str(auth.get("user_id") or "")
        self._bot_id = str(auth.get("bot_id") or "")
        self._bot_name = str(auth.get("user") or "hermes")
        self._mention = re.compile(rf"[ \t]*<@{re.escape(self._bot_user)}(?:\|[^>]*)?>[ \t]*")
        self.account = f"@{self._bot_name}"
        self._client = client
        self._events = events
        app = self._bolt_app(client)
        if self._mode == "socket":
            await self._connect_socket(app)
        else:
            await self._listen(app)
        log.info("Slack: connected as @%s (%s mode)", self._bot_name, self._mode)

    async def _check(self, call: Callable[[], Awaitable[Any]], key: str, what: str) -> Any:
        """A first call that proves a credential works, or PlatformDown saying which one and why."""
        try:
            return await call()
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "error")
            if error in _AUTH_ERRORS:
                raise PlatformDown(f"Slack rejected [slack] {key} ({error}): set {what}", retry_after=300.0) from None
            if error == "not_allowed_token_type":
                raise PlatformDown(f"[slack] {key} is the wrong kind of token: set {what}", retry_after=300.0) from None
            raise PlatformDown(f"Slack refused the check of [slack] {key} ({error}): check the app at https://api.slack.com/apps") from None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            where = urlsplit(self._base_url)
            raise PlatformDown(
                f"cannot reach Slack at {where.scheme}://{where.netloc} ({type(exc).__name__}): check the network or [slack] api_base_url"
            ) from None

    def _bolt_app(self, client: AsyncWebClient) -> AsyncApp:
        app = AsyncApp(client=client, signing_secret=self._signing_secret, logger=log, name="hermes-gateway")
        app.event("message")(self._on_message_event)
        app.event("app_mention")(self._on_message_event)
        app.action(re.compile(r"^hermes:"))(self._on_action)
        app.command(self._slash_command)(self._on_command)
        return app

    async def _connect_socket(self, app: AsyncApp) -> None:
        opener = self._web_client(None)
        opened = await self._check(
            lambda: opener.apps_connections_open(app_token=self._app_token),
            "app_token",
            "an app-level token (xapp-...) with the connections:write scope, SLACK_APP_TOKEN",
        )
        handler = AsyncSocketModeHandler(app, self._app_token, logger=log, web_client=opener)
        self._socket = handler
        handler.client.wss_uri = str(opened["url"])
        try:
            await asyncio.wait_for(handler.connect_async(), CONNECT_TIMEOUT)
            connected = await handler.client.is_connected()
        except TimeoutError:
            connected = False
        if not connected:
            await self.stop()
            raise PlatformDown(
                f"Slack's Socket Mode websocket did not connect within {CONNECT_TIMEOUT:.0f} s: check the network (a proxy must let websockets through)"
            )

    async def _listen(self, app: AsyncApp) -> None:
        async def handle(request: web.Request) -> web.Response:
            return await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))

        server = web.Application()
        server.router.add_post(self._events_path, handle)
        runner = web.AppRunner(server, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, self._events_listen, self._events_port).start()
        except OSError as exc:
            await runner.cleanup()
            raise PlatformDown(
                f"cannot listen on {self._events_listen}:{self._events_port} for Slack's Events API ({exc.strerror or exc}): "
                "free the port or set [slack] events_port"
            ) from None
        self._runner = runner

    async def stop(self) -> None:
        self._events = None
        socket, self._socket = self._socket, None
        runner, self._runner = self._runner, None
        self._client = None
        if socket is not None:
            try:
                await socket.close_async()
            except Exception as exc:
                log.debug("Slack: closing the socket: %s", exc)
        if runner is not None:
            await runner.cleanup()

    # -- receiving --------------------------------------------------------------------------------

    async def _on_message_event(self, event: dict[str, Any]) -> None:
        incoming = await self._incoming(event)
        events = self._events
        if incoming is not None and events is not None:
            await events.message(incoming)

    async def _incoming(self, event: dict[str, Any]) -> Incoming | None:
        """The Incoming for a ``message`` or ``app_mention`` event, or None when it is not for us."""
        if event.get("subtype") not in (None, "file_share", "thread_broadcast"):
            return None  # edits, deletions, joins, topic changes, bot_message
        user = str(event.get("user") or "")
        if not user or user == self._bot_user or (self._bot_id and event.get("bot_id") == self._bot_id):
            return None
        channel, ts = str(event.get("channel") or ""), str(event.get("ts") or "")
        if not channel or not ts or not self._seen.add((channel, ts)):
            return None  # a mention comes as two events; a retried envelope comes again
        raw = str(event.get("text") or "")
        thread_ts = event.get("thread_ts") or None
        kind = event.get("channel_type") or ("im" if channel.startswith("D") else "channel")
        if kind == "im":
            self._remember_dm(user, channel)
            place = Place(self.name, user, thread_ts, direct=True)
            addressed = True
        else:
            mentioned = event.get("type") == "app_mention" or f"<@{self._bot_user}" in raw
            in_thread = thread_ts is not None and ((channel, thread_ts) in self._threads or event.get("parent_user_id") == self._bot_user)
            addressed = bool(mentioned or in_thread)
            place = Place(self.name, channel, thread_ts or ts)
            if addressed:
                self._threads.add((channel, place.thread))
        text = from_slack_text(raw, self._mention)
        attachments = [self._attachment(f) for f in event.get("files") or [] if isinstance(f, dict)]
        name = await self._name(user) if addressed else ""
        sender = Sender(identity(self.name, user), name, is_bot=bool(event.get("bot_id")))
        return Incoming(place, sender, text, addressed, attachments, message_id=ts)

    async def _on_action(self, ack: Callable[..., Awaitable[Any]], body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        user = str((body.get("user") or {}).get("id") or "")
        container = body.get("container") or {}
        message = body.get("message") or {}
        channel = str((body.get("channel") or {}).get("id") or container.get("channel_id") or "")
        thread = message.get("thread_ts") or container.get("thread_ts") or None
        if channel.startswith("D"):  # in a DM only its user can press
            place = Place(self.name, self._dm_users.get(channel, user), thread, direct=True)
        else:
            place = Place(self.name, channel, thread)

        async def answer(text: str, alert: bool) -> None:
            await self._ephemeral(channel, user, thread, text, alert)

        name = str((body.get("user") or {}).get("name") or "")
        message_id = container.get("message_ts") or message.get("ts")
        press = Press(place, Sender(identity(self.name, user), name), str(action.get("value") or ""), message_id, answer)
        events = self._events
        if events is not None:
            await events.press(press)

    async def _on_command(self, ack: Callable[..., Awaitable[Any]], command: dict[str, Any]) -> None:
        """``/hermes new`` in the DM is ``/new``; elsewhere Slack gives no thread, so say how instead."""
        channel = str(command.get("channel_id") or "")
        user = str(command.get("user_id") or "")
        words = str(command.get("text") or "").strip().lstrip("/")
        if not channel.startswith("D"):
            await ack(f"In a channel, write `@{self._bot_name} /{words or 'help'}` in the conversation's thread.")
            return
        await ack()
        events = self._events
        if events is None:
            return
        sender = Sender(identity(self.name, user), await self._name(user))
        await events.message(Incoming(Place(self.name, user, None, direct=True), sender, f"/{words or 'help'}", True))

    def _attachment(self, file: dict[str, Any]) -> Attachment:
        mime = str(file.get("mimetype") or "application/octet-stream")
        voice = file.get("subtype") == "slack_audio" or file.get("media_display_type") == "audio" or mime.startswith("audio/")
        name = str(file.get("name") or file.get("title") or file.get("id") or "file")
        size = file.get("size")

        async def fetch() -> bytes:
            return await self._download(file, name, mime)

        return Attachment(name, mime, int(size) if isinstance(size, int) else None, fetch, voice)

    async def _download(self, file: dict[str, Any], name: str, mime: str) -> bytes:
        """A shared file's bytes, fetched with the bot token (needs the files:read scope)."""
        url = file.get("url_private_download") or file.get("url_private")
        if not url and self._client is not None and file.get("id"):  # Slack Connect: "file_access": "check_file_info"
            info = await self._client.files_info(file=str(file["id"]))
            details = info.get("file") or {}
            url = details.get("url_private_download") or details.get("url_private")
        if not url:
            raise SlackError("files.info", "no_url", f"Slack gave no download address for the file {name}")
        if not self._is_slack_host(str(url)):
            raise SlackError("download", "foreign_host", f"the file {name} is not on Slack's servers; the token is not sent there")
        headers = {"Authorization": f"Bearer {self._bot_token}"}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as session:
            async with session.get(str(url), headers=headers) as response:
                if response.status != 200:
                    raise SlackError("download", f"HTTP {response.status}", f"Slack did not hand over the file {name}")
                if response.content_type == "text/html" and not mime.startswith("text/html"):
                    raise SlackError(
                        "download",
                        "sign_in_page",
                        f"Slack sent a sign-in page instead of {name}: add the files:read scope and reinstall the app",
                    )
                return await response.read()

    def _is_slack_host(self, url: str) -> bool:
        target, api = urlsplit(url), urlsplit(self._base_url)
        if (target.scheme, target.netloc) == (api.scheme, api.netloc):
            return True
        host = target.hostname or ""
        return target.scheme == "https" and (host == "slack.com" or host.endswith(".slack.com"))

    async def _name(self, user: str) -> str:
        """The user's display name (users.info, needs users:read); empty when Slack will not say."""
        if user not in self._names and self._client is not None:
            name = ""
            try:
                found = (await self._client.users_info(user=user)).get("user") or {}
                profile = found.get("profile") or {}
                name = str(profile.get("display_name") or found.get("real_name") or found.get("name") or "")
            except (TimeoutError, SlackApiError, aiohttp.ClientError, OSError) as exc:
                log.debug("Slack: no name for %s: %s", user, exc)
            if len(self._names) > _REMEMBERED:
                self._names.clear()
            self._names[user] = name
        return self._names.get(user, "")

    def _remember_dm(self, user: str, channel: str) -> None:
        self._dm_channels[user] = channel
        self._dm_users[channel] = user

    # -- sending -------------------------------------------------------------------------------------

    async def send(self, place: Place, markdown: str, *, buttons: list[Button] | None = None) -> str:
        channel = await self._channel_for(place)
        extra: dict[str, Any] = {"channel": channel, "unfurl_links": False}
        if place.thread:
            extra["thread_ts"] = place.thread
        sent = await self._post("chat.postMessage", markdown, buttons, extra)
        if place.thread:
            self._threads.add((channel, place.thread))
        return str(sent["ts"])

    async def edit(self, place: Place, message_id: str, markdown: str, *, buttons: list[Button] | None = None) -> None:
        channel = await self._channel_for(place)
        await self._pace(channel, message_id)
        await self._post("chat.update", markdown, buttons, {"channel": channel, "ts": message_id}, update=True)

    async def draft(self, place: Place, message_id: str | None, text: str) -> str:
        """A reply being written shows its newest words: when the mrkdwn outgrows ``limits.text``
        (escapes, links), the start is dropped rather than the end."""
        rendered = len(to_mrkdwn(text))
        if rendered > self.limits.text:
            keep = max(0, int(len(text) * self.limits.text / rendered) - 64)
            text = "\u2026" + text[len(text) - keep :]
        return await super().draft(place, message_id, text)

    async def send_file(self, place: Place, name: str, data: bytes, mime: str, caption: str = "") -> str:
        """Upload with ``files_upload_v2`` (Slack works out the type itself); returns the file id."""
        client = self._require_client()
        channel = await self._channel_for(place)
        try:
            done = await client.files_upload_v2(
                channel=channel, thread_ts=place.thread, filename=name, title=name, content=data, initial_comment=to_mrkdwn(caption) or None
            )
        except SlackApiError as exc:
            raise self._error("files.completeUploadExternal", exc) from None
        files = done.get("files") or [{}]
        return str(files[0].get("id") or "")

    async def typing(self, place: Place) -> None:
        """Slack shows no typing indicator for a bot's chat messages: nothing to do."""

    def split(self, markdown: str) -> list[str]:
        """Chunks whose mrkdwn fits ``limits.text``; one that grows past it when rendered (escapes,
        links) is split again, smaller."""
        limit = self.limits.text
        out: list[str] = []
        todo = split_markdown(markdown, limit=limit)
        while todo:
            chunk = todo.pop(0)
            rendered = len(to_mrkdwn(chunk)) + 16  # + the "(12/15)" label
            if rendered <= limit or len(chunk) <= 512:
                out.append(chunk)
                continue
            todo[:0] = split_markdown(chunk, limit=max(512, int(len(chunk) * limit / rendered) - 64))
        return out

    def place_for(self, chat: str, thread: str | None = None) -> Place:
        return Place(self.name, chat, thread, direct=chat[:1] in ("U", "W"))

    def direct_place(self, native_user_id: str) -> Place | None:
        return Place(self.name, native_user_id, None, direct=True)

    def _require_client(self) -> AsyncWebClient:
        if self._client is None:
            raise SlackError("chat.postMessage", "not_connected", "the gateway is not connected to Slack yet")
        return self._client

    async def _channel_for(self, place: Place) -> str:
        """The channel to post in: a DM's place names the user, whose DM channel is opened once."""
        chat = place.chat
        if chat[:1] not in ("U", "W"):
            return chat
        if chat not in self._dm_channels:
            client = self._require_client()
            try:
                opened = await client.conversations_open(users=chat)
            except SlackApiError as exc:
                raise self._error("conversations.open", exc) from None
            self._remember_dm(chat, str((opened.get("channel") or {}).get("id") or ""))
        return self._dm_channels[chat]

    async def _post(self, method: str, markdown: str, buttons: list[Button] | None, extra: dict[str, Any], *, update: bool = False) -> Any:
        """``chat.postMessage`` or ``chat.update`` with mrkdwn; again as plain text when Slack refuses the markup."""
        client = self._require_client()
        call = client.chat_update if update else client.chat_postMessage
        try:
            return await call(**extra, **self._message(markdown, buttons, plain=False, update=update))
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "")
            if error not in _MARKUP_REFUSED:
                raise self._error(method, exc) from None
            log.info("Slack refused the formatted message (%s); sending plain text", error)
        try:
            return await call(**extra, **self._message(markdown, buttons, plain=True, update=update))
        except SlackApiError as exc:
            raise self._error(method, exc) from None

    def _message(self, markdown: str, buttons: list[Button] | None, *, plain: bool, update: bool) -> dict[str, Any]:
        """``text`` (and ``blocks`` when there are buttons; ``[]`` on an update removes them)."""
        limit = self.limits.text
        text = (_escape(markdown) if plain else to_mrkdwn(markdown))[:limit]
        if not text.strip():
            text = "\u2026"
        args: dict[str, Any] = {"text": text}
        if plain:
            args["mrkdwn"] = False
        blocks: list[dict[str, Any]] = []
        if buttons:
            body = markdown[:limit] if plain else text
            kind = "plain_text" if plain else "mrkdwn"
            blocks = [{"type": "section", "text": {"type": kind, "text": part}} for part in _sections(body or "\u2026")]
            blocks.append(
                {
                    "type": "actions",
                    "block_id": "hermes-buttons",
                    "elements": [
                        {
                            "type": "button",
                            "action_id": f"hermes:{i}",
                            "text": {"type": "plain_text", "text": b.label[:75]},
                            "value": b.data,
                        }
                        for i, b in enumerate(buttons[:25])
                    ],
                }
            )
        if blocks or update:
            args["blocks"] = blocks
        return args

    async def _pace(self, channel: str, ts: str) -> None:
        """Space edits of one message ``limits.edit_interval`` apart (Slack's per-message rate)."""
        key = (channel, ts)
        last = self._last_edit.get(key)
        if last is not None:
            wait = last + self.limits.edit_interval - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
        self._last_edit[key] = time.monotonic()
        self._last_edit.move_to_end(key)
        while len(self._last_edit) > _REMEMBERED:
            self._last_edit.popitem(last=False)

    async def _ephemeral(self, channel: str, user: str, thread: str | None, text: str, alert: bool) -> None:
        """A message only ``user`` sees (a press's answer); failing to send it is logged, not raised."""
        client = self._client
        if client is None or not text:
            return
        body = f":warning: {to_mrkdwn(text)}" if alert else to_mrkdwn(text)
        try:
            await client.chat_postEphemeral(channel=channel, user=user, text=body, thread_ts=thread)
        except (TimeoutError, SlackApiError, aiohttp.ClientError, OSError) as exc:
            log.warning("Slack: could not answer a button press in %s: %s", channel, exc)

    def _error(self, method: str, exc: SlackApiError) -> SlackError:
        error = str(exc.response.get("error") or "error")
        if error in _AUTH_ERRORS:
            hint = "Slack rejected the bot token: set a valid [slack] bot_token (xoxb-...) and restart the gateway"
        else:
            hint = _HINTS.get(error, "see Slack's documentation of the method").format(
                bot=self._bot_name, needed=exc.response.get("needed") or "it names"
            )
        return SlackError(method, error, hint)


# -- text: Markdown to mrkdwn, Slack's text to plain ----------------------------------------------------

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+#.-]*)\s*$")
_INLINE = re.compile(
    r"(?P<code>`[^`\n]+`)"
    r"|(?P<link>\[(?P<label>[^\]\n]+)\]\((?P<url>(?:https?|mailto):[^)\s]+)\))"
    r"|(?P<bold>\*\*(?P<btext>[^*\n]+?)\*\*|__(?P<btext2>[^_\n]+?)__)"
    r"|(?P<strike>~~(?P<stext>[^~\n]+?)~~)"
    r"|(?P<italic>(?<![\w*])\*(?P<itext>[^*\n]+?)\*(?![\w*])|(?<![\w_])_(?P<itext2>[^_\n]+?)_(?![\w_]))"
)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_QUOTE = re.compile(r"^\s*>\s?(.*)$")
_SLACK_MARKUP = re.compile(r"<([^<>\n]+)>")


def _escape(text: str) -> str:
    """Slack's three escapes, needed in any text it parses."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """Slack mrkdwn for Markdown: bold, italic, strike, code, code blocks, links, headings, lists, quotes."""
    out: list[str] = []
    code: list[str] | None = None
    for line in markdown.split("\n"):
        fence = _FENCE.match(line)
        if fence and code is None:
            code = []
            continue
        if fence and code is not None:
            out.append(_pre(code))
            code = None
            continue
        if code is not None:
            code.append(line)
            continue
        out.append(_block_line(line))
    if code is not None:  # an unclosed fence still renders as code
        out.append(_pre(code))
    return "\n".join(out)


def _pre(lines: list[str]) -> str:
    return "```\n" + _escape("\n".join(lines)) + "\n```"


def _block_line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"*{_inline(heading.group(1).replace('**', '').replace('__', ''))}*"
    quote = _QUOTE.match(line)
    if quote:
        return f"> {_inline(quote.group(1))}"
    bullet = _BULLET.match(line)
    if bullet:
        return f"{bullet.group(1)}• {_inline(bullet.group(2))}"
    return _inline(line)


def _inline(text: str) -> str:
    out: list[str] = []
    pos = 0
    for match in _INLINE.finditer(text):
        out.append(_escape(text[pos : match.start()]))
        pos = match.end()
        if match.group("code"):
            out.append(f"`{_escape(match.group('code')[1:-1])}`")
        elif match.group("link"):
            url = _escape(match.group("url")).replace("|", "%7C")
            label = _escape(match.group("label")).replace("|", "\u2223")
            out.append(f"<{url}|{label}>")
        elif match.group("bold"):
            out.append(f"*{_escape(match.group('btext') or match.group('btext2'))}*")
        elif match.group("strike"):
            out.append(f"~{_escape(match.group('stext'))}~")
        else:
            out.append(f"_{_escape(match.group('itext') or match.group('itext2'))}_")
    out.append(_escape(text[pos:]))
    return "".join(out)


def _sections(text: str) -> list[str]:
    """``text`` in pieces that each fit a section block, cut at line ends where one is near."""
    parts: list[str] = []
    while len(text) > SECTION_LIMIT:
        cut = text.rfind("\n", SECTION_LIMIT // 2, SECTION_LIMIT)
        cut = cut if cut > 0 else SECTION_LIMIT
        parts.append(text[:cut])
        text = text[cut:].lstrip("\n")
    parts.append(text)
    return [p for p in parts if p.strip()] or ["\u2026"]


def from_slack_text(text: str, mention: re.Pattern[str] | None = None) -> str:
    """Plain text from a Slack message: the bot's mention removed, ``<@U1|ada>`` as ``@ada``,
    ``<#C1|general>`` as ``#general``, ``<url|label>`` as ``label (url)``, entities decoded."""
    if mention is not None:
        text = mention.sub(" ", text)

    def plain(match: re.Match[str]) -> str:
        target, _, label = match.group(1).partition("|")
        if target[:1] in ("@", "#"):
            return target[0] + (label or target[1:])
        if target.startswith("!subteam^") or target.startswith("!date^"):
            return label or target
        if target.startswith("!"):
            return "@" + target[1:]
        if target.startswith("mailto:"):
            return label or target[len("mailto:") :]
        if not label or label == target or label == target.split("://", 1)[-1].rstrip("/"):
            return target
        return f"{label} ({target})"

    text = _SLACK_MARKUP.sub(plain, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").strip()
