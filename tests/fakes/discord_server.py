"""A fake Discord on 127.0.0.1: the REST API (v10) and the Gateway websocket, spoken to by the real discord.py.

One aiohttp application serves both, in a background thread with its own event loop:

- REST under ``/api/v10``: ``GET /gateway``, ``/gateway/bot``, ``/users/@me``,
  ``/oauth2/applications/@me``, ``/channels/{id}``; ``POST /channels/{id}/messages`` (JSON, or
  multipart with ``payload_json`` and ``files[n]``), ``PATCH /channels/{id}/messages/{id}``,
  ``POST /channels/{id}/typing``, ``POST /users/@me/channels`` (open a DM),
  ``POST /interactions/{id}/{token}/callback`` and ``POST /webhooks/{app}/{token}`` (follow-ups).
  Every bot route checks ``Authorization: Bot <token>`` (401 otherwise), as Discord does.
- The CDN: ``GET /attachments/{channel}/{id}/{name}`` serves the bytes of attachments users sent.
- The Gateway at ``/gateway``: HELLO, heartbeats and their ACKs, IDENTIFY (a wrong token closes
  with 4004, a privileged intent not enabled for the app with 4014), READY, GUILD_CREATE for one
  server with a text channel and a thread, then the events a test injects (MESSAGE_CREATE,
  THREAD_CREATE, INTERACTION_CREATE). Frames are zlib-stream compressed when the client asks.

Like Discord it refuses content over 2000 characters, empty messages, malformed components and a
second answer to one interaction; it answers 429 with ``retry_after`` when a test asks for it.
Tests inject what users do (a DM, a channel message with or without a mention, a reply to the
bot, a thread message, a file, a button press) and read what the bot sent. The server stops
itself after ``lifetime`` seconds whatever happens.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

__all__ = ["FakeDiscord"]

_DISCORD_EPOCH_MS = 1420070400000
_MESSAGE_CONTENT_INTENT = 1 << 15
_GUILD_MEMBERS_INTENT = 1 << 1
_PRESENCES_INTENT = 1 << 8
_VOICE_MESSAGE_FLAG = 1 << 13
_EPHEMERAL_FLAG = 1 << 6


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer with Discord's exact ``Content-Type`` (discord.py parses nothing else as JSON)."""
    return web.Response(body=json.dumps(body).encode(), status=status, headers={"Content-Type": "application/json", **(headers or {})})


def _error(status: int, code: int, message: str, errors: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"message": message, "code": code}
    if errors:
        body["errors"] = errors
    return _json(body, status=status)


def _form_error(field: str, code: str, message: str) -> web.Response:
    return _error(400, 50035, "Invalid Form Body", {field: {"_errors": [{"code": code, "message": message}]}})


class _Session:
    """One Gateway connection: its websocket, compressor and sequence number."""

    def __init__(self, ws: web.WebSocketResponse, compress: bool) -> None:
        self.ws = ws
        self.compressor = zlib.compressobj() if compress else None
        self.seq = 0
        self.session_id = ""
        self.identified = False

    async def send(self, payload: dict[str, Any]) -> None:
        if payload.get("op") == 0:
            self.seq += 1
            payload = {**payload, "s": self.seq}
        data = json.dumps(payload)
        if self.compressor is not None:
            await self.ws.send_bytes(self.compressor.compress(data.encode()) + self.compressor.flush(zlib.Z_SYNC_FLUSH))
        else:
            await self.ws.send_str(data)


