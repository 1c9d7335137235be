"""Discord through discord.py: the Gateway websocket in, the REST API out.

Places: a DM is the direct place ``@<user id>`` (so a DM can be opened to anyone by id, even
before they wrote); a server channel is its channel id; a thread (a channel of its own in
Discord) is ``Place.thread`` under its parent channel, one conversation per thread. In server
channels and threads the bot is addressed only by a mention (``<@bot>``, removed from the
text) or a reply to one of its messages.

Quirks the code below handles:

- Discord's Markdown is its own: ``__x__`` underlines, only ``#``..``###`` headings, no tables
  (``to_discord`` converts). It never refuses markup, so there is no plain-text retry; a
  rendering that would pass 2000 characters goes as the Markdown it came from.
- A button press must be acknowledged within 3 seconds or the presser sees "This interaction
  failed": a press nobody answers in time is acknowledged silently, and a later answer goes as
  an ephemeral follow-up.
- Mentions in what the bot sends never ping anyone (``allowed_mentions`` is empty): a model that
  writes ``@everyone`` does not notify a server.
- Rate limits: discord.py paces requests by Discord's buckets and waits out a 429 for as long as
  Discord says, up to ``MAX_RATE_LIMIT_WAIT``; a longer wait fails the call at once. Edits of
  one message are kept ``limits.edit_interval`` apart here as well.
- discord.py reads the REST base (``discord.http.Route.BASE``) and the Gateway address
  (``DiscordWebSocket.DEFAULT_GATEWAY``) from class attributes: ``[discord] api_base_url`` and
  ``gateway_url`` set them for the whole process, so one gateway process talks to one Discord.
"""

from __future__ import annotations

import asyncio
import io
import logging
import mimetypes
import re
import time
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import MultipartParameters, Route, handle_message_parameters
from discord.utils import MISSING

from core.config import Config
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

__all__ = ["DEFAULT_API", "DEFAULT_GATEWAY", "LIMIT", "DiscordError", "DiscordPlatform", "to_discord"]

log = logging.getLogger(__name__)

DEFAULT_API = "https://discord.com/api/v10"
DEFAULT_GATEWAY = "wss://gateway.discord.gg/"
LIMIT = 2000  # characters in one message's content
# Seconds before a rejected token is tried again: only a new token (and a restart) helps.
REJECTED_TOKEN_RETRY = 300.0
CONNECT_TIMEOUT = 60.0
# Discord fails an interaction that is not acknowledged within 3 s.
ACK_DEADLINE = 2.5
# The longest 429 wait that is waited out (discord.py's smallest allowed bound).
MAX_RATE_LIMIT_WAIT = 30.0
_BUTTONS_PER_ROW = 5
_ROWS = 5
_REMEMBERED = 2000  # message ids kept for "is this a reply to the bot" and edit pacing
_GATEWAY_CLOSES = {
    4004: "Discord rejected the bot token when connecting to the gateway (4004 Authentication failed)",
    4010: "Discord refused the shard settings (4010)",
    4011: "this bot is in too many servers for one connection (4011 Sharding required)",
    4012: "Discord refused the gateway API version (4012)",
    4013: "Discord refused the gateway intents (4013 Invalid intents)",
}


class DiscordError(Exception):
    """Discord refused a request; the message names the channel and what to do."""


