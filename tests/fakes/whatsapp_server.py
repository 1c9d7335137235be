"""A fake WhatsApp Cloud API (the Graph API) on 127.0.0.1, and Meta's side of the webhook.

Real HTTP (``ThreadingHTTPServer``) under ``/v26.0``, with the Graph API's JSON shapes:

- ``GET /{phone_number_id}`` (``verified_name``, ``display_phone_number``);
- ``POST /{phone_number_id}/messages``: text, interactive (reply buttons, lists), media by id,
  and the read receipt with ``typing_indicator``; checked as the Cloud API checks them (text up to
  4096 characters, an interactive body up to 1024, at most 3 buttons with titles up to 20 and
  unique ids, lists up to 10 rows) and answered with a ``wamid`` or a Graph error;
- ``POST /{phone_number_id}/media`` (multipart: ``messaging_product``, ``type``, ``file``);
- ``GET /{media_id}`` gives a download URL on this server, and that URL wants the bearer token.

A wrong bearer token gets 401 with Graph's OAuthException (code 190). ``throttle`` answers the
next sends with 429 and a Retry-After (code 130429).

Tests play Meta too: ``text``/``media``/``press`` build inbound webhook payloads in the real
shape, and ``post`` delivers one to the bot's listener signed with the app secret
(``X-Hub-Signature-256``). The server stops itself after ``lifetime`` seconds whatever happens.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import hmac
import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["FakeWhatsApp", "sign"]

VERSION = "v26.0"


def sign(app_secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` header Meta sends with ``body``."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


class FakeWhatsApp:
    """State of the fake API: what the bot sent, files both ways, injected failures."""

    def __init__(
        self,
        *,
        token: str = "EAAG-test-access-token-not-real-0123456789",
        phone_number_id: str = "106540352242922",
        app_secret: str = "app-secret-for-tests-0123456789abcdef",
        verify_token: str = "verify-me-please",
        lifetime: float = 300.0,
    ) -> None:
        self.token = token
        self.phone_number_id = phone_number_id
        self.app_secret = app_secret
        self.verify_token = verify_token
        self.display_phone_number = "+1 555-010-0999"
        self.wa_id = "15550100999"
        self.verified_name = "Hermes Test"
        self.waba_id = "102290129340398"
        self.lifetime = lifetime
        self.calls: list[tuple[str, str, dict[str, Any]]] = []  # (method, path, body or query)
        self.messages: list[dict[str, Any]] = []  # accepted sends, oldest first: {"id", "to", "type", ..., "payload"}
        self.reads: list[dict[str, Any]] = []  # read receipts (with typing indicators)
        self.uploads: list[dict[str, Any]] = []  # media the bot uploaded: {"id", "type", "name", "mime", "data"}
        self.files: dict[str, tuple[bytes, str]] = {}  # media id -> (bytes, mime), both ways
        self.throttle = 0  # how many more sends answer 429
        self.media_url_root: str | None = None  # where download URLs point (this server by default)
        self.webhook_url: str | None = None
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._timer: threading.Timer | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeWhatsApp:
        fake = self

        class Handler(_Handler):
            api = fake

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._timer = threading.Timer(self.lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            server.shutdown()
            server.server_close()
        if self._timer is not None:
            self._timer.cancel()

    def __enter__(self) -> FakeWhatsApp:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def root(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        """What ``[whatsapp] api_base_url`` is set to."""
        return f"{self.root}/{VERSION}"

    # -- Meta's side of the webhook -------------------------------------------------------

    def _wamid(self) -> str:
        return f"wamid.HBgL{next(self._ids):010d}FQIAEhgU"

    def envelope(
        self,
        *,
        messages: list[dict[str, Any]] | None = None,
        statuses: list[dict[str, Any]] | None = None,
        contacts: list[dict[str, Any]] | None = None,
        phone_number_id: str | None = None,
    ) -> dict[str, Any]:
        """A ``messages`` webhook delivery around ``messages`` and ``statuses`` (for another number with ``phone_number_id``)."""
        value: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "metadata": {
                "display_phone_number": self.display_phone_number.replace("+", "").replace(" ", "").replace("-", ""),
                "phone_number_id": phone_number_id or self.phone_number_id,
            },
        }
        if contacts:
            value["contacts"] = contacts
        if messages:
            value["messages"] = messages
        if statuses:
            value["statuses"] = statuses
        return {"object": "whatsapp_business_account", "entry": [{"id": self.waba_id, "changes": [{"value": value, "field": "messages"}]}]}

    def _user_message(self, wa_id: str, kind: str, content: dict[str, Any], *, context: str | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"from": wa_id, "id": self._wamid(), "timestamp": str(int(time.time())), "type": kind, kind: content}
        if context:
            message["context"] = {"from": self.wa_id, "id": context}
        return message

    def text(self, wa_id: str, body: str, *, name: str = "Ada", context: str | None = None, **envelope: Any) -> dict[str, Any]:
        """A text message from ``wa_id`` (a reply to ``context`` when given), as Meta delivers it."""
        message = self._user_message(wa_id, "text", {"body": body}, context=context)
        return self.envelope(messages=[message], contacts=[{"profile": {"name": name}, "wa_id": wa_id}], **envelope)

    def media(
        self,
        wa_id: str,
        kind: str,
        data: bytes,
        mime: str,
        *,
        caption: str | None = None,
        filename: str | None = None,
        voice: bool = False,
        name: str = "Ada",
    ) -> dict[str, Any]:
        """A photo, document, audio (``voice`` for a voice note) ... from ``wa_id``; the bytes are served here."""
        media_id = str(900000000 + next(self._ids))
        with self._cond:
            self.files[media_id] = (data, mime)
        content: dict[str, Any] = {"mime_type": mime, "sha256": hashlib.sha256(data).hexdigest(), "id": media_id}
        if caption is not None:
            content["caption"] = caption
        if filename is not None:
            content["filename"] = filename
        if kind == "audio":
            content["voice"] = voice
        message = self._user_message(wa_id, kind, content)
        return self.envelope(messages=[message], contacts=[{"profile": {"name": name}, "wa_id": wa_id}])

    def press(self, wa_id: str, sent: dict[str, Any], data: str, *, name: str = "Ada") -> dict[str, Any]:
        """``wa_id`` taps the button with id ``data`` on ``sent`` (a message the bot sent: see ``messages``)."""
        interactive = sent.get("interactive") or {}
        if interactive.get("type") == "list":
            rows = [r for s in interactive["action"]["sections"] for r in s["rows"]]
            row = next((r for r in rows if r["id"] == data), {"id": data, "title": data})
            content = {"type": "list_reply", "list_reply": {"id": row["id"], "title": row["title"]}}
        else:
            buttons = (interactive.get("action") or {}).get("buttons") or []
            reply = next((b["reply"] for b in buttons if b["reply"]["id"] == data), {"id": data, "title": data})
            content = {"type": "button_reply", "button_reply": {"id": reply["id"], "title": reply["title"]}}
        message = self._user_message(wa_id, "interactive", content, context=sent["id"])
        return self.envelope(messages=[message], contacts=[{"profile": {"name": name}, "wa_id": wa_id}])

    def status(self, recipient: str, message_id: str, status: str, *, error: dict[str, Any] | None = None) -> dict[str, Any]:
        """A delivery status for a message the bot sent (``failed`` with ``error``)."""
        entry: dict[str, Any] = {"id": message_id, "status": status, "timestamp": str(int(time.time())), "recipient_id": recipient}
        if error:
            entry["errors"] = [error]
        return self.envelope(statuses=[entry])

    def post(
        self, payload: dict[str, Any] | bytes, *, url: str | None = None, signature: str | None = "valid", timeout: float = 10.0
    ) -> int:
        """Deliver ``payload`` to the bot's listener as Meta does; the HTTP status. ``signature``:
        "valid" signs with the app secret, None sends no header, anything else is sent as is."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "facebookexternalua"}
        if signature == "valid":
            headers["X-Hub-Signature-256"] = sign(self.app_secret, body)
        elif signature is not None:
            headers["X-Hub-Signature-256"] = signature
        target = url or self.webhook_url
        assert target, "set webhook_url (the bot's listener) or pass url"
        request = urllib.request.Request(target, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def verify(self, *, token: str | None = None, challenge: str = "1158201444", url: str | None = None) -> tuple[int, str]:
        """Meta's verification GET (``hub.mode=subscribe``); the status and the body."""
        from urllib.parse import urlencode

        query = urlencode(
            {"hub.mode": "subscribe", "hub.verify_token": self.verify_token if token is None else token, "hub.challenge": challenge}
        )
        target = url or self.webhook_url
        assert target
        try:
            with urllib.request.urlopen(f"{target}?{query}", timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    # -- what tests read ------------------------------------------------------------------

    def sent(self, to: str | None = None) -> list[dict[str, Any]]:
        """Messages the bot sent (to ``to``), oldest first."""
        with self._cond:
            return [m for m in self.messages if to is None or m["to"] == to]

    @staticmethod
    def body_of(message: dict[str, Any]) -> str:
        """The text a person sees: a text's body, an interactive message's body, a media caption."""
        kind = message["type"]
        if kind == "text":
            return message["text"]["body"]
        if kind == "interactive":
            return message["interactive"]["body"]["text"]
        return str((message.get(kind) or {}).get("caption") or "")

    def texts(self, to: str | None = None) -> list[str]:
        return [self.body_of(m) for m in self.sent(to)]

    def wait_for(self, predicate, timeout: float = 20.0, what: str = "a message") -> Any:
        """Wait until ``predicate()`` returns something truthy; checked whenever the bot calls the
        API, and at least every 50 ms (for facts the bot does not report here)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            found = predicate()
            if found:
                return found
            with self._cond:
                self._cond.wait(min(0.05, left))
        raise AssertionError(f"timed out waiting for {what}; the bot sent: {[t[:200] for t in self.texts()]}")

    def wait_text(self, to: str, needle: str, timeout: float = 20.0) -> dict[str, Any]:
        return self.wait_for(lambda: next((m for m in self.sent(to) if needle in self.body_of(m)), None), timeout, repr(needle))

    # -- the API --------------------------------------------------------------------------

    def handle(self, method: str, path: str, headers: Any, raw: bytes, query: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["media-download"]:
            return self._download(parts, headers)
        if parts[:1] != [VERSION]:
            return 404, _graph_error("Unknown path components", 2500, "OAuthException"), {}
        if headers.get("Authorization") != f"Bearer {self.token}":
            return 401, _graph_error("Invalid OAuth access token - Cannot parse access token", 190, "OAuthException"), {}
        node = parts[1:]
        if method == "GET" and len(node) == 1:
            with self._cond:
                self.calls.append((method, path, query))
            if node[0] == self.phone_number_id:
                return (
                    200,
                    {
                        "verified_name": self.verified_name,
                        "display_phone_number": self.display_phone_number,
                        "quality_rating": "GREEN",
                        "id": self.phone_number_id,
                    },
                    {},
                )
            with self._cond:
                known = self.files.get(node[0])
            if known is not None:
                data, mime = known
                url = f"{self.media_url_root or self.root}/media-download/{node[0]}?ext=1&hash=ATtest"
                return (
                    200,
                    {
                        "messaging_product": "whatsapp",
                        "url": url,
                        "mime_type": mime,
                        "sha256": hashlib.sha256(data).hexdigest(),
                        "file_size": len(data),
                        "id": node[0],
                    },
                    {},
                )
            return 400, _unsupported(node[0], method), {}
        if method == "POST" and len(node) == 2 and node[0] == self.phone_number_id and node[1] == "messages":
            try:
                body = json.loads(raw)
            except ValueError:
                return 400, _graph_error("(#100) The parameter messaging_product is required.", 100), {}
            with self._cond:
                self.calls.append((method, path, body))
            return self._messages(body)
        if method == "POST" and len(node) == 2 and node[0] == self.phone_number_id and node[1] == "media":
            return self._upload(headers, raw)
        return 400, _unsupported("/".join(node), method), {}

    def _messages(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        if body.get("messaging_product") != "whatsapp":
            return 400, _graph_error("(#100) The parameter messaging_product is required.", 100), {}
        if body.get("status") == "read":
            if not str(body.get("message_id") or "").startswith("wamid."):
                return 400, _graph_error("(#100) Invalid parameter", 100), {}
            with self._cond:
                self.reads.append(body)
                self._cond.notify_all()
            return 200, {"success": True}, {}
        with self._cond:
            if self.throttle > 0:
                self.throttle -= 1
                error = _graph_error("(#130429) Rate limit hit", 130429)
                error["error"]["error_data"] = {
                    "messaging_product": "whatsapp",
                    "details": "Cloud API message throughput has been reached.",
                }
                return 429, error, {"Retry-After": "1"}
        problem = _check_message(body)
        if problem:
            return 400, _graph_error("(#131009) Parameter value is not valid", 131009, details=problem), {}
        to = str(body["to"])
        message_id = self._wamid()
        record = {
            "id": message_id,
            "to": to,
            "type": body["type"],
            body["type"]: body[body["type"]],
            "context": body.get("context"),
            "payload": body,
        }
        with self._cond:
            self.messages.append(record)
            self._cond.notify_all()
        return 200, {"messaging_product": "whatsapp", "contacts": [{"input": to, "wa_id": to}], "messages": [{"id": message_id}]}, {}

    def _upload(self, headers: Any, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        content_type = headers.get("Content-Type") or ""
        if not content_type.startswith("multipart/form-data"):
            return 400, _graph_error("(#100) Param file must be a file with one of the following types: ...", 100), {}
        parsed = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw
        )
        fields: dict[str, Any] = {}
        upload: tuple[str, str, bytes] | None = None
        for part in parsed.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True) or b""
            if name == "file":
                upload = (part.get_filename() or "", part.get_content_type(), payload)
            else:
                fields[str(name)] = payload.decode()
        if fields.get("messaging_product") != "whatsapp":
            return 400, _graph_error("(#100) The parameter messaging_product is required.", 100), {}
        if upload is None:
            return 400, _graph_error("(#100) The parameter file is required.", 100), {}
        media_id = str(800000000 + next(self._ids))
        record = {"id": media_id, "type": fields.get("type"), "name": upload[0], "mime": upload[1], "data": upload[2]}
        with self._cond:
            self.calls.append(("POST", "media", {k: v for k, v in record.items() if k != "data"}))
            self.uploads.append(record)
            self.files[media_id] = (upload[2], upload[1])
            self._cond.notify_all()
        return 200, {"id": media_id}, {}

    def _download(self, parts: list[str], headers: Any) -> tuple[int, Any, dict[str, str]]:
        if headers.get("Authorization") != f"Bearer {self.token}":
            return 401, _graph_error("Invalid OAuth access token - Cannot parse access token", 190, "OAuthException"), {}
        with self._cond:
            known = self.files.get(parts[1]) if len(parts) > 1 else None
        if known is None:
            return 404, b"", {}
        return 200, known[0], {"Content-Type": known[1]}


def _check_message(body: dict[str, Any]) -> str | None:
    """What the Cloud API would refuse in a message, or None."""
    if not str(body.get("to") or "").isdigit():
        return "to must be a phone number (digits)"
    kind = body.get("type", "text")
    content = body.get(kind)
    if not isinstance(content, dict):
        return f"{kind} object is required"
    if kind == "text":
        text = str(content.get("body") or "")
        if not text.strip():
            return "text.body is required"
        if len(text) > 4096:
            return "text.body is too long (4096 characters at most)"
    elif kind == "interactive":
        text = str((content.get("body") or {}).get("text") or "")
        if not text or len(text) > 1024:
            return "interactive.body.text must be 1 to 1024 characters"
        action = content.get("action") or {}
        if content.get("type") == "button":
            buttons = action.get("buttons") or []
            if not 1 <= len(buttons) <= 3:
                return "interactive buttons: 1 to 3"
            ids = [b["reply"]["id"] for b in buttons]
            titles = [b["reply"]["title"] for b in buttons]
            if len(set(ids)) != len(ids) or len(set(titles)) != len(titles):
                return "buttons must have unique ids and titles"
            if any(not t or len(t) > 20 for t in titles) or any(not i or len(i) > 256 for i in ids):
                return "a button title is 1 to 20 characters, its id 1 to 256"
        elif content.get("type") == "list":
            rows = [r for s in action.get("sections") or [] for r in s.get("rows") or []]
            if not 1 <= len(rows) <= 10 or not action.get("button"):
                return "a list has 1 to 10 rows and a button label"
            if any(len(r["title"]) > 24 or len(r["id"]) > 200 for r in rows):
                return "a row title is at most 24 characters, its id 200"
        else:
            return f"interactive type {content.get('type')!r} is not supported here"
    elif kind in ("image", "document", "audio", "video", "sticker"):
        if not content.get("id") and not content.get("link"):
            return f"{kind}.id or {kind}.link is required"
        if kind == "audio" and "caption" in content:
            return "audio does not take a caption"
    else:
        return f"message type {kind!r} is not supported here"
    return None


def _graph_error(message: str, code: int, kind: str = "OAuthException", *, details: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"message": message, "type": kind, "code": code, "fbtrace_id": "AbCdEfGhIjK"}
    if details:
        error["error_data"] = {"messaging_product": "whatsapp", "details": details}
    return {"error": error}


def _unsupported(node: str, method: str) -> dict[str, Any]:
    return _graph_error(
        f"Unsupported {method.lower()} request. Object with ID '{node}' does not exist, cannot be loaded due to missing "
        "permissions, or does not support this operation.",
        100,
        "GraphMethodException",
    )


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away (the gateway stopping) is normal


class _Handler(BaseHTTPRequestHandler):
    api: FakeWhatsApp
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        query = {k: v[0] for k, v in parse_qs(split.query).items()}
        status, payload, headers = self.api.handle(method, split.path, self.headers, raw, query)
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        if not isinstance(payload, bytes):
            self.send_header("Content-Type", "application/json")
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with self.api._cond:
            self.api._cond.notify_all()  # wakes wait_for: the bot did something
