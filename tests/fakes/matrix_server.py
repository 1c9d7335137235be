"""A fake Matrix homeserver on 127.0.0.1, spoken to by the real matrix-nio client.

Real HTTP (``ThreadingHTTPServer``) with the client-server API's paths and JSON shapes, as nio
sends and parses them: ``/_matrix/client/versions``, ``v3/login`` (password), ``v3/account/whoami``,
``v3/sync`` (``since`` / ``timeout`` long polling, ``full_state``), ``v3/rooms/{id}/send/{type}/{txn}``
(idempotent per transaction), ``typing``, ``redact``, ``join``, ``leave``, ``joined_members``,
``event/{id}``, ``createRoom``, account data, profiles, and media (``/_matrix/media/v3/upload``,
``/_matrix/client/v1/media/download`` with authentication, the legacy download too).

For end-to-end encryption it relays what clients publish and send without reading any of it:
``keys/upload``, ``keys/query``, ``keys/claim`` (one-time keys, then the fallback key),
``sendToDevice`` and the sync's ``to_device``, ``device_lists.changed`` and one-time key counts.

One server name (``hermes.test``); users are created by the test (with a password, a client can
log in as them). Like a homeserver it checks the access token (Authorization header or
``access_token`` query) on every call, refuses events over 65,536 bytes (``M_TOO_LARGE``) and
sends by non-members (``M_FORBIDDEN``). Rate limiting (``429 M_LIMIT_EXCEEDED`` with
``retry_after_ms``) can be injected per endpoint kind.

Tests create rooms, make users talk (text, mentions, replies, threads, files, voice notes,
reactions) and read what the bot sent: each of its messages with the newest content once its
edits (``m.replace``) are applied. The server stops itself after ``lifetime`` seconds.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

__all__ = ["FakeMatrix", "MAX_EVENT_BYTES"]

MAX_EVENT_BYTES = 65536
SERVER = "hermes.test"


def _event_size(event: dict[str, Any]) -> int:
    return len(json.dumps(event, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8"))


@dataclass
class _Room:
    room_id: str
    state: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)  # each with a private "_pos"

    def membership(self, user: str) -> str | None:
        event = self.state.get(("m.room.member", user))
        return event["content"].get("membership") if event else None

    def members(self, membership: str = "join") -> list[str]:
        return [key for (kind, key), ev in self.state.items() if kind == "m.room.member" and ev["content"].get("membership") == membership]


class MatrixError(Exception):
    def __init__(self, status: int, errcode: str, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.status, self.body = status, {"errcode": errcode, "error": error, **extra}


class FakeMatrix:
    """State of the fake homeserver: users, rooms and their timelines, media, what the bot did."""

    def __init__(
        self,
        *,
        bot: str = f"@hermes:{SERVER}",
        bot_name: str = "Hermes",
        password: str = "correct-horse-battery-staple",
        lifetime: float = 300.0,
    ) -> None:
        self.bot = bot
        self.bot_name = bot_name
        self.password = password
        self.token = "syt_aGVybWVz_" + secrets.token_urlsafe(24)  # the bot's access token, issued up front
        self.lifetime = lifetime
        self.max_wait = 5.0  # a long poll never waits longer than this (seconds)
        self.users: dict[str, str] = {bot: bot_name}  # user id -> display name
        self.tokens: dict[str, tuple[str, str]] = {self.token: (bot, "HERMESDEVICE")}
        self.rooms: dict[str, _Room] = {}
        self.account_data: dict[str, dict[str, tuple[int, dict[str, Any]]]] = {}  # user -> type -> (pos, content)
        self.media: dict[str, tuple[bytes, str, str | None]] = {}  # media id -> (data, mime, filename)
        self.calls: list[tuple[str, str]] = []  # (method, path) of every request
        self.typing: list[tuple[str, str, bool]] = []  # (room, user, typing)
        self.logins: list[dict[str, Any]] = []
        self.rate_limit: dict[str, int] = {}  # "send" / "sync" / ... -> how many more calls answer 429
        self.retry_after_ms = 200
        self.refuse_all = False  # every call answers 502 (a homeserver that is down behind its proxy)
        # End-to-end encryption: the server only relays keys and to-device messages it cannot read.
        self.passwords: dict[str, str] = {bot: password}
        self.device_keys: dict[str, dict[str, dict[str, Any]]] = {}  # user -> device -> signed device keys
        self.one_time_keys: dict[tuple[str, str], dict[str, Any]] = {}  # (user, device) -> key id -> key
        self.fallback_keys: dict[tuple[str, str], dict[str, Any]] = {}
        self.to_device: dict[tuple[str, str], list[tuple[int, dict[str, Any]]]] = {}  # (user, device) -> events
        self.key_changes: list[tuple[int, str]] = []  # (pos, user) whose device keys changed
        self._txns: dict[tuple[str, str, str], str] = {}
        self._pos = itertools.count(1)
        self._now = 0
        self._cond = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._timer: threading.Timer | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeMatrix:
        fake = self

        class Handler(_Handler):
            api = fake

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self._timer = threading.Timer(self.lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            with self._cond:
                self._cond.notify_all()
            server.shutdown()
            server.server_close()
        if self._timer is not None:
            self._timer.cancel()

    def __enter__(self) -> FakeMatrix:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- what tests do --------------------------------------------------------------------

    def user(self, user_id: str, name: str, password: str | None = None) -> str:
        """Register a user (a person who talks to the bot); with a password, a client can log in as them."""
        with self._cond:
            self.users[user_id] = name
            if password is not None:
                self.passwords[user_id] = password
        return user_id

    def create_room(
        self,
        creator: str,
        members: list[str] | None = None,
        *,
        bot: str | None = "join",
        direct: bool = False,
        name: str | None = None,
        encrypted: bool = False,
    ) -> str:
        """A room made by ``creator`` with ``members`` joined; the bot joined, invited or absent."""
        room_id = f"!{secrets.token_urlsafe(12)}:{SERVER}"
        with self._cond:
            room = self.rooms[room_id] = _Room(room_id)
            self._append(room, creator, "m.room.create", {"creator": creator, "room_version": "10"}, state_key="")
            self._append(room, creator, "m.room.member", self._member(creator, "join"), state_key=creator)
            self._append(room, creator, "m.room.power_levels", {"users": {creator: 100}, "users_default": 0}, state_key="")
            self._append(room, creator, "m.room.join_rules", {"join_rule": "invite"}, state_key="")
            if name:
                self._append(room, creator, "m.room.name", {"name": name}, state_key="")
            if encrypted:
                self._append(room, creator, "m.room.encryption", {"algorithm": "m.megolm.v1.aes-sha2"}, state_key="")
            for member in members or []:
                if member != creator:
                    self._append(room, member, "m.room.member", self._member(member, "join"), state_key=member)
            if bot == "join":
                self._append(room, self.bot, "m.room.member", self._member(self.bot, "join"), state_key=self.bot)
            elif bot == "invite":
                self._append(room, creator, "m.room.member", {"membership": "invite", "is_direct": direct}, state_key=self.bot)
            if direct and bot == "join":
                self._set_direct(creator, self.bot, room_id)
            self._cond.notify_all()
        return room_id

    def dm(self, user: str, *, bot: str = "join") -> str:
        """A direct chat between ``user`` and the bot (joined, or invited with ``is_direct``)."""
        return self.create_room(user, [user], bot=bot, direct=True)

    def invite_bot(self, room_id: str, inviter: str, *, direct: bool = False) -> None:
        with self._cond:
            self._append(self.rooms[room_id], inviter, "m.room.member", {"membership": "invite", "is_direct": direct}, state_key=self.bot)
            self._cond.notify_all()

    def join(self, room_id: str, user: str) -> None:
        with self._cond:
            self._append(self.rooms[room_id], user, "m.room.member", self._member(user, "join"), state_key=user)
            self._cond.notify_all()

    def say(
        self,
        room_id: str,
        user: str,
        body: str,
        *,
        mention_bot: bool = False,
        thread: str | None = None,
        reply_to: str | None = None,
        msgtype: str = "m.text",
        **extra: Any,
    ) -> str:
        """``user`` sends a text in the room; returns its event id.

        ``mention_bot`` makes it mention the bot as Element does: a pill in ``formatted_body``, the
        display name in ``body`` and ``m.mentions``. ``thread`` puts it in the thread of that root
        event, ``reply_to`` makes it a reply.
        """
        content: dict[str, Any] = {"msgtype": msgtype, "body": body, "m.mentions": {}}
        if mention_bot:
            content["body"] = f"{self.bot_name}: {body}"
            content["format"] = "org.matrix.custom.html"
            content["formatted_body"] = f'<a href="https://matrix.to/#/{self.bot}">{self.bot_name}</a>: {body}'
            content["m.mentions"] = {"user_ids": [self.bot]}
        relates = _relation(thread, reply_to)
        if relates:
            content["m.relates_to"] = relates
        content.update(extra)
        return self.send_event(room_id, user, "m.room.message", content)

    def upload(self, data: bytes, mime: str, filename: str | None = None) -> str:
        """Put bytes in the media repository; the ``mxc://`` URI."""
        media_id = secrets.token_urlsafe(12)
        with self._cond:
            self.media[media_id] = (data, mime, filename)
        return f"mxc://{SERVER}/{media_id}"

    def send_file(
        self,
        room_id: str,
        user: str,
        name: str,
        data: bytes,
        mime: str,
        *,
        msgtype: str = "m.file",
        caption: str | None = None,
        voice: bool = False,
        thread: str | None = None,
    ) -> str:
        """``user`` sends a file (``m.file``, ``m.image``, ``m.audio``; ``voice`` marks a voice message)."""
        content: dict[str, Any] = {
            "msgtype": msgtype,
            "body": caption or name,
            "filename": name,
            "url": self.upload(data, mime, name),
            "info": {"mimetype": mime, "size": len(data)},
        }
        if voice:
            content["org.matrix.msc1767.audio"] = {"duration": 1200, "waveform": [0, 512, 1024]}
            content["org.matrix.msc3245.voice"] = {}
        relates = _relation(thread, None)
        if relates:
            content["m.relates_to"] = relates
        return self.send_event(room_id, user, "m.room.message", content)

    def react(self, room_id: str, user: str, event_id: str, key: str) -> str:
        """``user`` reacts to an event (an annotation), as Element does when an emoji is clicked."""
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        return self.send_event(room_id, user, "m.reaction", content)

    def edit_message(self, room_id: str, user: str, event_id: str, body: str) -> str:
        """``user`` edits their own message."""
        content = {
            "msgtype": "m.text",
            "body": f"* {body}",
            "m.new_content": {"msgtype": "m.text", "body": body},
            "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
        }
        return self.send_event(room_id, user, "m.room.message", content)

    def send_event(self, room_id: str, user: str, kind: str, content: dict[str, Any]) -> str:
        with self._cond:
            event = self._append(self.rooms[room_id], user, kind, content)
            self._cond.notify_all()
        return str(event["event_id"])

    def events(self, room_id: str, *, sender: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """Timeline events of a room (copies), oldest first."""
        with self._cond:
            return [
                _public(e)
                for e in self.rooms[room_id].timeline
                if (sender is None or e["sender"] == sender) and (kind is None or e["type"] == kind)
            ]

    def sent(self, room_id: str | None = None) -> list[dict[str, Any]]:
        """The bot's messages, oldest first, each as ``{"event_id", "room_id", "content", "original",
        "edits", "thread"}`` where ``content`` is the newest (its last edit's ``m.new_content``)."""
        with self._cond:
            rooms = [self.rooms[room_id]] if room_id else list(self.rooms.values())
            found: dict[str, dict[str, Any]] = {}
            for room in rooms:
                for event in room.timeline:
                    if event["sender"] != self.bot or event["type"] != "m.room.message":
                        continue
                    content = event["content"]
                    relates = content.get("m.relates_to") or {}
                    if relates.get("rel_type") == "m.replace" and relates.get("event_id") in found:
                        record = found[relates["event_id"]]
                        record["content"] = dict(content.get("m.new_content") or {})
                        record["edits"] += 1
                        continue
                    found[event["event_id"]] = {
                        "event_id": event["event_id"],
                        "room_id": room.room_id,
                        "content": dict(content),
                        "original": dict(content),
                        "edits": 0,
                        "thread": relates.get("event_id") if relates.get("rel_type") == "m.thread" else None,
                        "redacted": event.get("_redacted", False),
                        "pos": event["_pos"],
                    }
            return sorted(found.values(), key=lambda r: r["pos"])

    def texts(self, room_id: str | None = None) -> list[str]:
        return [str(m["content"].get("body", "")) for m in self.sent(room_id)]

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
        raise AssertionError(f"timed out waiting for {what}; the bot sent: {[t[:200] for t in self.texts()]}")

    def wait_text(self, room_id: str, needle: str, timeout: float = 20.0) -> dict[str, Any]:
        """The bot's message in the room whose (newest) body contains ``needle``."""
        return self.wait_for(
            lambda: next((m for m in self.sent(room_id) if needle in str(m["content"].get("body", ""))), None), timeout, repr(needle)
        )

    # -- state ----------------------------------------------------------------------------

    def _member(self, user: str, membership: str) -> dict[str, Any]:
        return {"membership": membership, "displayname": self.users.get(user, user.split(":")[0][1:])}

    def _append(
        self, room: _Room, sender: str, kind: str, content: dict[str, Any], state_key: str | None = None, txn: str | None = None
    ) -> dict[str, Any]:
        self._now = max(self._now + 1, int(time.time() * 1000))
        event: dict[str, Any] = {
            "type": kind,
            "content": content,
            "sender": sender,
            "event_id": "$" + secrets.token_urlsafe(18),
            "origin_server_ts": self._now,
            "unsigned": {"age": 1},
            "_pos": next(self._pos),
        }
        if txn is not None:
            event["unsigned"]["transaction_id"] = txn
            event["_txn_sender"] = sender
        if state_key is not None:
            event["state_key"] = state_key
            room.state[(kind, state_key)] = event
        room.timeline.append(event)
        return event

    def _set_direct(self, user: str, other: str, room_id: str) -> None:
        for owner, peer in ((user, other), (other, user)):
            mine = self.account_data.setdefault(owner, {})
            direct = dict(mine.get("m.direct", (0, {}))[1])
            direct[peer] = sorted(set(direct.get(peer, [])) | {room_id})
            mine["m.direct"] = (next(self._pos), direct)

    def _event(self, room_id: str, event_id: str) -> dict[str, Any] | None:
        room = self.rooms.get(room_id)
        return next((e for e in room.timeline if e["event_id"] == event_id), None) if room else None

    # -- the API --------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, str], token: str | None, body: bytes, headers: Any) -> tuple[int, Any]:
        with self._cond:
            self.calls.append((method, path))
            if self.refuse_all:
                return 502, {"errcode": "M_UNKNOWN", "error": "Bad Gateway"}
        try:
            return 200, self._route(method, path, query, token, body, headers)
        except MatrixError as exc:
            return exc.status, exc.body

    def _limited(self, kind: str) -> None:
        with self._cond:
            if self.rate_limit.get(kind, 0) > 0:
                self.rate_limit[kind] -= 1
                raise MatrixError(429, "M_LIMIT_EXCEEDED", "Too Many Requests", retry_after_ms=self.retry_after_ms)

    def _who(self, token: str | None) -> tuple[str, str]:
        if not token:
            raise MatrixError(401, "M_MISSING_TOKEN", "Missing access token")
        with self._cond:
            found = self.tokens.get(token)
        if found is None:
            raise MatrixError(401, "M_UNKNOWN_TOKEN", "Invalid access token passed.", soft_logout=False)
        return found

    def _route(self, method: str, path: str, query: dict[str, str], token: str | None, body: bytes, headers: Any) -> Any:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[:3] == ["_matrix", "client", "versions"]:
            return {"versions": ["v1.1", "v1.5", "v1.9", "v1.11"], "unstable_features": {}}
        if parts[:2] == ["_matrix", "media"] and parts[3:4] == ["upload"] and method == "POST":
            user, _ = self._who(token)
            self._limited("upload")
            mxc = self.upload(body, headers.get("Content-Type") or "application/octet-stream", query.get("filename"))
            return {"content_uri": mxc}
        if parts[:2] == ["_matrix", "media"] and parts[3:4] == ["download"]:
            return self._download(parts[4:])
        if parts[:4] == ["_matrix", "client", "v1", "media"] and parts[4:5] == ["download"]:
            self._who(token)
            return self._download(parts[5:])
        if parts[:3] != ["_matrix", "client", "v3"]:
            raise MatrixError(404, "M_UNRECOGNIZED", "Unrecognized request")
        rest = parts[3:]
        data = json.loads(body) if body else {}
        if rest == ["login"]:
            if method == "GET":
                return {"flows": [{"type": "m.login.password"}]}
            return self._login(data)
        user, device = self._who(token)
        if rest == ["account", "whoami"]:
            return {"user_id": user, "device_id": device, "is_guest": False}
        if rest == ["sync"]:
            self._limited("sync")
            return self._sync(user, device, query)
        if rest[:1] == ["profile"]:
            name = self.users.get(rest[1])
            if name is None:
                raise MatrixError(404, "M_NOT_FOUND", "Profile was not found")
            return {"displayname": name} if rest[2:] in (["displayname"], []) else {}
        if rest[:1] == ["join"] or (rest[:1] == ["rooms"] and rest[2:] == ["join"]):
            return self._join(user, rest[1])
        if rest == ["createRoom"]:
            return self._create(user, data)
        if rest[:1] == ["user"] and rest[2:3] == ["account_data"]:
            return self._account_data(method, user, rest[1], rest[3], data)
        if rest[:1] == ["user"] and rest[2:3] == ["filter"]:
            return {"filter_id": "1"}
        if rest[:1] == ["rooms"]:
            return self._room_call(method, user, rest[1], rest[2:], data, headers)
        if rest[:1] == ["keys"]:
            return self._keys(user, device, rest[1], data)
        if rest[:1] == ["sendToDevice"]:
            return self._send_to_device(user, rest[1], data)
        raise MatrixError(404, "M_UNRECOGNIZED", f"Unrecognized request: {method} {path}")

    def _login(self, data: dict[str, Any]) -> dict[str, Any]:
        self._limited("login")
        with self._cond:
            self.logins.append({k: v for k, v in data.items() if k != "password"})
        identifier = data.get("identifier") or {}
        user = identifier.get("user") or data.get("user") or ""
        if not user.startswith("@"):
            user = f"@{user}:{SERVER}"
        if data.get("type") != "m.login.password" or user not in self.passwords or data.get("password") != self.passwords[user]:
            raise MatrixError(403, "M_FORBIDDEN", "Invalid username or password")
        device = data.get("device_id") or ("DEV" + secrets.token_hex(4).upper())
        token = "syt_" + secrets.token_urlsafe(24)
        with self._cond:
            self.tokens[token] = (user, device)
        return {"user_id": user, "access_token": token, "device_id": device, "home_server": SERVER}

    def _download(self, parts: list[str]) -> Any:
        if len(parts) < 2 or parts[0] != SERVER or parts[1] not in self.media:
            raise MatrixError(404, "M_NOT_FOUND", "Not found")
        return _Media(*self.media[parts[1]])

    def _sync(self, user: str, device: str, query: dict[str, str]) -> dict[str, Any]:
        since = int(query["since"]) if query.get("since") else None
        full_state = query.get("full_state") == "true"
        wait = min(float(query.get("timeout") or 0) / 1000, self.max_wait) if since is not None else 0.0
        deadline = time.monotonic() + wait
        with self._cond:
            while True:
                response, anything = self._sync_response(user, device, since, full_state)
                left = deadline - time.monotonic()
                if anything or left <= 0 or self._server is None:
                    return response
                self._cond.wait(left)

    def _sync_response(self, user: str, device: str, since: int | None, full_state: bool) -> tuple[dict[str, Any], bool]:
        next_batch = next(self._pos)
        join: dict[str, Any] = {}
        invite: dict[str, Any] = {}
        for room in self.rooms.values():
            member = room.state.get(("m.room.member", user))
            if member is None:
                continue
            membership = member["content"].get("membership")
            if membership == "invite" and (since is None or member["_pos"] > since):
                stripped = [
                    {k: e[k] for k in ("type", "state_key", "content", "sender")}
                    for (kind, _), e in room.state.items()
                    if kind in ("m.room.create", "m.room.name", "m.room.join_rules", "m.room.encryption") or e is member
                ]
                inviter = room.state.get(("m.room.member", member["sender"]))
                if inviter is not None:
                    stripped.append({k: inviter[k] for k in ("type", "state_key", "content", "sender")})
                invite[room.room_id] = {"invite_state": {"events": stripped}}
            if membership != "join":
                continue
            newly = since is None or member["_pos"] > since
            timeline = [e for e in room.timeline if since is None or e["_pos"] > since]
            limited = False
            if since is None and len(timeline) > 20:
                timeline, limited = timeline[-20:], True
            if not timeline and not (full_state or newly):
                continue
            state = list(room.state.values()) if (full_state or newly) else []
            join[room.room_id] = {
                "timeline": {"events": [_public(e, user) for e in timeline], "limited": limited, "prev_batch": str(since or 0)},
                "state": {"events": [_public(e, user) for e in state if e not in timeline]},
                "ephemeral": {"events": []},
                "account_data": {"events": []},
                "summary": {
                    "m.joined_member_count": len(room.members("join")),
                    "m.invited_member_count": len(room.members("invite")),
                    "m.heroes": [m for m in room.members("join") if m != user][:5],
                },
                "unread_notifications": {"highlight_count": 0, "notification_count": 0},
            }
        account = [
            {"type": kind, "content": content}
            for kind, (pos, content) in self.account_data.get(user, {}).items()
            if since is None or pos > since
        ]
        to_device = [event for pos, event in self.to_device.get((user, device), []) if since is None or pos > since]
        if since is not None:  # a sync with a later token acknowledges what came before it
            self.to_device[(user, device)] = [(p, e) for p, e in self.to_device.get((user, device), []) if p > since]
        sharing = {m for r in self.rooms.values() if r.membership(user) == "join" for m in r.members("join")} | {user}
        changed = sorted({u for pos, u in self.key_changes if since is not None and pos > since and u in sharing})
        anything = bool(account or invite or to_device or changed or any(r["timeline"]["events"] for r in join.values()))
        response = {
            "next_batch": str(next_batch),
            "rooms": {"join": join, "invite": invite, "leave": {}},
            "account_data": {"events": account},
            "presence": {"events": []},
            "to_device": {"events": to_device},
            "device_lists": {"changed": changed, "left": []},
            "device_one_time_keys_count": {"signed_curve25519": len(self.one_time_keys.get((user, device), {}))},
            "device_unused_fallback_key_types": ["signed_curve25519"] if self.fallback_keys.get((user, device)) else [],
        }
        return response, anything

    def _keys(self, user: str, device: str, action: str, data: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            if action == "upload":
                if data.get("device_keys"):
                    self.device_keys.setdefault(user, {})[device] = data["device_keys"]
                    self.key_changes.append((next(self._pos), user))
                self.one_time_keys.setdefault((user, device), {}).update(data.get("one_time_keys") or {})
                if data.get("fallback_keys"):
                    self.fallback_keys[(user, device)] = data["fallback_keys"]
                self._cond.notify_all()
                return {"one_time_key_counts": {"signed_curve25519": len(self.one_time_keys[(user, device)])}}
            if action == "query":
                wanted: dict[str, list[str]] = data.get("device_keys") or {}
                found = {
                    u: {d: k for d, k in self.device_keys.get(u, {}).items() if not devices or d in devices}
                    for u, devices in wanted.items()
                }
                return {"device_keys": found, "failures": {}}
            if action == "claim":
                claimed: dict[str, dict[str, Any]] = {}
                for u, devices in (data.get("one_time_keys") or {}).items():
                    for d in devices:
                        keys = self.one_time_keys.get((u, d)) or {}
                        if keys:
                            key_id = next(iter(keys))
                            claimed.setdefault(u, {})[d] = {key_id: keys.pop(key_id)}
                        elif self.fallback_keys.get((u, d)):
                            claimed.setdefault(u, {})[d] = dict(self.fallback_keys[(u, d)])
                return {"one_time_keys": claimed, "failures": {}}
        raise MatrixError(404, "M_UNRECOGNIZED", f"Unrecognized request: keys/{action}")

    def _send_to_device(self, user: str, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            for target, devices in (data.get("messages") or {}).items():
                for device, content in devices.items():
                    names = list(self.device_keys.get(target, {})) if device == "*" else [device]
                    for name in names:
                        event = {"type": kind, "sender": user, "content": content}
                        self.to_device.setdefault((target, name), []).append((next(self._pos), event))
            self._cond.notify_all()
        return {}

    def _join(self, user: str, room_id: str) -> dict[str, Any]:
        with self._cond:
            room = self.rooms.get(room_id)
            if room is None:
                raise MatrixError(404, "M_NOT_FOUND", "No known servers")
            if room.membership(user) not in ("invite", "join"):
                raise MatrixError(403, "M_FORBIDDEN", "You are not invited to this room.")
            if room.membership(user) == "invite":
                self._append(room, user, "m.room.member", self._member(user, "join"), state_key=user)
            self._cond.notify_all()
        return {"room_id": room_id}

    def _create(self, user: str, data: dict[str, Any]) -> dict[str, Any]:
        invites = list(data.get("invite") or [])
        room_id = self.create_room(user, [user], bot=None, name=data.get("name"))
        with self._cond:
            room = self.rooms[room_id]
            for other in invites:
                self._append(
                    room, user, "m.room.member", {"membership": "invite", "is_direct": bool(data.get("is_direct"))}, state_key=other
                )
            self._cond.notify_all()
        return {"room_id": room_id}

    def _account_data(self, method: str, user: str, owner: str, kind: str, data: dict[str, Any]) -> Any:
        if owner != user:
            raise MatrixError(403, "M_FORBIDDEN", "Cannot access other users' account data")
        with self._cond:
            mine = self.account_data.setdefault(user, {})
            if method == "PUT":
                mine[kind] = (next(self._pos), data)
                self._cond.notify_all()
                return {}
            if kind not in mine:
                raise MatrixError(404, "M_NOT_FOUND", "Account data not found")
            return mine[kind][1]

    def _room_call(self, method: str, user: str, room_id: str, rest: list[str], data: dict[str, Any], headers: Any) -> Any:
        with self._cond:
            room = self.rooms.get(room_id)
            if room is None:
                raise MatrixError(404, "M_NOT_FOUND", "Unknown room")
            membership = room.membership(user)
            if rest == ["leave"]:
                self._append(room, user, "m.room.member", self._member(user, "leave"), state_key=user)
                self._cond.notify_all()
                return {}
            if membership != "join":
                raise MatrixError(403, "M_FORBIDDEN", f"User {user} not in room {room_id}")
            if rest[:1] == ["send"] and method == "PUT":
                return self._send(room, user, rest[1], rest[2], data)
            if rest[:1] == ["redact"] and method == "PUT":
                target = self._event(room_id, rest[1])
                if target is None:
                    raise MatrixError(404, "M_NOT_FOUND", "Event not found")
                if target["sender"] != user:
                    raise MatrixError(403, "M_FORBIDDEN", "You cannot redact another user's event")
                target["_redacted"] = True
                event = self._append(room, user, "m.room.redaction", {"redacts": rest[1], **data})
                event["redacts"] = rest[1]
                self._cond.notify_all()
                return {"event_id": event["event_id"]}
            if rest[:1] == ["typing"]:
                self.typing.append((room_id, user, bool(data.get("typing"))))
                self._cond.notify_all()
                return {}
            if rest[:1] == ["receipt"] or rest == ["read_markers"]:
                return {}
            if rest == ["joined_members"]:
                return {"joined": {m: {"display_name": self.users.get(m), "avatar_url": None} for m in room.members("join")}}
            if rest == ["members"]:
                return {"chunk": [_public(e) for (kind, _), e in room.state.items() if kind == "m.room.member"]}
            if rest == ["state"]:
                return [_public(e) for e in room.state.values()]
            if rest[:1] == ["event"]:
                event = self._event(room_id, rest[1])
                if event is None:
                    raise MatrixError(404, "M_NOT_FOUND", "Event not found")
                return {**_public(event), "room_id": room_id}
        raise MatrixError(404, "M_UNRECOGNIZED", f"Unrecognized request: {method} rooms/{room_id}/{'/'.join(rest)}")

    def _send(self, room: _Room, user: str, kind: str, txn: str, content: dict[str, Any]) -> dict[str, Any]:
        key = (user, room.room_id, txn)
        if key in self._txns:
            return {"event_id": self._txns[key]}
        self._limited("send")
        probe = {
            "type": kind,
            "content": content,
            "sender": user,
            "room_id": room.room_id,
            "event_id": "$" + "x" * 43,
            "origin_server_ts": 0,
        }
        if _event_size(probe) > MAX_EVENT_BYTES:
            raise MatrixError(413, "M_TOO_LARGE", "event too large")
        relates = content.get("m.relates_to") or {}
        if (
            relates.get("rel_type") in ("m.replace", "m.annotation", "m.thread")
            and self._event(room.room_id, relates.get("event_id", "")) is None
        ):
            raise MatrixError(400, "M_UNKNOWN", "Related event not found in this room")
        event = self._append(room, user, kind, content, txn=txn)
        self._txns[key] = event["event_id"]
        self._cond.notify_all()
        return {"event_id": event["event_id"]}


def _relation(thread: str | None, reply_to: str | None) -> dict[str, Any]:
    if thread:
        return {
            "rel_type": "m.thread",
            "event_id": thread,
            "is_falling_back": reply_to is None,
            "m.in_reply_to": {"event_id": reply_to or thread},
        }
    if reply_to:
        return {"m.in_reply_to": {"event_id": reply_to}}
    return {}


def _public(event: dict[str, Any], viewer: str | None = None) -> dict[str, Any]:
    """An event as clients see it: no private fields; the transaction id only to its sender."""
    out = {k: v for k, v in event.items() if not k.startswith("_")}
    out["unsigned"] = dict(out.get("unsigned") or {})
    if event.get("_txn_sender") != viewer:
        out["unsigned"].pop("transaction_id", None)
    if event.get("_redacted"):
        out["content"] = {}
        out["unsigned"]["redacted_because"] = {"type": "m.room.redaction"}
    return out


@dataclass
class _Media:
    data: bytes
    mime: str
    filename: str | None


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-poll (the gateway stopping) is normal


class _Handler(BaseHTTPRequestHandler):
    api: FakeMatrix
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _dispatch(self, method: str) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        token = query.pop("access_token", None)
        auth = self.headers.get("Authorization") or ""
        if auth.startswith("Bearer "):
            token = auth[len("Bearer ") :]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, payload = self.api.handle(method, split.path, query, token, body, self.headers)
        if isinstance(payload, _Media):
            self.send_response(status)
            self.send_header("Content-Type", payload.mime)
            if payload.filename:
                self.send_header("Content-Disposition", f"inline; filename*=utf-8''{quote(payload.filename)}")
            self.send_header("Content-Length", str(len(payload.data)))
            self.end_headers()
            self.wfile.write(payload.data)
        else:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        with self.api._cond:
            self.api._cond.notify_all()  # wakes wait_for: the bot did something

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")
