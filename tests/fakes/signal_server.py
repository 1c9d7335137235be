"""A fake signal-cli daemon (``signal-cli -a NUMBER daemon --http``) on 127.0.0.1.

Real HTTP, the daemon's three endpoints as signal-cli 0.13/0.14 serves them:

- ``POST /api/v1/rpc``: JSON-RPC 2.0 (single or batch; Content-Type must be JSON, else 415):
  ``send`` (recipient / groupId, message, textStyle, attachments as data URIs or file paths,
  editTimestamp, voiceNote), ``sendTyping``, ``sendReaction``, ``getAttachment`` (base64),
  ``listGroups``, ``version``, and ``listAccounts`` when it serves several accounts (a daemon
  started with ``-a`` answers it with -32601, as signal-cli does). Errors carry signal-cli's
  codes: -1 user error, -4 untrusted identity, -5 rate limit (with ``retryAfterSeconds``).
- ``GET /api/v1/events``: Server-Sent Events, ``event:receive`` with ``{"envelope", "account"}``
  per incoming message, chunked, with ``:`` keep-alives; ``?account=`` unknown to a
  multi-account daemon is 400.
- ``GET /api/v1/check``: 200.

Like the daemon it refuses a Host header that is not its own address (421). Tests inject what
users send (direct and group messages, mentions as U+FFFC with UTF-16 positions, quotes,
attachments, voice notes, reactions) and read what the bot sent. The server stops itself after
``lifetime`` seconds whatever happens.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import os
import re
import threading
import time
import uuid as uuidlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["FakeSignalCli", "SignalUser"]

MENTION = "\ufffc"
_CLOSE: dict[str, Any] = {}  # put on a stream: end it
_STYLES = {"NONE", "BOLD", "ITALIC", "SPOILER", "STRIKETHROUGH", "MONOSPACE"}
_STYLE_SYNTAX = re.compile(r"(\d+):(\d+):(.+)")
# signal-cli's DataURI pattern (RFC 2397 with a filename parameter).
_DATA_URI = re.compile(r"\Adata:(?P<type>.+?/.+?)?(?P<parameters>;.+?=.+?)?(?P<base64>;base64)?,(?P<data>.+)\Z", re.I | re.S)


@dataclass(frozen=True)
class SignalUser:
    """A Signal account: its ACI (uuid) and, unless hidden, its number."""

    uuid: str
    number: str | None
    name: str = "Ada"

    @property
    def native(self) -> str:
        """The id the adapter uses: the uuid."""
        return self.uuid


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


class FakeSignalCli:
    """State of the fake daemon: events to hand out, messages the bot sent, attachments, failures."""

    def __init__(
        self,
        account: str = "+15550100001",
        *,
        accounts: Iterable[str] | None = None,
        lifetime: float = 300.0,
        keepalive: float = 2.0,
        port: int = 0,
    ) -> None:
        self.account = account
        self._port = port
        self.bot_uuid = str(uuidlib.uuid4())
        # None: a daemon for one account (started with -a); else the accounts a multi-account daemon has.
        self.accounts = list(accounts) if accounts is not None else None
        self.lifetime = lifetime
        self.keepalive = keepalive
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.messages: list[dict[str, Any]] = []  # what the bot sent, oldest first
        self.reactions: list[dict[str, Any]] = []
        self.typing: list[dict[str, Any]] = []
        self.attachments: dict[str, bytes] = {}
        self.users: dict[str, SignalUser] = {}
        self.rate_limited = 0  # how many more sends answer -5 (rate limit)
        self.retry_after = 1
        self.untrusted: set[str] = set()  # recipients whose safety number changed: sends to them fail with -4
        self.reject_styles = False  # refuse textStyle, as the daemon refuses a style it does not know
        self.event_connections = 0
        self.event_deliveries = 0  # events written to a stream
        # Set to a cleared Event to hold every JSON-RPC answer (after the work is done) until it is set.
        self.hold_answers: threading.Event | None = None
        self._numbers = itertools.count(1001)
        self._last_ts = 0
        self._pending: list[dict[str, Any]] = []  # events before any stream is open
        self._streams: list[list[dict[str, Any]]] = []
        self._cond = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._timer: threading.Timer | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeSignalCli:
        fake = self

        class Handler(_Handler):
            api = fake

        self._server = _QuietServer(("127.0.0.1", self._port), Handler)
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

    def __enter__(self) -> FakeSignalCli:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def open_streams(self) -> int:
        """Event streams open now."""
        with self._cond:
            return len(self._streams)

    def drop_streams(self) -> None:
        """End every open event stream (the daemon restarting); the client must reconnect."""
        with self._cond:
            for stream in self._streams:
                stream.append(_CLOSE)
            self._cond.notify_all()

    # -- what tests do --------------------------------------------------------------------

    def user(self, name: str = "Ada", *, hide_number: bool = False) -> SignalUser:
        """A new Signal user; ``hide_number`` as with phone number privacy (only the uuid travels)."""
        number = None if hide_number else f"+1555020{next(self._numbers):04d}"
        person = SignalUser(str(uuidlib.uuid4()), number, name)
        self.users[person.uuid] = person
        return person

    @staticmethod
    def new_group_id() -> str:
        return base64.b64encode(os.urandom(32)).decode()

    def add_attachment(self, data: bytes, content_type: str, filename: str | None = None) -> dict[str, Any]:
        """Bytes as the daemon stores a received attachment; the JSON the envelope carries."""
        extension = Path(filename).suffix if filename else ""
        attachment_id = base64.urlsafe_b64encode(os.urandom(15)).decode() + extension
        self.attachments[attachment_id] = data
        return {
            "contentType": content_type,
            "filename": filename,
            "id": attachment_id,
            "size": len(data),
            "width": None,
            "height": None,
            "caption": None,
            "uploadTimestamp": self._timestamp(),
        }

    def message(
        self,
        sender: SignalUser,
        text: str = "",
        *,
        group: str | None = None,
        mention_bot: bool = False,
        mention: Iterable[SignalUser] = (),
        quote: dict[str, Any] | None = None,
        attachments: Iterable[dict[str, Any]] = (),
    ) -> int:
        """A user's message reaches the bot (its timestamp). ``mention_bot`` puts the bot's mention
        first; ``quote`` is one of the bot's sent messages being replied to."""
        mentions: list[dict[str, Any]] = []
        for other in mention:
            mentions.append(self._mention(len(text.encode("utf-16-le")) // 2 + 1, other.number, other.uuid))
            text = f"{text} {MENTION}"
        if mention_bot:
            mentions = [{**m, "start": m["start"] + 2} for m in mentions]
            mentions.insert(0, self._mention(0, self.account, self.bot_uuid))
            text = f"{MENTION} {text}"
        data: dict[str, Any] = {"timestamp": 0, "message": text or None, "expiresInSeconds": 0, "viewOnce": False}
        if mentions:
            data["mentions"] = mentions
        if quote is not None:
            data["quote"] = {
                "id": quote["timestamp"],
                "author": self.account,
                "authorNumber": self.account,
                "authorUuid": self.bot_uuid,
                "text": quote["text"],
                "attachments": [],
            }
        if attachments:
            data["attachments"] = list(attachments)
        return self._deliver(sender, data, group)

    def react(self, sender: SignalUser, target_timestamp: int | str, emoji: str, *, group: str | None = None, remove: bool = False) -> int:
        """A user reacts to one of the bot's messages."""
        reaction = {
            "emoji": emoji,
            "targetAuthor": self.account,
            "targetAuthorNumber": self.account,
            "targetAuthorUuid": self.bot_uuid,
            "targetSentTimestamp": int(target_timestamp),
            "isRemove": remove,
        }
        return self._deliver(
            sender, {"timestamp": 0, "message": None, "expiresInSeconds": 0, "viewOnce": False, "reaction": reaction}, group
        )

    def push(self, event: dict[str, Any]) -> None:
        """One SSE ``receive`` payload to every open stream (kept until one opens)."""
        with self._cond:
            if self._streams:
                for stream in self._streams:
                    stream.append(event)
            else:
                self._pending.append(event)
            self._cond.notify_all()

    def sent(self, to: str | None = None) -> list[dict[str, Any]]:
        """Messages the bot sent (latest text), oldest first; ``to`` a user's uuid or number, or "group.<id>"."""
        with self._cond:
            return [m for m in self.messages if to is None or m["to"] == to]

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 20.0, what: str = "a message") -> Any:
        """Wait until ``predicate()`` is truthy; checked whenever the bot calls the daemon, and every 50 ms."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            found = predicate()
            if found:
                return found
            with self._cond:
                self._cond.wait(min(0.05, left))
        raise AssertionError(f"timed out waiting for {what}; the bot sent: {[(m['to'], m['text'][:200]) for m in self.sent()]}")

    def wait_text(self, to: str, needle: str, timeout: float = 20.0) -> dict[str, Any]:
        return self.wait_for(lambda: next((m for m in self.sent(to) if needle in m["text"]), None), timeout, repr(needle))

    # -- building envelopes ---------------------------------------------------------------

    def _timestamp(self) -> int:
        with self._cond:
            self._last_ts = max(int(time.time() * 1000), self._last_ts + 1)
            return self._last_ts

    def _mention(self, start: int, number: str | None, uuid: str) -> dict[str, Any]:
        return {"name": number or uuid, "number": number, "uuid": uuid, "start": start, "length": 1}

    def _deliver(self, sender: SignalUser, data: dict[str, Any], group: str | None) -> int:
        timestamp = self._timestamp()
        data["timestamp"] = timestamp
        if group is not None:
            data["groupInfo"] = {"groupId": group, "groupName": "Test group", "revision": 2, "type": "DELIVER"}
        envelope = {
            "source": sender.number or sender.uuid,
            "sourceNumber": sender.number,
            "sourceUuid": sender.uuid,
            "sourceName": sender.name,
            "sourceDevice": 1,
            "timestamp": timestamp,
            "serverReceivedTimestamp": timestamp + 3,
            "serverDeliveredTimestamp": timestamp + 5,
            "dataMessage": data,
        }
        self.push({"envelope": envelope, "account": self.account})
        return timestamp

    # -- the daemon -----------------------------------------------------------------------

    def rpc(self, request: Any) -> dict[str, Any] | None:
        """One JSON-RPC request object; the response (None for a notification)."""
        if not isinstance(request, dict) or not request.get("method"):
            return {"jsonrpc": "2.0", "error": {"code": -32600, "message": "method field must be set", "data": None}, "id": None}
        method, params, rid = request["method"], dict(request.get("params") or {}), request.get("id")
        with self._cond:
            self.calls.append((method, params))
        try:
            result = self._method(method, params)
        except RpcError as exc:
            return {"jsonrpc": "2.0", "error": {"code": exc.code, "message": exc.message, "data": exc.data}, "id": rid}
        finally:
            with self._cond:
                self._cond.notify_all()
        return {"jsonrpc": "2.0", "result": result, "id": rid} if "id" in request else None

    def _method(self, method: str, params: dict[str, Any]) -> Any:
        account = params.pop("account", None)
        if self.accounts is not None:
            if method == "listAccounts":
                return [{"number": n} for n in self.accounts]
            if account is not None and account not in self.accounts:
                raise RpcError(-32602, "Specified account does not exist")
        if method == "send":
            return self._send(params)
        if method == "sendTyping":
            with self._cond:
                self.typing.append({"to": self._destination(params), "stop": bool(params.get("stop"))})
            return {"timestamp": self._timestamp(), "results": []}
        if method == "sendReaction":
            with self._cond:
                self.reactions.append({"to": self._destination(params), **params})
            return {"timestamp": self._timestamp(), "results": []}
        if method == "getAttachment":
            attachment_id = params.get("id")
            if attachment_id not in self.attachments:
                raise RpcError(-1, f"Could not find attachment with ID: {attachment_id}")
            return {"data": base64.b64encode(self.attachments[attachment_id]).decode()}
        if method == "listGroups":
            return []
        if method == "version":
            return {"version": "0.14.6"}
        raise RpcError(-32601, "Method not implemented")

    def _destination(self, params: dict[str, Any]) -> str:
        groups = _listed(params, "groupId")
        recipients = _listed(params, "recipient")
        if groups:
            return f"group.{groups[0]}"
        if recipients:
            return str(recipients[0])
        raise RpcError(-1, "No recipients given")

    def _send(self, params: dict[str, Any]) -> dict[str, Any]:
        to = self._destination(params)
        text = str(params.get("message") or "")
        styles = [str(s) for s in _listed(params, "textStyle")]
        for style in styles:
            match = _STYLE_SYNTAX.fullmatch(style)
            if match is None:
                raise RpcError(-1, f"Invalid textStyle syntax ({style}) expected 'start:length:STYLE'")
            if match.group(3) not in _STYLES:
                raise RpcError(-1, f"Invalid style: {match.group(3)}")
        if styles and self.reject_styles:
            raise RpcError(-1, f"Invalid style: {styles[0].rsplit(':', 1)[1]}")
        files = [_attachment(str(a)) for a in _listed(params, "attachment")]
        if not text and not files:
            raise RpcError(-1, "Sending empty message is not allowed, either a message, attachment or sticker must be given.")
        timestamp = self._timestamp()
        address = self._address(to)
        with self._cond:
            if to in self.untrusted:
                results = [{**address, "type": "IDENTITY_FAILURE"}]
                raise RpcError(
                    -4, "Failed to send message due to untrusted identities", {"response": {"timestamp": timestamp, "results": results}}
                )
            if self.rate_limited > 0:
                self.rate_limited -= 1
                results = [{**address, "type": "RATE_LIMIT_FAILURE", "retryAfterSeconds": self.retry_after}]
                raise RpcError(
                    -5, "Failed to send message due to rate limiting", {"response": {"timestamp": timestamp, "results": results}}
                )
            if params.get("editTimestamp") is not None:
                target = next((m for m in self.messages if m["timestamp"] == int(params["editTimestamp"]) and m["to"] == to), None)
                if target is None:
                    raise RpcError(-1, "Failed to send message: the message to edit was not found")
                target.update(text=text, styles=styles, edits=target["edits"] + 1)
            else:
                self.messages.append(
                    {
                        "timestamp": timestamp,
                        "to": to,
                        "text": text,
                        "styles": styles,
                        "attachments": files,
                        "voice_note": bool(params.get("voiceNote")),
                        "edits": 0,
                    }
                )
        return {"timestamp": timestamp, "results": [{**address, "type": "SUCCESS"}]}

    def _address(self, to: str) -> dict[str, Any]:
        if to.startswith("group."):
            return {"recipientAddress": {"uuid": str(uuidlib.uuid4()), "number": None, "username": None}, "groupId": to[6:]}
        person = self.users.get(to) or next((u for u in self.users.values() if u.number == to), None)
        if person is None:
            return {"recipientAddress": {"uuid": to if "-" in to else None, "number": None if "-" in to else to, "username": None}}
        return {"recipientAddress": {"uuid": person.uuid, "number": person.number, "username": None}}

    def _open_stream(self, account: str | None) -> list[dict[str, Any]] | None:
        if self.accounts is not None and account and account not in self.accounts:
            return None
        with self._cond:
            stream = list(self._pending)
            self._pending.clear()
            self._streams.append(stream)
            self.event_connections += 1
            self._cond.notify_all()
        return stream

    def _close_stream(self, stream: list[dict[str, Any]]) -> None:
        with self._cond:
            self._streams = [s for s in self._streams if s is not stream]  # by identity: empty lists are equal


def _listed(params: dict[str, Any], key: str) -> list[Any]:
    """A list argument as signal-cli reads it: ``key`` or its plural, a single value or a list."""
    value = params.get(key, params.get(key + "s"))
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _attachment(spec: str) -> dict[str, Any]:
    """An attachment to send: a data URI (with ``filename=``) or a file path, as signal-cli reads it."""
    match = _DATA_URI.match(spec)
    if match is None:
        path = Path(spec)
        if not path.is_file():
            raise RpcError(-1, f"Failed to send message: {spec} (No such file or directory) (AttachmentInvalidException)")
        return {"name": path.name, "mime": "application/octet-stream", "data": path.read_bytes()}
    parameters: dict[str, str] = {}
    for part in (match.group("parameters") or "").split(";")[1:]:
        key, _, value = part.partition("=")
        parameters[key] = unquote(value)
    try:
        data = base64.b64decode(match.group("data"), validate=True) if match.group("base64") else unquote(match.group("data")).encode()
    except binascii.Error:
        raise RpcError(-1, "Failed to send message: the data URI's base64 is invalid (AttachmentInvalidException)") from None
    return {"name": parameters.get("filename"), "mime": match.group("type") or "text/plain", "data": data}


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-stream (the gateway stopping) is normal


class _Handler(BaseHTTPRequestHandler):
    api: FakeSignalCli
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _host_allowed(self) -> bool:
        host, _, port = (self.headers.get("Host") or "").rpartition(":")
        return host.lower() in ("127.0.0.1", "localhost", "[::1]") and port == str(self.api.port)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/api/v1/check":
            self._reply(200, None)
        elif url.path == "/api/v1/events":
            self._events(parse_qs(url.query).get("account", [None])[0])
        else:
            self._reply(404, None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if urlsplit(self.path).path != "/api/v1/rpc":
            self._reply(404 if urlsplit(self.path).path != "/api/v1/events" else 405, None)
            return
        if not self._host_allowed():
            self._reply(421, None)
            return
        if not (self.headers.get("Content-Type") or "").startswith("application/json"):
            self._reply(415, None)
            return
        try:
            request = json.loads(raw)
        except ValueError:
            self._reply(200, {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error", "data": None}, "id": None})
            return
        if self.api.hold_answers is not None:
            self._answer_after_hold(request)
            return
        if isinstance(request, list):
            responses = [r for r in (self.api.rpc(item) for item in request) if r is not None]
            self._reply(200 if responses else 201, responses or None)
        else:
            response = self.api.rpc(request)
            self._reply(200 if response is not None else 201, response)

    def _answer_after_hold(self, request: Any) -> None:
        response = self.api.rpc(request) if isinstance(request, dict) else None
        assert self.api.hold_answers is not None
        self.api.hold_answers.wait(30)
        self._reply(200 if response is not None else 201, response)

    def _events(self, account: str | None) -> None:
        if not self._host_allowed():
            self._reply(421, None)
            return
        api = self.api
        stream = api._open_stream(account)
        if stream is None:
            self._reply(400, None)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            while True:
                with api._cond:
                    if not stream and api._server is not None:
                        api._cond.wait(api.keepalive)
                    events, stream[:] = list(stream), []
                    stopped = api._server is None
                if not events and not stopped:
                    self._chunk(b":\n")  # signal-cli's keep-alive
                for event in events:
                    if event is _CLOSE:
                        stopped = True
                        break
                    self._chunk(f"event:receive\ndata:{json.dumps(event)}\n\n".encode())
                    with api._cond:
                        api.event_deliveries += 1
                if stopped:
                    break
            self._chunk(b"")
        except OSError:
            pass
        finally:
            api._close_stream(stream)
            self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _reply(self, status: int, payload: Any) -> None:
        self.send_response(status)
        if payload is None:
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps(payload).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
