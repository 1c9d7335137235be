"""WhatsApp through the Business Cloud API: a signed webhook in, the Graph API out (plain httpx).

The platform's quirks, and what this adapter does about them:

- Nothing is polled: Meta POSTs events to a public HTTPS URL (the App Dashboard's webhook,
  reached through the user's reverse proxy). The adapter listens on ``[whatsapp]
  webhook_listen:webhook_port`` at ``webhook_path``. A GET is Meta's verification handshake
  (``hub.verify_token`` must equal ``verify_token``; the answer is ``hub.challenge``). A POST is
  taken only with a valid ``X-Hub-Signature-256`` (HMAC-SHA256 of the raw body with the app
  secret, compared in constant time); anything else gets 401 before it is parsed. Events are
  answered 200 at once and handled in the background; Meta retries a delivery it thinks failed,
  so message ids are remembered and a repeat is dropped.
- Every chat is one-to-one with a phone number (``wa_id``): places are direct, with no thread,
  and every message is addressed to the bot. The Cloud API has no bot mentions to strip.
- Messages cannot be edited (``limits.edits`` is false): a reply goes whole at the end while the
  typing indicator shows. The indicator needs the id of a received message: the newest one per
  chat is kept for it.
- Buttons are interactive reply buttons (at most 3, titles up to 20 characters, the button id
  carries ``Button.data``); 4 to 10 choices go as a list message. An interactive message's text
  is capped at 1024 characters, so a longer question is sent first and the buttons follow.
  WhatsApp has no toast: ``Press.answer`` replies in the presser's chat, quoting the question.
- Formatting is WhatsApp's own (``*bold*``, ``_italic_``, ``~strike~``, ```` ``` ```` blocks,
  inline ```code```, ``>`` quotes, ``-`` lists); nothing is refused for its markup, so there is
  no plain-text fallback to fall back on.
- Media is uploaded (``POST /{phone_number_id}/media``) and then sent by id; received media is
  two requests: ``GET /{media_id}`` gives a short-lived URL, and that URL wants the token too.
- Throttling (HTTP 429, or Graph codes 130429 throughput and 131056 per-recipient pair rate) is
  retried once after the server's Retry-After (bounded). A free-form message reaches someone
  only within 24 hours of their last message; outside it Meta reports a failed status (code
  131047), which is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import mimetypes
import re
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

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

__all__ = ["GRAPH_API", "WhatsAppAPIError", "WhatsAppPlatform", "signature_valid", "to_whatsapp"]

log = logging.getLogger(__name__)

# The newest Graph API version (July 2026; each is served for at least two years). ``[whatsapp]
# api_base_url`` pins another.
GRAPH_API = "https://graph.facebook.com/v26.0"
LIMIT = 4096  # characters in a text message's body
_BODY_LIMIT = 1024  # an interactive message's body
_BUTTONS = 3  # reply buttons on one message
_TITLE_LIMIT = 20  # a reply button's title
_ROWS = 10  # rows in a list message
_ROW_TITLE_LIMIT = 24
_RETRY_CAP = 30.0  # seconds: the longest wait before the one retry of a throttled request
_THROTTLED = {4, 80007, 130429, 131056}  # Graph error codes that mean "slow down"
_TYPING_REFRESH = 20.0  # the indicator lasts 25 s or until the next message
_SEEN = 4096  # message ids remembered against Meta's retries
_MAX_EVENT_BYTES = 1 << 20
_MEDIA_KINDS = ("image", "document", "audio", "video", "sticker")
_SEND_IMAGE = {"image/jpeg", "image/png"}
_SEND_AUDIO = {"audio/aac", "audio/amr", "audio/mpeg", "audio/mp4", "audio/ogg"}
_SEND_VIDEO = {"video/mp4", "video/3gpp"}
_HINTS = {
    190: "the access token is invalid or expired; make a System User token that does not expire (see the README) and set "
    "[whatsapp] access_token or WHATSAPP_ACCESS_TOKEN",
    131030: "the recipient is not on the test number's list; add it in the App Dashboard (WhatsApp → API Setup → To)",
    131047: "more than 24 hours have passed since this person last wrote; WhatsApp delivers free-form messages only "
    "within 24 hours of their last message",
}


class WhatsAppAPIError(Exception):
    """The Graph API refused a request. The message names what was asked and, where known, what to do."""

    def __init__(self, message: str, *, status: int, code: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after = retry_after

    @property
    def throttled(self) -> bool:
        return self.status == 429 or self.code in _THROTTLED


# -- formatting -------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+#.-]*)\s*$")
_INLINE = re.compile(
    r"(?P<code>`[^`\n]+`)"
    r"|(?P<link>\[(?P<label>[^\]\n]+)\]\((?P<url>[^)\s]+)\))"
    r"|(?P<bold>\*\*(?P<btext>[^*\n]+?)\*\*|__(?P<btext2>[^_\n]+?)__)"
    r"|(?P<strike>~~(?P<stext>[^~\n]+?)~~)"
    r"|(?P<italic>(?<![\w*])\*(?P<itext>[^*\s][^*\n]*?)\*(?![\w*])|(?<![\w_])_(?P<itext2>[^_\n]+?)_(?![\w_]))"
)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[*+]\s+(.*)$")


def to_whatsapp(markdown: str) -> str:
    """WhatsApp's markup for Markdown. Never longer than the Markdown, so a chunk that fits as
    Markdown fits as sent."""
    out: list[str] = []
    in_code = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
            out.append("```")  # WhatsApp shows a language tag as text
            continue
        if in_code:
            out.append(line)
            continue
        if heading := _HEADING.match(line):
            inner = _inline(heading.group(1))
            out.append(inner if inner.startswith("*") and inner.endswith("*") else f"*{inner}*")
        elif bullet := _BULLET.match(line):
            out.append(f"{bullet.group(1)}- {_inline(bullet.group(2))}")
        else:
            out.append(_inline(line))
    return "\n".join(out)


def _inline(text: str) -> str:
    out: list[str] = []
    pos = 0
    for match in _INLINE.finditer(text):
        out.append(text[pos : match.start()])
        pos = match.end()
        if match.group("code"):
            out.append(match.group("code"))
        elif match.group("link"):
            label, url = match.group("label"), match.group("url")
            out.append(url if label.strip() == url else f"{label} ({url})")
        elif match.group("bold"):
            out.append(f"*{_inline(match.group('btext') or match.group('btext2'))}*")
        elif match.group("strike"):
            out.append(f"~{_inline(match.group('stext'))}~")
        else:
            out.append(f"_{_inline(match.group('itext') or match.group('itext2'))}_")
    out.append(text[pos:])
    return "".join(out)


def signature_valid(app_secret: bytes, body: bytes, header: str | None) -> bool:
    """Whether ``X-Hub-Signature-256`` is ``sha256=`` + the HMAC-SHA256 of the raw body (constant time)."""
    if not header:
        return False
    expected = "sha256=" + hmac.new(app_secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().lower().encode())


def _title(label: str, limit: int) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _base_mime(mime: str) -> str:
    return mime.split(";")[0].strip().lower()


class _Listener(uvicorn.Server):
    """uvicorn's server as a part of the gateway: it leaves SIGTERM and SIGINT to the gateway,
    and says when it accepts connections."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