class _Client(discord.Client):
    """discord.Client whose events go to the handlers it is given."""

    def __init__(self, handlers: dict[str, Any], **options: Any) -> None:
        super().__init__(**options)
        self._forward = handlers

    async def on_ready(self) -> None:
        await self._forward["ready"]()

    async def on_disconnect(self) -> None:
        await self._forward["disconnect"]()

    async def on_message(self, message: discord.Message) -> None:
        await self._forward["message"](message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self._forward["interaction"](interaction)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        log.exception("discord: handling %s failed", event_method)


class DiscordPlatform(Platform):
    name = "discord"

    def __init__(self, config: Config) -> None:
        super().__init__()
        cfg = config.discord
        if cfg.token is None:
            raise PlatformConfigError(
                "[discord] token is not set: copy the bot token from the Developer Portal (your application → Bot → Reset Token) "
                "into [discord] token in config.toml or the DISCORD_BOT_TOKEN environment variable"
            )
        self._token = cfg.token
        self._api = (cfg.api_base_url or DEFAULT_API).rstrip("/")
        self._gateway = cfg.gateway_url
        self.limits = Limits(text=LIMIT, edit_interval=cfg.edit_interval)
        self._client: _Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._events: Events | None = None
        self._receiving = False  # new messages are delivered (presses are, until stop)
        self._ready = asyncio.Event()
        self._lost = asyncio.Event()  # the connection dropped before it was ever ready
        self._dm_channels: dict[str, str] = {}  # user id -> DM channel id
        self._thread_parents: dict[int, int | None] = {}  # channel id -> parent channel id when it is a thread
        self._sent: dict[int, None] = {}  # ids of messages the bot sent, oldest first
        self._edited: dict[str, float] = {}  # message id -> monotonic time of its last edit
        self._acks: set[asyncio.Task[None]] = set()

    # -- connecting -----------------------------------------------------------------------

    async def start(self, events: Events) -> None:
        await self.stop()  # a retried start begins from nothing
        self._events = events
        self._receiving = True
        self._ready = asyncio.Event()
        self._lost = asyncio.Event()
        Route.BASE = self._api  # process-wide in discord.py (see the module's docstring)
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False  # the bot never joins voice channels
        intents = discord.Intents.none()
        intents.guilds = intents.guild_messages = intents.dm_messages = intents.message_content = True
        client = _Client(
            {"ready": self._on_ready, "disconnect": self._on_disconnect, "message": self._on_message, "interaction": self._on_interaction},
            intents=intents,
            max_messages=None,
            chunk_guilds_at_startup=False,
            max_ratelimit_timeout=MAX_RATE_LIMIT_WAIT,
            allowed_mentions=discord.AllowedMentions.none(),
        )
        self._client = client
        try:
            await client.login(self._token.get_secret_value())
            DiscordWebSocket.DEFAULT_GATEWAY = await self._gateway_url(client)
        except BaseException as exc:
            await self.stop()
            if isinstance(exc, Exception):
                log.debug("discord: login failed", exc_info=True)
                raise self._login_down(exc) from None
            raise
        self._runner = asyncio.create_task(client.connect(reconnect=True), name="discord-gateway")
        await self._wait_connected(self._runner)
        self._runner.add_done_callback(self._ended)
        user = client.user
        self.account = str(user) if user is not None else ""
        log.info("discord: connected as %s", self.account)

    async def _gateway_url(self, client: discord.Client) -> yarl.URL:
        """``gateway_url`` when set; else the one the API gives (a non-default API), else Discord's."""
        if self._gateway:
            return yarl.URL(self._gateway)
        if self._api != DEFAULT_API:
            _, url, _ = await client.http.get_bot_gateway()
            return yarl.URL(url)
        return yarl.URL(DEFAULT_GATEWAY)

    def _login_down(self, exc: Exception) -> PlatformDown:
        host = urlsplit(self._api).netloc
        if isinstance(exc, discord.LoginFailure):
            return PlatformDown(
                "Discord rejected the bot token (401 Unauthorized): copy a new one from the Developer Portal "
                "(your application → Bot → Reset Token) into [discord] token or DISCORD_BOT_TOKEN, then restart the gateway",
                REJECTED_TOKEN_RETRY,
            )
        if isinstance(exc, discord.GatewayNotFound):
            return PlatformDown(f"Discord at {host} did not say where its gateway is (GET /gateway/bot failed); set [discord] gateway_url")
        if isinstance(exc, discord.RateLimited):
            return PlatformDown(f"Discord asks to wait {exc.retry_after:.0f}s before logging in again (rate limited)", exc.retry_after)
        if isinstance(exc, discord.HTTPException):
            return PlatformDown(f"Discord at {host} answered {exc.status} when logging in: {exc.text or 'no detail'}")
        if isinstance(exc, (TimeoutError, aiohttp.ClientError, OSError)):
            return PlatformDown(f"cannot reach Discord's API at {host} ({type(exc).__name__}); check the network or [discord] api_base_url")
        return PlatformDown(f"logging in to Discord failed ({type(exc).__name__})")

    async def _wait_connected(self, runner: asyncio.Task[None]) -> None:
        """Until READY arrived (and the servers with it); PlatformDown when the Gateway refuses or is unreachable."""
        ready = asyncio.create_task(self._ready.wait())
        lost = asyncio.create_task(self._lost.wait())
        try:
            await asyncio.wait({ready, lost, runner}, timeout=CONNECT_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
            if self._ready.is_set():
                return
            if not runner.done():
                # A dropped first connection: let discord.py finish with its reason (a close code) if it has one.
                await asyncio.wait({runner}, timeout=2.0)
            down = self._gateway_down(runner)
        finally:
            ready.cancel()
            lost.cancel()
        await self.stop()
        raise down

    def _gateway_down(self, runner: asyncio.Task[None]) -> PlatformDown:
        where = str(DiscordWebSocket.DEFAULT_GATEWAY.with_query(None))
        exc = runner.exception() if runner.done() and not runner.cancelled() else None
        if isinstance(exc, discord.PrivilegedIntentsRequired):
            return PlatformDown(
                "Discord refused the Message Content intent (4014): turn on MESSAGE CONTENT INTENT in the Developer Portal "
                "(your application → Bot → Privileged Gateway Intents), then restart the gateway",
                REJECTED_TOKEN_RETRY,
            )
        if isinstance(exc, discord.ConnectionClosed) and exc.code in _GATEWAY_CLOSES:
            retry = REJECTED_TOKEN_RETRY if exc.code == 4004 else None
            return PlatformDown(_GATEWAY_CLOSES[exc.code], retry)
        if exc is not None:
            return PlatformDown(f"cannot connect to Discord's gateway at {where} ({type(exc).__name__})")
        if self._lost.is_set():
            return PlatformDown(f"cannot connect to Discord's gateway at {where}; check the network or [discord] gateway_url")
        return PlatformDown(f"Discord's gateway at {where} did not get ready within {CONNECT_TIMEOUT:.0f}s")

    def _ended(self, runner: asyncio.Task[None]) -> None:
        """discord.py reconnects by itself; it gives up only on what a restart must fix (a revoked token)."""
        if runner.cancelled() or self._runner is not runner:
            return
        exc = runner.exception()
        if exc is not None:
            down = self._gateway_down(runner)
            log.error("discord: the gateway connection ended: %s", down.why)

    async def _on_ready(self) -> None:
        self._ready.set()

    async def _on_disconnect(self) -> None:
        if not self._ready.is_set():
            self._lost.set()
        else:
            log.info("discord: the gateway connection dropped; discord.py reconnects")

    async def stop_receiving(self) -> None:
        """No new messages (the first step of a graceful shutdown). Sending still works, and button
        presses still arrive, so a turn in flight can be approved and finish."""
        self._receiving = False

    async def stop(self) -> None:
        self._receiving = False
        client, self._client = self._client, None
        runner, self._runner = self._runner, None
        for task in list(self._acks):
            task.cancel()
        self._acks.clear()
        if client is not None:
            try:
                await client.close()
            except Exception as exc:
                log.debug("discord: closing the client failed: %s", exc, exc_info=True)
        if runner is not None:
            if not runner.done():
                runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)

    # -- receiving ------------------------------------------------------------------------

    def _me(self) -> discord.ClientUser | None:
        return self._client.user if self._client is not None else None

    async def _on_message(self, message: discord.Message) -> None:
        me = self._me()
        if me is None or self._events is None or not self._receiving or message.author.id == me.id:
            return
        if message.type not in (discord.MessageType.default, discord.MessageType.reply):
            return  # joins, pins, "started a thread" and other system messages
        direct = message.guild is None
        mention = re.compile(rf"<@!?{me.id}>")
        raw = message.content or ""
        addressed = direct or bool(mention.search(raw)) or self._replies_to_me(message, me.id)
        text = mention.sub(" ", raw)
        for user in message.mentions:  # other people's mentions read as names, not ids
            if user.id != me.id:
                text = re.sub(rf"<@!?{user.id}>", f"@{user.display_name}", text)
        incoming = Incoming(
            place=await self._place(message.channel, message.author.id, direct),
            sender=Sender(identity(self.name, message.author.id), message.author.display_name, message.author.bot),
            text=re.sub(r"[ \t]{2,}", " ", text).strip(),
            addressed=addressed,
            attachments=[_attachment(a, message.flags.voice) for a in message.attachments],
            message_id=str(message.id),
        )
        await self._events.message(incoming)

    def _replies_to_me(self, message: discord.Message, my_id: int) -> bool:
        reference = message.reference
        if reference is None:
            return False
        resolved = reference.resolved
        if isinstance(resolved, discord.Message):
            return resolved.author.id == my_id
        return reference.message_id in self._sent

    async def _place(self, channel: Any, user_id: int, direct: bool) -> Place:
        """The place of a channel: ``@user`` for a DM, the channel, or a thread under its parent."""
        if direct:
            self._dm_channels[str(user_id)] = str(channel.id)
            return Place(self.name, f"@{user_id}", None, direct=True)
        parent = await self._thread_parent(channel)
        if parent is not None:
            return Place(self.name, str(parent), str(channel.id))
        return Place(self.name, str(channel.id))

    async def _thread_parent(self, channel: Any) -> int | None:
        if isinstance(channel, discord.Thread):
            return channel.parent_id
        if not isinstance(channel, discord.PartialMessageable) or self._client is None:
            return None
        # A channel the cache does not know (a thread created while disconnected): ask once.
        if channel.id not in self._thread_parents:
            try:
                fetched = await self._client.fetch_channel(channel.id)
            except discord.HTTPException as exc:
                log.warning("discord: cannot look up channel %s (%s); treating it as a channel", channel.id, exc.status)
                return None
            self._thread_parents[channel.id] = fetched.parent_id if isinstance(fetched, discord.Thread) else None
        return self._thread_parents[channel.id]

    async def _on_interaction(self, interaction: discord.Interaction) -> None:
        if interaction.type is not discord.InteractionType.component or self._events is None:
            return
        data: dict[str, Any] = dict(interaction.data or {})
        custom_id = data.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id:
            return
        user = interaction.user
        channel = interaction.channel
        if interaction.guild_id is None:
            place = Place(self.name, f"@{user.id}", None, direct=True)
            if interaction.channel_id is not None:
                self._dm_channels[str(user.id)] = str(interaction.channel_id)
        elif channel is not None:
            place = await self._place(channel, user.id, False)
        else:
            place = Place(self.name, str(interaction.channel_id))
        lock = asyncio.Lock()

        async def answer(text: str, alert: bool) -> None:
            """An alert is an ephemeral message only the presser sees; anything else just acknowledges
            the press (the conversation layer edits the message to show the outcome)."""
            async with lock:
                try:
                    if not interaction.response.is_done():
                        if alert and text:
                            await interaction.response.send_message(text[:LIMIT], ephemeral=True)
                        else:
                            await interaction.response.defer()
                    elif alert and text:
                        await interaction.followup.send(text[:LIMIT], ephemeral=True)
                except discord.HTTPException as exc:
                    log.warning("discord: could not answer a button press (%s %s)", exc.status, exc.text)
                except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                    log.warning("discord: could not answer a button press (%s)", type(exc).__name__)

        async def acknowledge_late() -> None:
            await asyncio.sleep(ACK_DEADLINE)
            async with lock:
                if not interaction.response.is_done():
                    try:
                        await interaction.response.defer()
                    except (discord.HTTPException, TimeoutError, aiohttp.ClientError, OSError) as exc:
                        log.debug("discord: late acknowledgement failed (%s)", type(exc).__name__)

        ack = asyncio.create_task(acknowledge_late())
        self._acks.add(ack)
        ack.add_done_callback(self._acks.discard)
        message = interaction.message
        await self._events.press(
            Press(
                place=place,
                sender=Sender(identity(self.name, user.id), user.display_name, user.bot),
                data=custom_id,
                message_id=str(message.id) if message is not None else None,
                answer=answer,
            )
        )

    # -- sending --------------------------------------------------------------------------

    def _http(self) -> discord.http.HTTPClient:
        if self._client is None:
            raise DiscordError("Discord is not connected: the gateway is starting or has stopped")
        return self._client.http

    async def _channel(self, place: Place) -> str:
        """The channel id to post to: the thread, the channel, or the DM (opened on first use)."""
        if place.thread:
            return place.thread
        if not place.chat.startswith("@"):
            return place.chat
        user_id = place.chat[1:]
        if user_id not in self._dm_channels:
            data = await self._call(self._http().start_private_message(int(user_id)), f"a DM with user {user_id}")
            self._dm_channels[user_id] = str(data["id"])
        return self._dm_channels[user_id]

    async def _call(self, request: Any, what: str) -> Any:
        """Await a discord.py request; Discord's refusals become errors that say what to do."""
        try:
            return await request
        except discord.Forbidden as exc:
            raise DiscordError(
                f"Discord does not let the bot write to {what} (403: {exc.text or 'Missing Permissions'}): give the bot's role "
                "View Channel, Send Messages and Send Messages in Threads there, or a DM user must share a server with the bot"
            ) from None
        except discord.NotFound as exc:
            raise DiscordError(f"Discord does not know {what} (404: {exc.text or 'not found'}); it was deleted or the bot left") from None
        except discord.RateLimited as exc:
            raise DiscordError(f"Discord rate-limits {what} for {exc.retry_after:.0f}s more; try again later") from None
        except discord.HTTPException as exc:
            raise DiscordError(f"Discord refused a request for {what} ({exc.status}: {exc.text or 'no detail'})") from None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise DiscordError(f"cannot reach Discord for {what} ({type(exc).__name__})") from None

    def _remember(self, message_id: int) -> None:
        self._sent[message_id] = None
        while len(self._sent) > _REMEMBERED:
            del self._sent[next(iter(self._sent))]

    async def send(self, place: Place, markdown: str, *, buttons: list[Button] | None = None) -> str:
        channel = await self._channel(place)
        payload: dict[str, Any] = {"content": _content(markdown), "allowed_mentions": {"parse": []}}
        if buttons:
            payload["components"] = _components(buttons)
        data = await self._call(self._http().send_message(channel, params=MultipartParameters(payload, None, None)), f"channel {channel}")
        self._remember(int(data["id"]))
        return str(data["id"])

    async def edit(self, place: Place, message_id: str, markdown: str, *, buttons: list[Button] | None = None) -> None:
        channel = await self._channel(place)
        last = self._edited.get(message_id)
        if last is not None and (wait := last + self.limits.edit_interval - time.monotonic()) > 0:
            await asyncio.sleep(wait)
        payload = {"content": _content(markdown), "components": _components(buttons or []), "allowed_mentions": {"parse": []}}
        await self._call(
            self._http().edit_message(channel, message_id, params=MultipartParameters(payload, None, None)),
            f"message {message_id} in channel {channel}",
        )
        self._edited.pop(message_id, None)
        self._edited[message_id] = time.monotonic()
        while len(self._edited) > _REMEMBERED:
            del self._edited[next(iter(self._edited))]

    async def send_file(self, place: Place, name: str, data: bytes, mime: str, caption: str = "") -> str:
        channel = await self._channel(place)
        file = discord.File(io.BytesIO(data), filename=name)
        params = handle_message_parameters(
            content=_content(caption) if caption.strip() else MISSING, file=file, allowed_mentions=discord.AllowedMentions.none()
        )
        with params:
            sent = await self._call(self._http().send_message(channel, params=params), f"a file upload to channel {channel}")
        self._remember(int(sent["id"]))
        return str(sent["id"])

    async def typing(self, place: Place) -> None:
        try:
            await self._http().send_typing(await self._channel(place))
        except (DiscordError, discord.HTTPException, aiohttp.ClientError, OSError):
            pass  # only a hint; the reply still comes

    def split(self, markdown: str) -> list[str]:
        """Chunks whose rendering fits 2000 characters with room for the "(2/3)" label."""
        out: list[str] = []
        todo = split_markdown(markdown, limit=LIMIT)
        while todo:
            chunk = todo.pop(0)
            size = len(to_discord(chunk)) + 16
            if size <= LIMIT or len(chunk) <= 256:
                out.append(chunk)
                continue
            todo[:0] = split_markdown(chunk, limit=max(256, int(len(chunk) * LIMIT / size) - 64))
        return out

    def place_for(self, chat: str, thread: str | None = None) -> Place:
        return Place(self.name, chat, thread, direct=chat.startswith("@"))

    def direct_place(self, native_user_id: str) -> Place | None:
        return Place(self.name, f"@{native_user_id}", None, direct=True)


def _attachment(attachment: discord.Attachment, voice_message: bool) -> Attachment:
    mime = (attachment.content_type or mimetypes.guess_type(attachment.filename)[0] or "application/octet-stream").split(";")[0].strip()
    voice = voice_message or attachment.is_voice_message() or mime == "audio/ogg"
    return Attachment(attachment.filename, mime, attachment.size, attachment.read, voice=voice)


def _components(buttons: list[Button]) -> list[dict[str, Any]]:
    """Buttons as message components: action rows of up to five buttons each."""
    rows = []
    for start in range(0, min(len(buttons), _BUTTONS_PER_ROW * _ROWS), _BUTTONS_PER_ROW):
        row = buttons[start : start + _BUTTONS_PER_ROW]
        rows.append({"type": 1, "components": [{"type": 2, "style": 1, "label": b.label[:80], "custom_id": b.data} for b in row]})
    return rows


def _content(markdown: str) -> str:
    """What goes in a message: Discord's Markdown, or the Markdown itself when the rendering is too long."""
    rendered = to_discord(markdown)
    if len(rendered) <= LIMIT:
        return rendered
    return markdown if len(markdown) <= LIMIT else markdown[: LIMIT - 1] + "…"


_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+#.-]*)\s*$")
_DEEP_HEADING = re.compile(r"^\s{0,3}#{4,6}\s+(.*?)\s*#*\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_UNDERSCORE_BOLD = re.compile(r"(?<![\w_])__(?=\S)([^_\n]+?)(?<=\S)__(?![\w_])")
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\((\S+?)\)")
_INLINE_CODE = re.compile(r"(`+)[^`\n]*?\1")


def to_discord(markdown: str) -> str:
    """Model Markdown as Discord shows it: deep headings bold, ``__bold__`` as ``**bold**`` (Discord
    underlines ``__``), tables in a code block, images as links, rules as a line, and a code fence
    left open (a reply still streaming) closed."""
    out: list[str] = []
    fence: str | None = None
    table: list[str] = []

    def flush_table() -> None:
        if table:
            out.extend(["```", *table, "```"])
            table.clear()

    for line in markdown.split("\n"):
        match = _FENCE.match(line)
        if fence is not None:
            if match and match.group(1)[0] == fence[0] and not match.group(2):
                fence = None
                out.append("```")  # Discord knows only backtick fences
            else:
                out.append(line)
            continue
        if match:
            flush_table()
            fence = match.group(1)
            out.append(f"```{match.group(2)}")
            continue
        if _TABLE_ROW.match(line):
            table.append(line.strip())
            continue
        flush_table()
        if heading := _DEEP_HEADING.match(line):
            out.append(f"**{_inline(heading.group(1))}**")
        elif _RULE.match(line):
            out.append("───")
        else:
            out.append(_inline(line))
    flush_table()
    if fence is not None:
        out.append("```")
    return "\n".join(out)


def _image(match: re.Match[str]) -> str:
    return f"[{match.group(1)}]({match.group(2)})" if match.group(1) else match.group(2)


def _inline(line: str) -> str:
    """Inline conversions outside `code spans`."""
    pieces: list[str] = []
    pos = 0
    for code in _INLINE_CODE.finditer(line):
        pieces.append(_IMAGE.sub(_image, _UNDERSCORE_BOLD.sub(r"**\1**", line[pos : code.start()])))
        pieces.append(code.group(0))
        pos = code.end()
    pieces.append(_IMAGE.sub(_image, _UNDERSCORE_BOLD.sub(r"**\1**", line[pos:])))
    return "".join(pieces)
