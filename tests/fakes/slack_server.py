"""A fake Slack on 127.0.0.1: the Web API and the Socket Mode websocket, for the real slack-sdk / Bolt.

One aiohttp server in a background thread (its own event loop) answers:

- ``POST /api/<method>``: the Web API. Parameters come as Slack's clients send them (query string,
  form body or JSON body, merged), the token in ``Authorization: Bearer``. Answers are HTTP 200
  with ``{"ok": false, "error": ...}`` for refusals, as Slack does; a method made to fail with
  ``ratelimited`` answers 429 with ``Retry-After``. Methods: ``auth.test``,
  ``apps.connections.open`` (app-level token only; hands out a one-time websocket ticket),
  ``chat.postMessage``, ``chat.update``, ``chat.postEphemeral``, ``conversations.open``,
  ``users.info``, ``files.info``, ``files.getUploadURLExternal`` and
  ``files.completeUploadExternal`` (what ``files_upload_v2`` calls), with the upload itself
  a raw ``POST /upload/v1/<file id>``.
- ``GET /link/?ticket=...``: the Socket Mode websocket. It says ``hello``, then pushes
  envelopes (``events_api``, ``interactive``, ``slash_commands``) that the client must ack
  with ``{"envelope_id": ...}``; ``refresh()`` sends a ``disconnect`` (refresh_requested).
- ``GET /files-pri/...``: files users shared (``url_private_download``), only with the bot
  token; without it, like Slack, a redirect to a sign-in page (HTML, status 200).

Like Slack it refuses a ``text`` over 4000 characters (``msg_too_long``; real Slack truncates
at 40,000 but asks for 4000), section texts over 3000, button labels over 75 and values over
2000 characters, more than 25 elements in one actions block, and duplicate ``action_id``s
(``invalid_blocks``). ``chat.update`` refuses a message that is not the bot's or does not exist.
Tests inject users' messages, mentions, thread replies, files, button presses and slash
commands, and read what the bot sent. ``post_event`` signs and POSTs an Events API request to
a bot in HTTP mode. The server stops itself after ``lifetime`` seconds whatever happens.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import hmac
import itertools
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

__all__ = ["FakeSlack", "sign"]

_TEXT_LIMIT = 4000
_SECTION_LIMIT = 3000


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Slack-Signature`` of a request: ``v0=`` HMAC-SHA256 of ``v0:<timestamp>:<body>``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class FakeSlack:
    """State of the fake workspace: the bot, users' DMs and channels, what the bot sent, acks."""

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-1111-2222-test-not-a-real-token",
        app_token: str = "xapp-1-A0APP-3333-test-not-a-real-token",
        signing_secret: str = "8f742231b10e8888abcd99yyyzzz85a5",
        lifetime: float = 300.0,
    ) -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.signing_secret = signing_secret
        self.lifetime = lifetime
        self.team_id = "T0TEAM"
        self.app_id = "A0APP"
        self.bot_user = "U0BOT"
        self.bot_id = "B0BOT"
        self.bot_name = "hermes"
        self.users: dict[str, str] = {}  # user id -> name (users.info)
        self.channels: set[str] = {"C0GENERAL"}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}  # (channel, ts) -> what the bot posted
        self.ephemeral: list[dict[str, Any]] = []
        self.uploads: list[dict[str, Any]] = []  # files the bot shared
        self.acks: dict[str, dict[str, Any]] = {}  # envelope id -> the client's ack
        self.connections_opened = 0
        self.fail_methods: dict[str, list[Any]] = {}  # method -> [how many more, error, retry-after]
        self.reject_mrkdwn_blocks = False  # refuse blocks whose sections use mrkdwn (markup refused)
        self._files: dict[str, dict[str, Any]] = {}  # file id -> {"meta": ..., "data": ...} shared by users
        self._pending_uploads: dict[str, dict[str, Any]] = {}
        self._dm: dict[str, str] = {}  # user -> D channel
        self._tickets: set[str] = set()
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._outbox: collections.deque[str] = collections.deque()
        self._sockets: list[web.WebSocketResponse] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeSlack:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-slack", daemon=True)
        self._thread.start()
        ready.wait(10)
        if errors:
            raise errors[0]
        self._timer = threading.Timer(self.lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        return self

    async def _serve(self) -> None:
        self._wake = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.add_routes(
            [
                web.post("/api/{method}", self._api),
                web.get("/api/{method}", self._api),
                web.get("/link/", self._socket),
                web.post("/upload/v1/{file_id}", self._upload),
                web.get("/files-pri/{path:.*}", self._download),
                web.get("/signin", self._signin),
            ]
        )
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def _shutdown(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(10)
        if self._timer is not None:
            self._timer.cancel()
        with self._cond:
            self._cond.notify_all()

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def base_url(self) -> str:
        """What ``[slack] api_base_url`` is set to (slack-sdk's ``base_url``)."""
        return f"{self.origin}/api/"

    # -- identifiers ----------------------------------------------------------------------

    def new_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):08d}"

    def dm_channel(self, user: str) -> str:
        """The DM channel between ``user`` and the bot (made on first use, as conversations.open does)."""
        with self._cond:
            if user not in self._dm:
                self._dm[user] = "D" + user.lstrip("UW").rjust(8, "0")
                self.channels.add(self._dm[user])
            return self._dm[user]

    def add_user(self, user: str, name: str) -> None:
        with self._cond:
            self.users[user] = name

    # -- what tests do: users acting --------------------------------------------------------

    def dm(self, user: str, text: str, *, thread_ts: str | None = None, files: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """``user`` writes to the bot in their DM; returns the message event (its ``ts``)."""
        event = self._message_event(user, text, self.dm_channel(user), "im", thread_ts=thread_ts, files=files)
        self.push_event(event)
        return event

    def channel_message(
        self,
        user: str,
        text: str,
        *,
        channel: str = "C0GENERAL",
        thread_ts: str | None = None,
        parent_user: str | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """``user`` writes in a channel (in a thread with ``thread_ts``). When the text mentions the
        bot, Slack sends the ``message`` event and an ``app_mention`` event for the same ts; so does this."""
        with self._cond:
            self.channels.add(channel)
        event = self._message_event(user, text, channel, "channel", thread_ts=thread_ts, files=files)
        if thread_ts:
            event["parent_user_id"] = parent_user or user
        self.push_event(event)
        if f"<@{self.bot_user}>" in text:
            mention = {k: v for k, v in event.items() if k not in ("channel_type", "subtype", "parent_user_id", "client_msg_id")}
            mention["type"] = "app_mention"
            self.push_event(mention)
        return event

    def mention(self, user: str, text: str, **kwargs: Any) -> dict[str, Any]:
        """``user`` writes ``@hermes text`` in a channel."""
        return self.channel_message(user, f"<@{self.bot_user}> {text}", **kwargs)

    def bot_echo(self, channel: str, text: str) -> dict[str, Any]:
        """The bot's own message coming back as an event (Slack sends those too)."""
        event = {
            "type": "message",
            "subtype": "bot_message",
            "text": text,
            "bot_id": self.bot_id,
            "user": self.bot_user,
            "ts": self.new_ts(),
            "channel": channel,
            "channel_type": "im" if channel.startswith("D") else "channel",
        }
        event["event_ts"] = event["ts"]
        self.push_event(event)
        return event

    def edited(self, user: str, channel: str, ts: str, text: str) -> dict[str, Any]:
        """A ``message_changed`` event: ``user`` edited an earlier message."""
        event = {
            "type": "message",
            "subtype": "message_changed",
            "hidden": True,
            "channel": channel,
            "channel_type": "im" if channel.startswith("D") else "channel",
            "ts": self.new_ts(),
            "message": {"type": "message", "user": user, "text": text, "ts": ts, "edited": {"user": user, "ts": self.new_ts()}},
            "previous_message": {"type": "message", "user": user, "text": "before", "ts": ts},
        }
        event["event_ts"] = event["ts"]
        self.push_event(event)
        return event

    def add_file(self, name: str, data: bytes, mime: str, *, user: str = "U0000001", audio_clip: bool = False) -> dict[str, Any]:
        """A file a user uploads, as it appears in a message's ``files`` (not yet shared)."""
        file_id = self._new_id("F")
        extension = name.rsplit(".", 1)[-1] if "." in name else "bin"
        meta: dict[str, Any] = {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mime,
            "filetype": extension,
            "user": user,
            "mode": "hosted",
            "is_public": False,
            "size": len(data),
            "url_private": f"{self.origin}/files-pri/{self.team_id}-{file_id}/{name}",
            "url_private_download": f"{self.origin}/files-pri/{self.team_id}-{file_id}/download/{name}",
            "permalink": f"https://example.slack.com/files/{user}/{file_id}/{name}",
            "file_access": "visible",
        }
        if audio_clip:  # a clip recorded in Slack's message box
            meta.update({"subtype": "slack_audio", "media_display_type": "audio", "duration_ms": 2000})
        with self._cond:
            self._files[file_id] = {"meta": meta, "data": data}
        return meta

    def press(self, user: str, message: dict[str, Any], data: str) -> str:
        """``user`` presses the button whose value is ``data`` on a message the bot sent; the envelope id."""
        action = next(
            (
                (block, element)
                for block in message.get("blocks") or []
                if block.get("type") == "actions"
                for element in block.get("elements", [])
                if element.get("value") == data
            ),
            None,
        )
        if action is None:
            raise AssertionError(f"the message has no button with value {data!r}: {message.get('blocks')}")
        block, element = action
        channel = message["channel"]
        container: dict[str, Any] = {"type": "message", "message_ts": message["ts"], "channel_id": channel, "is_ephemeral": False}
        bot_message: dict[str, Any] = {
            "type": "message",
            "subtype": "bot_message",
            "text": message["text"],
            "ts": message["ts"],
            "bot_id": self.bot_id,
            "user": self.bot_user,
            "blocks": message.get("blocks") or [],
        }
        if message.get("thread_ts"):
            container["thread_ts"] = message["thread_ts"]
            bot_message["thread_ts"] = message["thread_ts"]
        payload = {
            "type": "block_actions",
            "user": {"id": user, "username": self.users.get(user, "ada"), "name": self.users.get(user, "ada"), "team_id": self.team_id},
            "api_app_id": self.app_id,
            "token": "verification-token-unused",
            "container": container,
            "trigger_id": f"{next(self._ids)}.{self.team_id}.abcdef",
            "team": {"id": self.team_id, "domain": "example"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": "directmessage" if channel.startswith("D") else "general"},
            "message": bot_message,
            "state": {"values": {}},
            "response_url": f"{self.origin}/actions/{self.team_id}/{next(self._ids)}/respond",
            "actions": [
                {
                    "action_id": element["action_id"],
                    "block_id": block.get("block_id") or "b",
                    "text": element["text"],
                    "value": element["value"],
                    "type": "button",
                    "action_ts": self.new_ts(),
                }
            ],
        }
        return self.push_envelope("interactive", payload)

    def slash(self, user: str, command: str, text: str, *, channel: str | None = None) -> str:
        """``user`` runs a slash command (``/hermes new``) in ``channel`` (their DM by default)."""
        channel = channel or self.dm_channel(user)
        payload = {
            "token": "verification-token-unused",
            "team_id": self.team_id,
            "team_domain": "example",
            "channel_id": channel,
            "channel_name": "directmessage" if channel.startswith("D") else "general",
            "user_id": user,
            "user_name": self.users.get(user, "ada"),
            "command": command,
            "text": text,
            "api_app_id": self.app_id,
            "is_enterprise_install": "false",
            "response_url": f"{self.origin}/commands/{self.team_id}/{next(self._ids)}/respond",
            "trigger_id": f"{next(self._ids)}.{self.team_id}.abcdef",
        }
        return self.push_envelope("slash_commands", payload)

    def _message_event(
        self, user: str, text: str, channel: str, channel_type: str, *, thread_ts: str | None, files: list[dict[str, Any]] | None
    ) -> dict[str, Any]:
        ts = self.new_ts()
        event: dict[str, Any] = {
            "client_msg_id": str(uuid.uuid4()),
            "type": "message",
            "text": text,
            "user": user,
            "ts": ts,
            "blocks": [
                {
                    "type": "rich_text",
                    "block_id": "rt",
                    "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}],
                }
            ]
            if text
            else [],
            "team": self.team_id,
            "channel": channel,
            "event_ts": ts,
            "channel_type": channel_type,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        if files:
            event.update({"subtype": "file_share", "files": files, "upload": False, "display_as_bot": False})
        return event

    def event_callback(self, event: dict[str, Any]) -> dict[str, Any]:
        """The Events API body around ``event`` (what a Socket Mode envelope carries as payload)."""
        return {
            "token": "verification-token-unused",
            "team_id": self.team_id,
            "context_team_id": self.team_id,
            "api_app_id": self.app_id,
            "event": event,
            "type": "event_callback",
            "event_id": self._new_id("Ev"),
            "event_time": int(time.time()),
            "authorizations": [
                {"enterprise_id": None, "team_id": self.team_id, "user_id": self.bot_user, "is_bot": True, "is_enterprise_install": False}
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-{uuid.uuid4().hex}",
        }

    def push_event(self, event: dict[str, Any]) -> str:
        return self.push_envelope("events_api", self.event_callback(event))

    def push_envelope(self, kind: str, payload: dict[str, Any]) -> str:
        """Queue an envelope for the connected Socket Mode client (or the next one to connect)."""
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "payload": payload,
            "type": kind,
            "accepts_response_payload": kind != "events_api",
        }
        if kind == "events_api":
            envelope.update({"retry_attempt": 0, "retry_reason": ""})
        self._send_raw(json.dumps(envelope))
        return envelope_id

    def refresh(self) -> None:
        """Slack asks the client to reconnect (it does so before a server goes away)."""
        self._send_raw(json.dumps({"type": "disconnect", "reason": "refresh_requested", "debug_info": {"host": "applink-fake"}}))

    def _send_raw(self, text: str) -> None:
        loop = self._loop
        assert loop is not None, "the fake is not running"

        def put() -> None:
            self._outbox.append(text)
            assert self._wake is not None
            self._wake.set()

        loop.call_soon_threadsafe(put)

    # -- Events API (HTTP mode) -------------------------------------------------------------

    def post_event(
        self,
        url: str,
        event: dict[str, Any],
        *,
        secret: str | None = None,
        timestamp: float | None = None,
        signature: str | None = None,
        timeout: float = 10.0,
    ) -> int:
        """POST ``event`` to a bot's Events API endpoint, signed as Slack signs; the HTTP status."""
        body = json.dumps(self.event_callback(event)).encode()
        stamp = str(int(time.time() if timestamp is None else timestamp))
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature or sign(secret or self.signing_secret, stamp, body),
        }
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    # -- what tests read ----------------------------------------------------------------------

    def sent(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Messages the bot posted (their latest state), oldest first."""
        with self._cond:
            found = [dict(m) for m in self.messages.values() if channel is None or m["channel"] == channel]
        return sorted(found, key=lambda m: float(m["ts"]))

    @staticmethod
    def buttons(message: dict[str, Any]) -> list[tuple[str, str]]:
        """``(label, value)`` of a message's buttons."""
        return [
            (element["text"]["text"], element["value"])
            for block in message.get("blocks") or []
            if block.get("type") == "actions"
            for element in block.get("elements", [])
        ]

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        with self._cond:
            return [params for name, params in self.calls if name == method]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 20.0, what: str = "a message") -> Any:
        """Wait (blocking) until ``predicate()`` is truthy; checked whenever the bot calls the API, and every 50 ms."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            found = predicate()
            if found:
                return found
            with self._cond:
                self._cond.wait(min(0.05, left))
        raise AssertionError(f"timed out waiting for {what}; the bot sent: {[m['text'][:200] for m in self.sent()]}")

    async def until(self, predicate: Callable[[], Any], timeout: float = 20.0, what: str = "a message") -> Any:
        """``wait_for`` for a test running the bot in its own event loop (does not block that loop)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = predicate()
            if found:
                return found
            await asyncio.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}; the bot sent: {[m['text'][:200] for m in self.sent()]}")

    def text_in(self, channel: str, needle: str) -> dict[str, Any] | None:
        return next((m for m in self.sent(channel) if needle in m["text"]), None)

    def wait_text(self, channel: str, needle: str, timeout: float = 20.0) -> dict[str, Any]:
        return self.wait_for(lambda: self.text_in(channel, needle), timeout, what=repr(needle))

    # -- the Web API ----------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        raw = await request.read()
        content_type = request.headers.get("Content-Type", "")
        if raw and "json" in content_type:
            params.update(json.loads(raw))
        elif raw:
            params.update(parse_qsl(raw.decode(), keep_blank_values=True))
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip() or str(params.pop("token", ""))
        params.pop("token", None)
        with self._cond:
            self.calls.append((method, params))
            failing = self.fail_methods.get(method)
            if failing and failing[0] > 0:
                failing[0] -= 1
                error, retry_after = failing[1], failing[2]
                if error == "ratelimited":
                    return web.json_response({"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": str(retry_after)})
                return web.json_response({"ok": False, "error": error})
        try:
            status, payload = self._handle(method, params, token)
        finally:
            with self._cond:
                self._cond.notify_all()
        return web.json_response(payload, status=status)

    def _handle(self, method: str, params: dict[str, Any], token: str) -> tuple[int, dict[str, Any]]:
        if not token:
            return 200, _err("not_authed")
        if method == "apps.connections.open":
            if token == self.bot_token:
                return 200, _err("not_allowed_token_type")
            if token != self.app_token:
                return 200, _err("invalid_auth")
            ticket = uuid.uuid4().hex
            with self._cond:
                self._tickets.add(ticket)
                self.connections_opened += 1
            return 200, _ok({"url": f"ws://127.0.0.1:{self._port}/link/?ticket={ticket}&app_id={self.app_id}"})
        if token == self.app_token:
            return 200, _err("not_allowed_token_type")
        if token != self.bot_token:
            return 200, _err("invalid_auth")
        handler = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.postEphemeral": self._post_ephemeral,
            "conversations.open": self._conversations_open,
            "users.info": self._users_info,
            "files.info": self._files_info,
            "files.getUploadURLExternal": self._get_upload_url,
            "files.completeUploadExternal": self._complete_upload,
        }.get(method)
        if handler is None:
            return 200, _err("unknown_method")
        return 200, handler(params)

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return _ok(
            {
                "url": "https://example.slack.com/",
                "team": "Example",
                "user": self.bot_name,
                "team_id": self.team_id,
                "user_id": self.bot_user,
                "bot_id": self.bot_id,
                "is_enterprise_install": False,
            }
        )

    def _channel(self, params: dict[str, Any]) -> str | None:
        channel = str(params.get("channel") or "")
        if channel[:1] in ("U", "W"):  # a user id posts to the DM with them
            return self.dm_channel(channel)
        with self._cond:
            return channel if channel in self.channels else None

    def _post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params)
        if channel is None:
            return _err("channel_not_found")
        text = str(params.get("text") or "")
        blocks = _blocks(params.get("blocks"))
        if not text and not blocks:
            return _err("no_text")
        if problem := self._check(text, blocks):
            return problem
        ts = self.new_ts()
        record = {
            "channel": channel,
            "ts": ts,
            "text": text,
            "blocks": blocks,
            "mrkdwn": params.get("mrkdwn", True) not in (False, "false", "0"),
            "thread_ts": params.get("thread_ts") or None,
            "edits": 0,
            "history": [text],
        }
        with self._cond:
            self.messages[(channel, ts)] = record
        return _ok(
            {
                "channel": channel,
                "ts": ts,
                "message": {
                    "type": "message",
                    "subtype": "bot_message",
                    "text": text,
                    "ts": ts,
                    "bot_id": self.bot_id,
                    "user": self.bot_user,
                },
            }
        )

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params)
        if channel is None:
            return _err("channel_not_found")
        with self._cond:
            record = self.messages.get((channel, str(params.get("ts"))))
        if record is None:
            return _err("message_not_found")
        text = str(params.get("text") or "")
        blocks = _blocks(params.get("blocks"))
        if problem := self._check(text, blocks):
            return problem
        with self._cond:
            record["text"] = text or record["text"]
            if "blocks" in params:  # absent keeps the blocks; [] removes them
                record["blocks"] = blocks
            record["mrkdwn"] = params.get("mrkdwn", True) not in (False, "false", "0")
            record["edits"] += 1
            record["history"].append(record["text"])
        return _ok({"channel": channel, "ts": record["ts"], "text": record["text"]})

    def _post_ephemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params)
        if channel is None:
            return _err("channel_not_found")
        if not params.get("user"):
            return _err("user_not_found")
        record = {
            "channel": channel,
            "user": params["user"],
            "text": str(params.get("text") or ""),
            "thread_ts": params.get("thread_ts") or None,
        }
        with self._cond:
            self.ephemeral.append(record)
        return _ok({"message_ts": self.new_ts()})

    def _conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        users = [u for u in str(params.get("users") or "").split(",") if u]
        if len(users) != 1:
            return _err("not_enough_users" if not users else "too_many_users")
        return _ok({"no_op": True, "already_open": True, "channel": {"id": self.dm_channel(users[0])}})

    def _users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = str(params.get("user") or "")
        with self._cond:
            name = self.users.get(user)
        if name is None:
            return _err("user_not_found")
        return _ok(
            {"user": {"id": user, "team_id": self.team_id, "name": name, "real_name": name.title(), "profile": {"display_name": name}}}
        )

    def _files_info(self, params: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            found = self._files.get(str(params.get("file") or ""))
        if found is None:
            return _err("file_not_found")
        return _ok({"file": found["meta"]})

    def _get_upload_url(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("filename") or not str(params.get("length") or "").isdigit():
            return _err("invalid_arguments")
        file_id = self._new_id("F")
        with self._cond:
            self._pending_uploads[file_id] = {"filename": params["filename"], "length": int(params["length"]), "data": None}
        return _ok({"upload_url": f"{self.origin}/upload/v1/{file_id}", "file_id": file_id})

    def _complete_upload(self, params: dict[str, Any]) -> dict[str, Any]:
        files = json.loads(params.get("files") or "[]")
        channel = params.get("channel_id")
        if channel and self._channel({"channel": channel}) is None:
            return _err("channel_not_found")
        done = []
        for item in files:
            with self._cond:
                pending = self._pending_uploads.pop(item.get("id"), None)
            if pending is None or pending["data"] is None:
                return _err("file_not_found")
            record = {
                "file_id": item["id"],
                "filename": pending["filename"],
                "title": item.get("title") or pending["filename"],
                "data": pending["data"],
                "channel": channel,
                "thread_ts": params.get("thread_ts") or None,
                "initial_comment": params.get("initial_comment") or "",
            }
            with self._cond:
                self.uploads.append(record)
            done.append({"id": item["id"], "title": record["title"]})
        return _ok({"files": done})

    def _check(self, text: str, blocks: list[dict[str, Any]]) -> dict[str, Any] | None:
        if len(text) > _TEXT_LIMIT:
            return _err("msg_too_long")
        if len(blocks) > 50:
            return _err("invalid_blocks", "no more than 50 items allowed [json-pointer:/blocks]")
        for index, block in enumerate(blocks):
            where = f"[json-pointer:/blocks/{index}"
            if block.get("type") == "section":
                section = block.get("text") or {}
                if len(section.get("text", "")) > _SECTION_LIMIT:
                    return _err("invalid_blocks", f"must be less than 3001 characters {where}/text/text]")
                if self.reject_mrkdwn_blocks and section.get("type") == "mrkdwn":
                    return _err("invalid_blocks", f"failed to parse mrkdwn {where}/text]")
            elif block.get("type") == "actions":
                elements = block.get("elements") or []
                if len(elements) > 25:
                    return _err("invalid_blocks", f"no more than 25 items allowed {where}/elements]")
                ids = [e.get("action_id") for e in elements]
                if len(set(ids)) != len(ids):
                    return _err("invalid_blocks", f"action_id already exists {where}/elements]")
                for element in elements:
                    if len(element.get("text", {}).get("text", "")) > 75:
                        return _err("invalid_blocks", f"must be less than 76 characters {where}/elements/text/text]")
                    if len(element.get("value", "")) > 2000:
                        return _err("invalid_blocks", f"must be less than 2001 characters {where}/elements/value]")
            else:
                return _err("invalid_blocks", f"unsupported type: {block.get('type')} {where}/type]")
        return None

    # -- uploads and downloads --------------------------------------------------------------------

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        data = await request.read()
        with self._cond:
            pending = self._pending_uploads.get(file_id)
            if pending is None:
                return web.Response(status=404, text="not found")
            pending["data"] = data
            self._cond.notify_all()
        return web.Response(text=f"OK - {len(data)}")

    async def _download(self, request: web.Request) -> web.StreamResponse:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if token != self.bot_token:
            raise web.HTTPFound(f"/signin?redir={request.path}")
        file_id = request.match_info["path"].split("/", 1)[0].split("-", 1)[-1]
        with self._cond:
            found = self._files.get(file_id)
        if found is None:
            return web.Response(status=404, text="File not found")
        return web.Response(body=found["data"], content_type=found["meta"]["mimetype"])

    async def _signin(self, request: web.Request) -> web.Response:
        return web.Response(text="<!DOCTYPE html><html><body>Sign in to Example | Slack</body></html>", content_type="text/html")

    # -- Socket Mode ------------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        with self._cond:
            valid = ticket in self._tickets
            self._tickets.discard(ticket)  # one connection per ticket
        if not valid:
            return web.Response(status=401, text="invalid ticket")
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_str(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": len(self._sockets),
                    "debug_info": {"host": "applink-fake", "build_number": 1, "approximate_connection_time": 18060},
                    "connection_info": {"app_id": self.app_id},
                }
            )
        )
        sender = asyncio.ensure_future(self._send_loop(ws))
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                try:
                    ack = json.loads(message.data)
                except ValueError:
                    continue
                if isinstance(ack, dict) and ack.get("envelope_id"):
                    with self._cond:
                        self.acks[ack["envelope_id"]] = ack
                        self._cond.notify_all()
        finally:
            sender.cancel()
            if ws in self._sockets:
                self._sockets.remove(ws)
        return ws

    async def _send_loop(self, ws: web.WebSocketResponse) -> None:
        """Send queued envelopes on the newest connection; one that fails to send goes back in the queue."""
        assert self._wake is not None
        while not ws.closed:
            if self._outbox and self._sockets and self._sockets[-1] is ws:
                text = self._outbox.popleft()
                try:
                    await ws.send_str(text)
                except (ConnectionError, RuntimeError):
                    self._outbox.appendleft(text)
                    return
                continue
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), 0.2)
            except TimeoutError:
                pass


def _blocks(value: Any) -> list[dict[str, Any]]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        value = json.loads(value)
    return list(value)


def _ok(result: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, **result}


def _err(error: str, detail: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"ok": False, "error": error}
    if detail:
        body["errors"] = [detail]
    return body