class FakeDiscord:
    """State of the fake: the bot, one server with a channel and a thread, DMs, what the bot sent."""

    def __init__(self, token: str = "MTEwMDAwMDAwMDAwMDAwMDAx.fake.discord-test-token-not-real", *, lifetime: float = 300.0) -> None:
        self.token = token
        self.lifetime = lifetime
        self._ids = itertools.count(1)
        self.bot_id = self.snowflake()
        self.application_id = self.bot_id
        self.username = "hermes"
        self.guild_id = self.snowflake()
        self.channel_id = self.snowflake()  # #general
        self.thread_id = self.snowflake()  # a thread in #general that exists at start
        self.message_content_allowed = True  # the Message Content intent is enabled for the app
        self.users: dict[int, dict[str, Any]] = {}
        self.channels: dict[int, dict[str, Any]] = {
            self.channel_id: self._text_channel(self.channel_id, "general"),
            self.thread_id: self._thread_channel(self.thread_id, "planning"),
        }
        self.dm_channels: dict[int, int] = {}  # user id -> DM channel id
        self.messages: dict[int, dict[str, Any]] = {}  # every message, the bot's and the users', by id
        self.interaction_responses: list[dict[str, Any]] = []
        self.followups: list[dict[str, Any]] = []
        self.typing: list[int] = []
        self.requests: list[tuple[str, str]] = []  # (method, path) of every REST call
        self.identifies: list[dict[str, Any]] = []  # IDENTIFY payloads (token included, for the test to check)
        self.resumes = 0
        self.files: dict[str, bytes] = {}  # CDN path -> bytes
        self.rate_limits: list[tuple[str, float]] = []  # (method + path prefix, retry_after) to answer with 429 once each
        self._interactions: dict[int, dict[str, Any]] = {}
        self._sessions: list[_Session] = []
        self._known_sessions: set[str] = set()
        self._cond = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeDiscord:
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self._serve())
            started.set()
            loop.run_forever()
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="fake-discord", daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the fake Discord server did not start")
        self._timer = threading.Timer(self.lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        return self

    async def _serve(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{path:.+}", self._cdn)
        app.router.add_route("*", "/api/v10/{path:.+}", self._rest)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        if self._timer is not None:
            self._timer.cancel()

        async def shutdown() -> None:
            for session in list(self._sessions):
                await session.ws.close(code=1001, message=b"server going away")
            if self._runner is not None:
                await self._runner.cleanup()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None and self._thread is not threading.current_thread():
                self._thread.join(10)
            with self._cond:
                self._cond.notify_all()

    def __enter__(self) -> FakeDiscord:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def api_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    def config_section(self, **extra: Any) -> str:
        """A ``[discord]`` table pointing the gateway at this fake (``extra`` keys as TOML values)."""
        lines = ["[discord]", f'token = "{self.token}"', f'api_base_url = "{self.api_base_url}"', f'gateway_url = "{self.gateway_url}"']
        lines += [f"{key} = {json.dumps(value)}" for key, value in extra.items()]
        return "\n".join(lines) + "\n"

    # -- shapes ---------------------------------------------------------------------------

    def snowflake(self) -> int:
        """A Discord id: milliseconds since Discord's epoch, shifted, plus a counter."""
        return ((int(time.time() * 1000) - _DISCORD_EPOCH_MS) << 22) | (next(self._ids) & 0xFFF)

    def bot_user(self) -> dict[str, Any]:
        return {
            "id": str(self.bot_id),
            "username": self.username,
            "global_name": None,
            "discriminator": "0",
            "avatar": None,
            "bot": True,
            "verified": True,
            "flags": 0,
            "mfa_enabled": True,
        }

    def user(self, user_id: int, name: str | None = None) -> dict[str, Any]:
        """A person's user object (remembered, so a press or a DM later has the same name)."""
        if user_id == self.bot_id:
            return self.bot_user()
        if user_id not in self.users:
            handle = name or f"user{user_id % 10000}"
            self.users[user_id] = {
                "id": str(user_id),
                "username": handle.lower(),
                "global_name": handle,
                "discriminator": "0",
                "avatar": None,
                "public_flags": 0,
            }
        return self.users[user_id]

    @staticmethod
    def _message(message_id: int, channel_id: int | str, author: dict[str, Any], content: str, **fields: Any) -> dict[str, Any]:
        """A message object as the API and the Gateway send it (``fields`` override the defaults)."""
        return {
            "id": str(message_id),
            "type": 0,
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "flags": 0,
            "components": [],
            **fields,
        }

    def _member(self, user_id: int) -> dict[str, Any]:
        return {"roles": [], "joined_at": _now(), "deaf": False, "mute": False, "flags": 0, "nick": None, "avatar": None}

    def _text_channel(self, channel_id: int, name: str) -> dict[str, Any]:
        return {
            "id": str(channel_id),
            "type": 0,
            "guild_id": str(self.guild_id),
            "name": name,
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
            "topic": None,
            "last_message_id": None,
            "rate_limit_per_user": 0,
        }

    def _thread_channel(self, thread_id: int, name: str, owner_id: int | None = None) -> dict[str, Any]:
        return {
            "id": str(thread_id),
            "type": 11,  # a public thread
            "guild_id": str(self.guild_id),
            "parent_id": str(self.channel_id),
            "owner_id": str(owner_id or self.bot_id),
            "name": name,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "message_count": 0,
            "member_count": 1,
            "total_message_sent": 0,
            "flags": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "archive_timestamp": _now(),
                "locked": False,
                "create_timestamp": _now(),
            },
        }

    def _guild(self) -> dict[str, Any]:
        return {
            "id": str(self.guild_id),
            "name": "Test Server",
            "icon": None,
            "owner_id": str(self.snowflake()),
            "unavailable": False,
            "large": False,
            "member_count": 3,
            "joined_at": _now(),
            "features": [],
            "roles": [
                {
                    "id": str(self.guild_id),
                    "name": "@everyone",
                    "permissions": "1071698660929",
                    "position": 0,
                    "color": 0,
                    "hoist": False,
                    "managed": False,
                    "mentionable": False,
                    "flags": 0,
                }
            ],
            "emojis": [],
            "stickers": [],
            "channels": [c for c in self.channels.values() if c["type"] == 0],
            "threads": [c for c in self.channels.values() if c["type"] == 11],
            "members": [{**self._member(self.bot_id), "user": self.bot_user()}],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "system_channel_flags": 0,
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
        }

    def dm_channel(self, user_id: int) -> int:
        """The id of the DM channel between the bot and a user (made on first use)."""
        with self._cond:
            if user_id not in self.dm_channels:
                channel_id = self.snowflake()
                self.dm_channels[user_id] = channel_id
                self.channels[channel_id] = {
                    "id": str(channel_id),
                    "type": 1,
                    "last_message_id": None,
                    "flags": 0,
                    "recipients": [self.user(user_id)],
                }
            return self.dm_channels[user_id]

    def attachment(self, channel_id: int, name: str, data: bytes, content_type: str, *, voice: bool = False) -> dict[str, Any]:
        """An attachment as Discord shapes it, its bytes served on the fake CDN."""
        attachment_id = self.snowflake()
        path = f"{channel_id}/{attachment_id}/{name}"
        self.files[path] = data
        url = f"http://127.0.0.1:{self.port}/attachments/{path}"
        found: dict[str, Any] = {
            "id": str(attachment_id),
            "filename": name,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
        }
        if voice:
            found |= {"duration_secs": 1.5, "waveform": "AAAA"}
        return found

    # -- what tests do --------------------------------------------------------------------

    def dm(
        self, user_id: int, text: str, *, attachments: list[dict[str, Any]] | None = None, voice: bool = False, name: str | None = None
    ) -> dict[str, Any]:
        """A user writes to the bot in a DM. ``attachments`` from ``attachment(fake.dm_channel(user), ...)``."""
        self.user(user_id, name)
        channel_id = self.dm_channel(user_id)
        return self._user_message(user_id, channel_id, text, guild=False, attachments=attachments, voice=voice, name=name)

    def say(
        self,
        user_id: int,
        text: str,
        *,
        channel_id: int | None = None,
        mention: bool = False,
        reply_to: int | None = None,
        attachments: list[dict[str, Any]] | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        """A user writes in a server channel (#general, or a thread by id); ``mention`` puts
        ``<@bot>`` first as Discord's client does; ``reply_to`` is a message id replied to."""
        if mention:
            text = f"<@{self.bot_id}> {text}"
        return self._user_message(
            user_id, channel_id or self.channel_id, text, guild=True, reply_to=reply_to, attachments=attachments, name=name
        )

    def new_thread(self, name: str, owner_id: int, *, announce: bool = True) -> int:
        """A user starts a thread in #general; its id. THREAD_CREATE reaches the bot unless
        ``announce`` is false (a thread made while the bot was away, known only through the API)."""
        thread_id = self.snowflake()
        thread = self._thread_channel(thread_id, name, owner_id)
        with self._cond:
            self.channels[thread_id] = thread
        if announce:
            self._dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        return thread_id

    def press(self, user_id: int, message: dict[str, Any], custom_id: str, name: str | None = None) -> int:
        """A user presses the button ``custom_id`` on a message the bot sent; the interaction id."""
        channel_id = int(message["channel_id"])
        channel = self.channels[channel_id]
        interaction_id = self.snowflake()
        token = f"aW50ZXJhY3Rpb246{interaction_id}fakeInteractionToken"
        payload: dict[str, Any] = {
            "id": str(interaction_id),
            "application_id": str(self.application_id),
            "type": 3,
            "token": token,
            "version": 1,
            "data": {"custom_id": custom_id, "component_type": 2},
            "channel_id": str(channel_id),
            "channel": channel,
            "message": self._public(message),
            "app_permissions": "1071698660929",
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 10485760,
        }
        user = self.user(user_id, name)
        if channel["type"] == 1:
            payload |= {"user": user, "context": 1, "authorizing_integration_owners": {"1": str(user_id)}}
        else:
            payload |= {
                "guild_id": str(self.guild_id),
                "guild_locale": "en-US",
                "member": {**self._member(user_id), "user": user, "permissions": "1071698660929"},
                "context": 0,
                "authorizing_integration_owners": {"0": str(self.guild_id)},
            }
        with self._cond:
            self._interactions[interaction_id] = {"token": token, "answered": False}
        self._dispatch("INTERACTION_CREATE", payload)
        return interaction_id

    def sent(self, channel_id: int | None = None) -> list[dict[str, Any]]:
        """Messages the bot sent (latest content), oldest first; in one channel or thread if given."""
        with self._cond:
            found = [m for m in self.messages.values() if m["author"]["id"] == str(self.bot_id)]
        return sorted((m for m in found if channel_id is None or int(m["channel_id"]) == channel_id), key=lambda m: int(m["id"]))

    def sent_to(self, user_id: int) -> list[dict[str, Any]]:
        """What the bot sent in its DM with a user."""
        return self.sent(self.dm_channels[user_id]) if user_id in self.dm_channels else []

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 20.0, what: str = "a message") -> Any:
        """Wait until ``predicate()`` returns something truthy (checked whenever the bot calls the
        API, and every 50 ms); fail with what the bot sent so far."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            found = predicate()
            if found:
                return found
            with self._cond:
                self._cond.wait(min(0.05, left))
        texts = [(m["channel_id"], m["content"][:200]) for m in self.sent()]
        raise AssertionError(f"timed out waiting for {what}; the bot sent: {texts}")

    def wait_text(self, channel_id: int, needle: str, timeout: float = 20.0) -> dict[str, Any]:
        """The first message the bot sent in ``channel_id`` that contains ``needle``."""
        return self.wait_for(lambda: next((m for m in self.sent(channel_id) if needle in m["content"]), None), timeout, repr(needle))

    def wait_dm(self, user_id: int, needle: str, timeout: float = 20.0) -> dict[str, Any]:
        return self.wait_text(self.dm_channel(user_id), needle, timeout)

    def response_for(self, interaction_id: int, timeout: float = 20.0) -> dict[str, Any]:
        """How the bot answered an interaction: ``{"type": 4 or 6, "data": {...}}``."""
        return self.wait_for(
            lambda: next((r for r in self.interaction_responses if r["interaction_id"] == interaction_id), None),
            timeout,
            "an interaction response",
        )

    def rate_limit(self, route: str, retry_after: float) -> None:
        """Answer the next request whose ``"METHOD /path"`` starts with ``route`` with 429 Too Many Requests."""
        with self._cond:
            self.rate_limits.append((route, retry_after))

    def drop_connections(self) -> None:
        """Close every Gateway connection as Discord does when it restarts a node (the bot resumes)."""
        assert self._loop is not None

        async def drop() -> None:
            for session in list(self._sessions):
                await session.ws.close(code=4000, message=b"Unknown error")

        asyncio.run_coroutine_threadsafe(drop(), self._loop).result(10)

    def connected(self) -> int:
        """How many Gateway connections are identified (or resumed) now."""
        with self._cond:
            return sum(1 for s in self._sessions if s.identified)

    # -- internals: injecting -------------------------------------------------------------

    def _user_message(
        self,
        user_id: int,
        channel_id: int,
        text: str,
        *,
        guild: bool,
        reply_to: int | None = None,
        attachments: list[dict[str, Any]] | None = None,
        voice: bool = False,
        name: str | None = None,
    ) -> dict[str, Any]:
        message_id = self.snowflake()
        mentioned = dict.fromkeys(int(found) for found in re.findall(r"<@!?(\d+)>", text))
        mentions = [self.user(uid) | ({"member": self._member(uid)} if guild else {}) for uid in mentioned]
        message = self._message(
            message_id,
            channel_id,
            self.user(user_id, name),
            text if self.message_content_allowed or not guild or self.bot_id in mentioned else "",
            type=19 if reply_to else 0,
            mentions=mentions,
            attachments=attachments or [],
            flags=_VOICE_MESSAGE_FLAG if voice else 0,
        )
        if guild:
            message |= {"guild_id": str(self.guild_id), "member": self._member(user_id)}
        if reply_to is not None:
            message["message_reference"] = {"type": 0, "message_id": str(reply_to), "channel_id": str(channel_id)}
            with self._cond:
                referenced = self.messages.get(reply_to)
            message["referenced_message"] = self._public(referenced) if referenced else None
            if referenced and referenced["author"]["id"] not in (m["id"] for m in mentions):
                message["mentions"] = [*mentions, referenced["author"]]  # a reply pings its author by default
        with self._cond:
            self.messages[message_id] = message
        self._dispatch("MESSAGE_CREATE", message)
        return message

    def _dispatch(self, event: str, data: dict[str, Any]) -> None:
        assert self._loop is not None, "the fake Discord is not running"

        async def send() -> int:
            sent = 0
            for session in list(self._sessions):
                if session.identified and not session.ws.closed:
                    await session.send({"op": 0, "t": event, "d": data})
                    sent += 1
            return sent

        if asyncio.run_coroutine_threadsafe(send(), self._loop).result(10) == 0:
            raise AssertionError(f"no bot is connected to the fake Discord gateway to receive {event}")

    @staticmethod
    def _public(message: dict[str, Any]) -> dict[str, Any]:
        """A message as Discord sends it (without the fake's bookkeeping keys)."""
        return {k: v for k, v in message.items() if k not in ("edits", "history", "files", "allowed_mentions")}

    # -- the Gateway ----------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        if request.query.get("v") != "10" or request.query.get("encoding") != "json":
            await ws.close(code=4012, message=b"Invalid API version")
            return ws
        session = _Session(ws, request.query.get("compress") == "zlib-stream")
        with self._cond:
            self._sessions.append(session)
        try:
            await session.send({"op": 10, "d": {"heartbeat_interval": 41250, "_trace": ["fake-gateway"]}, "s": None, "t": None})
            async for frame in ws:
                if frame.type is not WSMsgType.TEXT:
                    continue
                await self._gateway_frame(session, json.loads(frame.data))
        finally:
            with self._cond:
                if session in self._sessions:
                    self._sessions.remove(session)
                self._cond.notify_all()
        return ws

    async def _gateway_frame(self, session: _Session, frame: dict[str, Any]) -> None:
        op, data = frame.get("op"), frame.get("d")
        if op == 1:
            await session.send({"op": 11, "d": None, "s": None, "t": None})
        elif op == 2:
            await self._identify(session, data or {})
        elif op == 6:
            if (data or {}).get("token") != self.token:
                await session.ws.close(code=4004, message=b"Authentication failed.")
            elif data["session_id"] in self._known_sessions:
                session.session_id = data["session_id"]
                with self._cond:
                    session.identified = True
                    self.resumes += 1
                    self._cond.notify_all()
                await session.send({"op": 0, "t": "RESUMED", "d": {"_trace": ["fake-gateway"]}})
            else:
                await session.send({"op": 9, "d": False, "s": None, "t": None})

    async def _identify(self, session: _Session, data: dict[str, Any]) -> None:
        with self._cond:
            self.identifies.append(data)
        if data.get("token") != self.token:
            await session.ws.close(code=4004, message=b"Authentication failed.")
            return
        intents = int(data.get("intents") or 0)
        if intents & (_GUILD_MEMBERS_INTENT | _PRESENCES_INTENT) or (
            intents & _MESSAGE_CONTENT_INTENT and not self.message_content_allowed
        ):
            await session.ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        session.session_id = f"session-{self.snowflake()}"
        self._known_sessions.add(session.session_id)
        ready = {
            "v": 10,
            "user": self.bot_user(),
            "guilds": [{"id": str(self.guild_id), "unavailable": True}],
            "session_id": session.session_id,
            "resume_gateway_url": self.gateway_url,
            "session_type": "normal",
            "private_channels": [],
            "relationships": [],
            "user_settings": {},
            "presences": [],
            "application": {"id": str(self.application_id), "flags": 1 << 19},
            "_trace": ["fake-gateway"],
        }
        await session.send({"op": 0, "t": "READY", "d": ready})
        await session.send({"op": 0, "t": "GUILD_CREATE", "d": self._guild()})
        with self._cond:
            session.identified = True
            self._cond.notify_all()

    # -- the CDN --------------------------------------------------------------------------

    async def _cdn(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["path"])
        if data is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=data, content_type="application/octet-stream")

    # -- REST -----------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["path"]
        route = f"{request.method} {path}"
        with self._cond:
            self.requests.append((request.method, path))
            limited = next((r for r in self.rate_limits if route.startswith(r[0])), None)
            if limited is not None:
                self.rate_limits.remove(limited)
        try:
            if limited is not None:
                retry_after = limited[1]
                return _json(
                    {"message": "You are being rate limited.", "retry_after": retry_after, "global": False},
                    status=429,
                    headers={
                        "Retry-After": str(max(1, round(retry_after))),
                        "Via": "1.1 google",
                        "X-RateLimit-Scope": "user",
                        "X-RateLimit-Limit": "5",
                        "X-RateLimit-Remaining": "0",
                        "X-RateLimit-Reset-After": str(retry_after),
                        "X-RateLimit-Bucket": "fake-bucket",
                    },
                )
            parts = path.strip("/").split("/")
            if parts[0] == "interactions" and len(parts) == 4 and parts[3] == "callback" and request.method == "POST":
                return await self._interaction_callback(request, int(parts[1]), parts[2])
            if parts[0] == "webhooks" and len(parts) == 3 and request.method == "POST":
                return await self._followup(request, parts[2])
            if request.headers.get("Authorization") != f"Bot {self.token}":
                return _error(401, 0, "401: Unauthorized")
            return await self._bot_route(request, request.method, parts)
        finally:
            with self._cond:
                self._cond.notify_all()

    async def _bot_route(self, request: web.Request, method: str, parts: list[str]) -> web.StreamResponse:
        if method == "GET" and parts in (["gateway"], ["gateway", "bot"]):
            body: dict[str, Any] = {"url": self.gateway_url}
            if parts == ["gateway", "bot"]:
                body |= {"shards": 1, "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}}
            return _json(body)
        if method == "GET" and parts == ["users", "@me"]:
            return _json(self.bot_user())
        if method == "GET" and parts == ["oauth2", "applications", "@me"]:
            return _json(self._application())
        if method == "POST" and parts == ["users", "@me", "channels"]:
            recipient = int((await request.json())["recipient_id"])
            return _json(self.channels[self.dm_channel(recipient)])
        if parts[0] == "channels" and len(parts) >= 2:
            channel_id = int(parts[1])
            channel = self.channels.get(channel_id)
            if channel is None:
                return _error(404, 10003, "Unknown Channel")
            rest = parts[2:]
            if method == "GET" and not rest:
                return _json(channel)
            if method == "POST" and rest == ["typing"]:
                with self._cond:
                    self.typing.append(channel_id)
                return web.Response(status=204)
            if method == "POST" and rest == ["messages"]:
                return await self._create_message(request, channel_id)
            if method == "PATCH" and len(rest) == 2 and rest[0] == "messages":
                return await self._edit_message(request, channel_id, int(rest[1]))
        return _error(404, 0, "404: Not Found")

    def _application(self) -> dict[str, Any]:
        return {
            "id": str(self.application_id),
            "name": "Hermes",
            "icon": None,
            "description": "",
            "bot_public": False,
            "bot_require_code_grant": False,
            "owner": {**self.user(self.snowflake(), "owner")},
            "verify_key": "0" * 64,
            "flags": 1 << 19,
            "summary": "",
            "team": None,
            "rpc_origins": [],
            "redirect_uris": [],
            "interactions_endpoint_url": None,
        }

    async def _read_message_body(self, request: web.Request) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The JSON payload and the files of a message request (JSON, or multipart as discord.py sends files)."""
        if request.content_type.startswith("multipart/"):
            payload: dict[str, Any] = {}
            files: list[dict[str, Any]] = []
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                name = getattr(part, "name", None)
                data = await part.read()  # type: ignore[union-attr]
                if name == "payload_json":
                    payload = json.loads(data)
                elif name and name.startswith("files["):
                    content_type = part.headers.get("Content-Type", "application/octet-stream")  # type: ignore[union-attr]
                    files.append({"filename": part.filename, "content_type": content_type, "data": bytes(data)})  # type: ignore[union-attr]
            return payload, files
        return await request.json(), []

    def _check(self, payload: dict[str, Any], files: list[dict[str, Any]], *, creating: bool) -> web.Response | None:
        """Discord's validation of content and components (the rules a bot runs into)."""
        content = payload.get("content")
        if content is not None and len(content) > 2000:
            return _form_error("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length.")
        if creating and not content and not files and not payload.get("components") and not payload.get("embeds"):
            return _error(400, 50006, "Cannot send an empty message")
        rows = payload.get("components") or []
        if len(rows) > 5:
            return _form_error("components", "BASE_TYPE_BAD_LENGTH", "Must be between 0 and 5 in length.")
        for row in rows:
            if row.get("type") != 1 or not 1 <= len(row.get("components") or []) <= 5:
                return _form_error("components", "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "An action row needs 1 to 5 components.")
            for button in row["components"]:
                if button.get("type") != 2 or button.get("style") not in (1, 2, 3, 4):
                    return _form_error("components", "UNION_TYPE_CHOICES", "Value of field 'type' must be one of (2,).")
                if not 1 <= len(button.get("custom_id") or "") <= 100 or len(button.get("label") or "") > 80:
                    return _form_error("components", "BASE_TYPE_BAD_LENGTH", "custom_id 1-100 and label at most 80 characters.")
        return None

    async def _create_message(self, request: web.Request, channel_id: int) -> web.Response:
        payload, files = await self._read_message_body(request)
        if (problem := self._check(payload, files, creating=True)) is not None:
            return problem
        message_id = self.snowflake()
        attachments = []
        for index, file in enumerate(files):
            described = next((a for a in payload.get("attachments") or [] if int(a.get("id", -1)) == index), {})
            attachments.append(
                self.attachment(channel_id, described.get("filename") or file["filename"], file["data"], file["content_type"])
                | {"description": described.get("description")}
            )
        message = self._message(
            message_id,
            channel_id,
            self.bot_user(),
            payload.get("content") or "",
            attachments=attachments,
            embeds=payload.get("embeds") or [],
            flags=int(payload.get("flags") or 0),
            components=payload.get("components") or [],
            # the fake's own bookkeeping:
            edits=0,
            history=[payload.get("content") or ""],
            files=files,
            allowed_mentions=payload.get("allowed_mentions"),
        )
        if payload.get("message_reference"):
            message["message_reference"] = payload["message_reference"]
        if str(channel_id) in (c["id"] for c in self.channels.values() if c["type"] != 1):
            message["guild_id"] = str(self.guild_id)
        with self._cond:
            self.messages[message_id] = message
        return _json(self._public(message))

    async def _edit_message(self, request: web.Request, channel_id: int, message_id: int) -> web.Response:
        payload, files = await self._read_message_body(request)
        with self._cond:
            message = self.messages.get(message_id)
        if message is None or int(message["channel_id"]) != channel_id:
            return _error(404, 10008, "Unknown Message")
        if message["author"]["id"] != str(self.bot_id):
            return _error(403, 50005, "Cannot edit a message authored by another user")
        if (problem := self._check(payload, files, creating=False)) is not None:
            return problem
        with self._cond:
            if "content" in payload:
                message["content"] = payload["content"] or ""
                message["history"].append(message["content"])
            if "components" in payload:
                message["components"] = payload["components"] or []
            message["edits"] += 1
            message["edited_timestamp"] = _now()
        return _json(self._public(message))

    async def _interaction_callback(self, request: web.Request, interaction_id: int, token: str) -> web.Response:
        with self._cond:
            known = self._interactions.get(interaction_id)
        if known is None or known["token"] != token:
            return _error(404, 10062, "Unknown interaction")
        if known["answered"]:
            return _error(400, 40060, "Interaction has already been acknowledged.")
        body = await request.json()
        kind = int(body["type"])
        if kind not in (4, 5, 6, 7):
            return _form_error("type", "BASE_TYPE_CHOICES", "Value must be one of (4, 5, 6, 7).")
        data = body.get("data") or {}
        if kind == 4 and (problem := self._check(data, [], creating=True)) is not None:
            return problem
        with self._cond:
            known["answered"] = True
            self.interaction_responses.append({"interaction_id": interaction_id, "type": kind, "data": data})
        response: dict[str, Any] = {
            "interaction": {
                "id": str(interaction_id),
                "type": 3,
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(int(data.get("flags") or 0) & _EPHEMERAL_FLAG),
            },
            "resource": {"type": kind},
        }
        if request.query.get("with_response") in ("1", "true"):
            return _json(response)
        return web.Response(status=204)

    async def _followup(self, request: web.Request, token: str) -> web.Response:
        with self._cond:
            known = next((i for i in self._interactions.values() if i["token"] == token), None)
        if known is None:
            return _error(404, 10015, "Unknown Webhook")
        if not known["answered"]:
            return _error(400, 40060, "The interaction has not been acknowledged yet.")
        payload, _ = await self._read_message_body(request)
        with self._cond:
            self.followups.append({"token": token, **payload})
        message = self._message(self.snowflake(), 0, self.bot_user(), payload.get("content") or "", flags=int(payload.get("flags") or 0))
        return _json(message)