# -- the adapter ------------------------------------------------------------------------


class WhatsAppPlatform(Platform):
    """One WhatsApp Business phone number, through the Cloud API."""

    name = "whatsapp"

    def __init__(self, config: Config) -> None:
        super().__init__()
        section = config.whatsapp
        token = section.access_token.get_secret_value().strip() if section.access_token is not None else ""
        app_secret = section.app_secret.get_secret_value().strip() if section.app_secret is not None else ""
        phone_number_id = (section.phone_number_id or "").strip()
        if not token:
            raise PlatformConfigError(
                "[whatsapp] access_token is required: the Graph API needs it to send; set it in config.toml or WHATSAPP_ACCESS_TOKEN"
            )
        if not phone_number_id:
            raise PlatformConfigError(
                "[whatsapp] phone_number_id is required: it names the number to send from (App Dashboard → WhatsApp → API Setup)"
            )
        if not app_secret:
            raise PlatformConfigError(
                "[whatsapp] app_secret is required: Meta signs every webhook request with it and unsigned requests are refused; "
                "set it in config.toml or WHATSAPP_APP_SECRET (App Dashboard → App settings → Basic → App secret)"
            )
        if not section.webhook_path.startswith("/"):
            raise PlatformConfigError(f'[whatsapp] webhook_path must start with "/" (it is {section.webhook_path!r})')
        self._token = token
        self._app_secret = app_secret.encode()
        self._verify_token = section.verify_token.get_secret_value() if section.verify_token is not None else None
        self.phone_number_id = phone_number_id
        self.api_base = (section.api_base_url or GRAPH_API).rstrip("/")
        self.listen = section.webhook_listen
        self.port = section.webhook_port
        self.path = section.webhook_path
        self.limits = Limits(text=LIMIT, edit_interval=section.edit_interval, edits=False, buttons=True)
        self._events: Events | None = None
        self._client: httpx.AsyncClient | None = None
        self._server: _Listener | None = None
        self._serving: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None
        self._own_wa_id = ""
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._last_inbound: dict[str, str] = {}  # wa_id -> newest received message id (for the typing indicator)
        self._typing_at: dict[str, float] = {}
        self._chat_locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, events: Events) -> None:
        """Check the token and the number with the Graph API, then listen for webhooks."""
        await self.stop()
        self._events = events
        self._client = httpx.AsyncClient(
            base_url=self.api_base,
            headers={"Authorization": f"Bearer {self._token}"},
            timeout=httpx.Timeout(30.0, connect=10.0),
        )
        try:
            info = await self._graph(
                "GET", f"/{self.phone_number_id}", "the phone number", params={"fields": "verified_name,display_phone_number"}
            )
            self._socket = self._bind()
            await self._serve(self._socket)
        except WhatsAppAPIError as exc:
            await self.stop()
            rejected = exc.status in (401, 403) or exc.code == 190
            raise PlatformDown(str(exc), retry_after=300.0 if rejected else None) from None
        except httpx.HTTPError as exc:
            await self.stop()
            raise PlatformDown(f"cannot reach the WhatsApp Cloud API at {self.api_base} ({type(exc).__name__})") from None
        except BaseException:
            await self.stop()
            raise
        self._own_wa_id = re.sub(r"\D", "", str(info.get("display_phone_number") or ""))
        self.account = str(info.get("verified_name") or info.get("display_phone_number") or self.phone_number_id)
        log.info("WhatsApp: %s, webhooks on %s:%s%s", self.account, self.listen, self.port, self.path)

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.listen else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.listen, self.port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise PlatformDown(
                f"cannot listen for WhatsApp webhooks on {self.listen}:{self.port} ({exc.strerror}); "
                "free that port or set [whatsapp] webhook_port"
            ) from None
        sock.setblocking(False)
        return sock

    async def _serve(self, sock: socket.socket) -> None:
        """Serve the webhook on ``sock`` until ``stop``; returns once it accepts connections."""
        app = Starlette(routes=[Route(self.path, self._webhook, methods=["GET", "POST"])])
        # No logging set-up and no lifespan: the gateway owns logging, and the app has no state.
        config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False, timeout_graceful_shutdown=2)
        server = _Listener(config)
        self._server = server
        self._serving = asyncio.create_task(server.serve(sockets=[sock]), name="whatsapp-webhook")
        ready = asyncio.create_task(server.ready.wait())
        await asyncio.wait({ready, self._serving}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            self._serving.result()  # the listener's own failure, raised here
            raise PlatformDown(f"the WhatsApp webhook listener on {self.listen}:{self.port} stopped at once")

    async def stop(self) -> None:
        """Stop listening, let handlers in flight finish briefly, close the HTTP client. Idempotent."""
        server, self._server = self._server, None
        serving, self._serving = self._serving, None
        sock, self._socket = self._socket, None
        if server is not None:
            server.should_exit = True
        if serving is not None:
            with contextlib.suppress(Exception):
                await serving
        if sock is not None:
            sock.close()
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=5.0)
            for task in pending:
                task.cancel()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # -- the webhook ----------------------------------------------------------------------

    async def _webhook(self, request: Request) -> Response:
        if request.method != "POST":
            query = request.query_params
            given = query.get("hub.verify_token", "")
            if (
                query.get("hub.mode") == "subscribe"
                and self._verify_token
                and hmac.compare_digest(given.encode(), self._verify_token.encode())
            ):
                log.info("WhatsApp: the webhook verification handshake succeeded")
                return PlainTextResponse(query.get("hub.challenge", ""))
            if not self._verify_token:
                log.warning("WhatsApp: refused a webhook verification: set [whatsapp] verify_token to the token typed in the App Dashboard")
            else:
                log.warning("WhatsApp: refused a webhook verification with a wrong verify token")
            return PlainTextResponse("verification refused", status_code=403)
        body = bytearray()
        async for piece in request.stream():
            body += piece
            if len(body) > _MAX_EVENT_BYTES:
                return PlainTextResponse("too large", status_code=413)
        if not signature_valid(self._app_secret, bytes(body), request.headers.get("x-hub-signature-256")):
            client = request.client.host if request.client else "?"
            log.warning("WhatsApp: refused a webhook request from %s without a valid X-Hub-Signature-256", client)
            return PlainTextResponse("invalid signature", status_code=401)
        try:
            payload = json.loads(body)
        except ValueError:
            return PlainTextResponse("not JSON", status_code=400)
        if isinstance(payload, dict):
            self._handle(payload)
        return PlainTextResponse("ok")

    def _spawn(self, work: Awaitable[None], name: str) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("WhatsApp: handling %s failed", name)

        task = asyncio.create_task(run(), name=f"whatsapp-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _handle(self, payload: dict[str, Any]) -> None:
        """Sort one delivery's messages into background work (answered 200 before any of it runs)."""
        if payload.get("object") != "whatsapp_business_account":
            return
        for entry in payload.get("entry") or []:
            for change in entry.get("changes") or []:
                value = change.get("value") or {}
                if change.get("field") != "messages" or not isinstance(value, dict):
                    continue
                if str((value.get("metadata") or {}).get("phone_number_id") or "") != self.phone_number_id:
                    log.debug("WhatsApp: an event for another phone number was ignored")
                    continue
                names = {str(c.get("wa_id")): str((c.get("profile") or {}).get("name") or "") for c in value.get("contacts") or []}
                for message in value.get("messages") or []:
                    self._message(message, names)
                for status in value.get("statuses") or []:
                    self._status(status)
                for error in value.get("errors") or []:
                    log.warning("WhatsApp reported an error: %s (code %s)", error.get("title") or error.get("message"), error.get("code"))

    def _message(self, message: dict[str, Any], names: dict[str, str]) -> None:
        message_id = str(message.get("id") or "")
        wa_id = str(message.get("from") or "")
        if not message_id or not wa_id or wa_id == self._own_wa_id:
            return
        if message_id in self._seen:
            log.debug("WhatsApp: a repeated delivery of %s was dropped", message_id)
            return
        self._seen[message_id] = None
        while len(self._seen) > _SEEN:
            self._seen.popitem(last=False)
        self._last_inbound[wa_id] = message_id
        place = Place(self.name, wa_id, None, direct=True)
        sender = Sender(identity(self.name, wa_id), names.get(wa_id, ""))
        kind = message.get("type")
        if kind == "interactive":
            interactive = message.get("interactive") or {}
            reply = interactive.get("button_reply") or interactive.get("list_reply") or {}
            if reply.get("id"):
                asked = (message.get("context") or {}).get("id")
                press = Press(place, sender, str(reply["id"]), asked, self._answerer(wa_id, asked))
                self._spawn(self._deliver_press(press), f"press {message_id}")
            return
        incoming = self._incoming(message, kind, place, sender, message_id)
        if incoming is not None:
            self._spawn(self._deliver(incoming), f"message {message_id}")
        else:
            log.debug("WhatsApp: a %s message was ignored", kind)

    def _incoming(self, message: dict[str, Any], kind: Any, place: Place, sender: Sender, message_id: str) -> Incoming | None:
        text = ""
        attachments: list[Attachment] = []
        if kind == "text":
            text = str((message.get("text") or {}).get("body") or "")
        elif kind == "button":  # a template's quick-reply button: its text, as if typed
            text = str((message.get("button") or {}).get("text") or "")
        elif kind in _MEDIA_KINDS:
            media = message.get(kind) or {}
            if not media.get("id"):
                return None
            text = str(media.get("caption") or "")
            attachments.append(self._attachment(kind, media))
        elif kind == "location":
            where = message.get("location") or {}
            label = ", ".join(str(where[k]) for k in ("name", "address") if where.get(k))
            text = f"(Location: {label + ' ' if label else ''}{where.get('latitude')}, {where.get('longitude')})"
        if not text and not attachments:
            return None
        return Incoming(place, sender, text, addressed=True, attachments=attachments, message_id=message_id)

    def _attachment(self, kind: str, media: dict[str, Any]) -> Attachment:
        media_id = str(media["id"])
        mime = _base_mime(str(media.get("mime_type") or "application/octet-stream"))
        # .ogg, not .oga: speech-to-text services know voice notes by that name.
        extension = (".ogg" if mime == "audio/ogg" else mimetypes.guess_extension(mime)) or "." + (
            re.sub(r"[^a-z0-9]", "", mime.rpartition("/")[2]) or "bin"
        )
        name = str(media.get("filename") or f"{'photo' if kind == 'image' else kind}-{media_id}{extension}")

        async def fetch() -> bytes:
            return await self.download(media_id)

        return Attachment(name=name, mime=mime, size=None, fetch=fetch, voice=kind == "audio" and media.get("voice") is True)

    async def _deliver(self, incoming: Incoming) -> None:
        # One chat's messages are handed on in the order they came; other chats do not wait.
        lock = self._chat_locks.setdefault(incoming.place.chat, asyncio.Lock())
        async with lock:
            if self._events is not None:
                await self._events.message(incoming)

    async def _deliver_press(self, press: Press) -> None:
        if self._events is not None:
            await self._events.press(press)

    def _answerer(self, wa_id: str, asked: str | None) -> Callable[[str, bool], Awaitable[None]]:
        async def answer(text: str, alert: bool = False) -> None:
            # No toast on WhatsApp: the answer is a reply in the presser's own chat, quoting the question.
            if text:
                await self._send_text(wa_id, ("⚠️ " if alert else "") + text, reply_to=asked)

        return answer

    def _status(self, status: dict[str, Any]) -> None:
        if status.get("status") != "failed":
            return
        for error in status.get("errors") or [{}]:
            code = error.get("code")
            hint = _HINTS.get(int(code)) if isinstance(code, int) else None
            log.warning(
                "WhatsApp could not deliver message %s to %s: %s (code %s)%s",
                status.get("id"),
                status.get("recipient_id"),
                error.get("title") or error.get("message") or "failed",
                code,
                f"; {hint}" if hint else "",
            )

    # -- sending --------------------------------------------------------------------------

    async def send(self, place: Place, markdown: str, *, buttons: list[Button] | None = None) -> str:
        """One message in WhatsApp's markup; with ``buttons``, an interactive message."""
        text = to_whatsapp(markdown).strip("\n") or "(empty reply)"
        if buttons:
            return await self._send_choices(place.chat, text, buttons)
        message_id = ""
        # A text that does not fit (the caller did not split it) is still sent whole, in pieces.
        for piece in [text] if len(text) <= LIMIT else split_markdown(text, limit=LIMIT):
            message_id = await self._send_text(place.chat, piece)
        return message_id

    async def edit(self, place: Place, message_id: str, markdown: str, *, buttons: list[Button] | None = None) -> None:
        """WhatsApp cannot change a sent message. ``limits.edits`` is false, so replies are sent
        whole; a question's buttons stay on the phone, and a late press is answered as expired."""
        log.debug("WhatsApp cannot edit message %s; left as it is", message_id)

    async def _send_text(self, to: str, text: str, *, reply_to: str | None = None) -> str:
        body: dict[str, Any] = {"type": "text", "text": {"preview_url": False, "body": text[:LIMIT]}}
        if reply_to:
            body["context"] = {"message_id": reply_to}
        return await self._send_message(to, body, "a message")

    async def _send_choices(self, to: str, text: str, buttons: list[Button]) -> str:
        if len(text) > _BODY_LIMIT:
            # An interactive message's text stops at 1024 characters: the question goes first.
            for piece in split_markdown(text, limit=LIMIT):
                await self._send_text(to, piece)
            text = "Choose an answer to the message above."
        if len(buttons) <= _BUTTONS:
            action: dict[str, Any] = {
                "buttons": [{"type": "reply", "reply": {"id": b.data, "title": _title(b.label, _TITLE_LIMIT)}} for b in buttons]
            }
            interactive: dict[str, Any] = {"type": "button", "body": {"text": text}, "action": action}
        else:
            if len(buttons) > _ROWS:
                log.warning("WhatsApp shows at most %d choices; %d were cut", _ROWS, len(buttons) - _ROWS)
            rows = [{"id": b.data, "title": _title(b.label, _ROW_TITLE_LIMIT)} for b in buttons[:_ROWS]]
            action = {"button": "Choose", "sections": [{"title": "Choices", "rows": rows}]}
            interactive = {"type": "list", "body": {"text": text}, "action": action}
        return await self._send_message(to, {"type": "interactive", "interactive": interactive}, "a message with buttons")

    async def send_file(self, place: Place, name: str, data: bytes, mime: str, caption: str = "") -> str:
        """Upload, then send by media id: JPEG and PNG as images, WhatsApp's audio and video
        types as such (an Ogg Opus file plays as a voice note), anything else as a document."""
        mime = _base_mime(mime or "application/octet-stream")
        uploaded = await self._graph(
            "POST",
            f"/{self.phone_number_id}/media",
            f"the upload of {name}",
            data={"messaging_product": "whatsapp", "type": mime},
            files={"file": (name, data, mime)},
        )
        media: dict[str, Any] = {"id": str(uploaded["id"])}
        kind = "image" if mime in _SEND_IMAGE else "audio" if mime in _SEND_AUDIO else "video" if mime in _SEND_VIDEO else "document"
        if kind == "document":
            media["filename"] = name
        caption = to_whatsapp(caption).strip()
        if caption and kind != "audio":
            media["caption"] = caption[:_BODY_LIMIT]
        message_id = await self._send_message(place.chat, {"type": kind, kind: media}, f"the file {name}")
        if caption and (kind == "audio" or len(caption) > _BODY_LIMIT):  # audio takes no caption
            await self._send_text(place.chat, caption)
        return message_id

    async def typing(self, place: Place) -> None:
        """Mark the newest received message read and show the typing indicator (it lasts 25 s,
        or until the next message, so it is refreshed no oftener than every 20 s)."""
        message_id = self._last_inbound.get(place.chat)
        now = time.monotonic()
        shown = self._typing_at.get(place.chat)
        if message_id is None or (shown is not None and now - shown < _TYPING_REFRESH):
            return
        self._typing_at[place.chat] = now
        body = {"messaging_product": "whatsapp", "status": "read", "message_id": message_id, "typing_indicator": {"type": "text"}}
        try:
            await self._graph("POST", f"/{self.phone_number_id}/messages", "the typing indicator", json=body)
        except (WhatsAppAPIError, httpx.HTTPError) as exc:
            log.debug("WhatsApp: no typing indicator (%s)", exc)

    async def _send_message(self, to: str, body: dict[str, Any], what: str) -> str:
        payload = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to, **body}
        answer = await self._graph("POST", f"/{self.phone_number_id}/messages", what, json=payload)
        self._typing_at.pop(to, None)  # a message ends the indicator: the next typing() shows it again
        messages = answer.get("messages") or [{}]
        return str(messages[0].get("id") or "")

    # -- the Graph API --------------------------------------------------------------------

    async def download(self, media_id: str) -> bytes:
        """A received file's bytes: its short-lived URL from the Graph API, then the URL itself."""
        info = await self._graph("GET", f"/{media_id}", "a received file", params={"phone_number_id": self.phone_number_id})
        url = str(info.get("url") or "")
        if not self._may_send_token_to(url):
            raise WhatsAppAPIError(f"WhatsApp gave a media URL this gateway will not send the token to ({urlsplit(url).netloc})", status=0)
        response = await self._request("GET", url)
        if response.status_code >= 400:
            raise self._error(response, "a received file")
        return response.content

    def _may_send_token_to(self, url: str) -> bool:
        """HTTPS anywhere (Meta's media hosts), or plain HTTP only to the configured API's own host."""
        parts = urlsplit(url)
        return parts.scheme == "https" or (parts.scheme == "http" and parts.netloc == urlsplit(self.api_base).netloc)

    async def _graph(self, method: str, path: str, what: str, **kwargs: Any) -> dict[str, Any]:
        """One Graph API call; a throttled one is retried once, after the server's Retry-After."""
        response = await self._request(method, path, **kwargs)
        if response.status_code >= 400:
            error = self._error(response, what)
            if not error.throttled:
                raise error
            wait = min(error.retry_after if error.retry_after is not None else 2.0, _RETRY_CAP)
            log.info("WhatsApp asks to slow down (%s); trying again in %.0f s", error, wait)
            await asyncio.sleep(wait)
            response = await self._request(method, path, **kwargs)
            if response.status_code >= 400:
                raise self._error(response, what)
        try:
            answer = response.json()
        except ValueError:
            raise WhatsAppAPIError(f"WhatsApp answered {what} with something that is not JSON", status=response.status_code) from None
        return answer if isinstance(answer, dict) else {}

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        if self._client is None:
            raise WhatsAppAPIError("WhatsApp is not connected (the gateway is starting or stopping)", status=0)
        return await self._client.request(method, url, **kwargs)

    def _error(self, response: httpx.Response, what: str) -> WhatsAppAPIError:
        try:
            error = response.json().get("error") or {}
        except (ValueError, AttributeError):
            error = {}
        code = error.get("code")
        code = int(code) if isinstance(code, (int, str)) and str(code).isdigit() else None
        message = str(error.get("message") or response.reason_phrase or "refused")
        details = str((error.get("error_data") or {}).get("details") or "")
        text = f"WhatsApp refused {what}: {message}{f' ({details})' if details and details not in message else ''}"
        text += f" (HTTP {response.status_code}{f', code {code}' if code is not None else ''})"
        if code in _HINTS:
            text += f"; {_HINTS[code]}"
        elif response.status_code == 401:
            text += f"; {_HINTS[190]}"
        for secret in (self._token, self._app_secret.decode(errors="replace")):
            if secret:
                text = text.replace(secret, "[redacted]")
        retry_after = None
        header = response.headers.get("retry-after")
        if header:
            with contextlib.suppress(ValueError):
                retry_after = max(0.0, float(header))
        return WhatsAppAPIError(text, status=response.status_code, code=code, retry_after=retry_after)
