"""Signal through signal-cli's JSON-RPC daemon (``signal-cli -a NUMBER daemon --http 127.0.0.1:8080``).

Signal has no bot API and no maintained Python SDK; signal-cli (a Java client registered as, or
linked to, a Signal account) is what bots use. Its daemon speaks JSON-RPC 2.0 over HTTP, spoken
here with httpx: ``POST /api/v1/rpc`` for commands (``send``, ``sendTyping``, ``getAttachment``,
``listAccounts``), ``GET /api/v1/events`` for incoming messages as Server-Sent Events (one
``receive`` event per envelope, ``{"envelope": ..., "account": ...}``), ``GET /api/v1/check`` to
see that it runs. The daemon has no authentication: bind it to 127.0.0.1.

Quirks this adapter deals with:

- Identities: ``signal:<uuid>`` (the account's ACI) when the envelope carries one, else
  ``signal:<number>``; a user who hides their number has only the uuid. A direct chat's place is
  that same id, a group's is ``group.<base64 group id>``. Signal has no threads.
- In a group the bot is addressed when mentioned (a mention is the character U+FFFC in the text,
  positioned in UTF-16 units; the bot's own is removed, others become ``@number``), when a
  message quotes one of its messages, or by a command (``/new``).
- A message's id is its timestamp (milliseconds): replies, reactions and edits refer to it.
- Formatting is not markup in the text but ranges beside it (``textStyle``: ``start:length:STYLE``
  in UTF-16 units, BOLD ITALIC STRIKETHROUGH MONOSPACE SPOILER); when the daemon refuses them the
  text goes again without.
- No buttons. The conversation layer prints the choices ("reply 1, 2 or 3"); the Signal account
  is authenticated end to end, so a reply's sender is who they say. The buttons a question was
  sent with are remembered, so a reaction on that question answers it too, by its position:
  1️⃣ 2️⃣ 3️⃣ … pick the first, second, third choice, 👍 the first (allow once) and 👎 the last
  (deny). A reaction arrives as a ``Press`` with that button's data and the reactor's identity
  (the conversation layer checks it is the asker); ``answer`` goes to the reactor's direct chat.
- Edits exist but Signal shows each as a new version and caps them per message, so replies are
  not streamed by edits (``limits.edits`` false); ``edit`` is there for a single replacement.
- Texts over 2000 bytes travel as a "long text" attachment the apps fold behind "Read more";
  replies are split at 2000 characters instead.
- Voice notes are audio attachments without a file name (signal-cli's JSON does not say
  ``voiceNote``; the apps send voice notes unnamed, files keep their names).
- Rate limits come back as JSON-RPC error -5 with ``retryAfterSeconds`` per recipient: waited
  (at most 30 s) and tried once more.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import logging
import mimetypes
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import httpx
from httpx_sse import EventSource, SSEError

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

__all__ = ["SignalError", "SignalPlatform", "to_signal_text"]

log = logging.getLogger(__name__)

TEXT_LIMIT = 2000
GROUP_PREFIX = "group."
MENTION = "\ufffc"  # where a mention stands in a message's text
RATE_LIMIT_ERROR = -5
UNTRUSTED_KEY_ERROR = -4
METHOD_NOT_FOUND = -32601
MAX_RETRY_WAIT = 30.0
SEND_SETTLE = 10.0  # seconds a reaction waits for sends in flight (its question may be one)
QUESTIONS_KEPT = 256  # sent messages whose choices are remembered for reactions
_NUMBER = re.compile(r"^\+[1-9]\d{5,15}$")
_SKIN_TONES = re.compile("[\U0001f3fb-\U0001f3ff\ufe0f]")
_REACTION_POSITIONS: dict[str, int] = {f"{n}\u20e3": n - 1 for n in range(1, 10)} | {"👍": 0, "👎": -1}


class SignalError(Exception):
    """signal-cli answered a command with an error (or not at all); the message says what to do."""

    def __init__(self, method: str, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(f"signal-cli {method}: {message}")
        self.method = method
        self.code = code
        self.data = data


def _u16(text: str) -> int:
    """Length in UTF-16 code units: how Signal counts positions."""
    return len(text.encode("utf-16-le")) // 2


class SignalPlatform(Platform):
    name = "signal"

    def __init__(self, config: Config) -> None:
        super().__init__()
        section = config.signal
        if not section.account or not _NUMBER.match(section.account):
            raise PlatformConfigError(
                "[signal] account must be the bot's phone number in international form, "
                'e.g. account = "+4915123456789" (the number signal-cli is registered or linked with)'
            )
        self.number: str = section.account
        self.base_url = (section.api_base_url or section.url).rstrip("/")
        self.limits = Limits(text=TEXT_LIMIT, edit_interval=section.edit_interval, edits=False, buttons=False, numbered_replies=True)
        self._self_ids = {self.number}
        self._client: httpx.AsyncClient | None = None
        self._listener: asyncio.Task[None] | None = None
        self._stream: httpx.Response | None = None  # the open event stream
        self._chains: dict[str, asyncio.Task[None]] = {}  # place key -> its newest event's task (order per chat)
        self._questions: OrderedDict[str, tuple[str, list[Button]]] = OrderedDict()  # message id -> (place key, buttons)
        self._ids = itertools.count(1)
        self._sending = 0  # sends waiting for their message id
        self._sent = asyncio.Event()

    # -- connecting -----------------------------------------------------------------------

    async def start(self, events: Events) -> None:
        await self.stop()
        self._client = httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(30.0, connect=5.0))
        try:
            await self._check()
            response = await self._open_events()
        except BaseException:
            await self.stop()
            raise
        self.account = self.number
        self._listener = asyncio.create_task(self._listen(response, events), name="signal-events")

    async def _check(self) -> None:
        """The daemon runs and serves this account (a daemon for several accounts must list it)."""
        try:
            response = await self._http().get("/api/v1/check")
        except httpx.HTTPError as exc:
            raise PlatformDown(
                f"the signal-cli daemon at {self.base_url} is not answering ({type(exc).__name__}): start it with "
                f"'signal-cli -a {self.number} daemon --http 127.0.0.1:8080' or set [signal] url"
            ) from None
        if response.status_code != 200:
            raise PlatformDown(f"{self.base_url}/api/v1/check answered HTTP {response.status_code}: is [signal] url a signal-cli daemon?")
        try:
            accounts = await self._call("listAccounts", {})
        except SignalError as exc:
            if exc.code == METHOD_NOT_FOUND:
                return  # a daemon started with -a NUMBER serves that one account
            raise PlatformDown(f"the signal-cli daemon refused listAccounts: {exc}") from None
        numbers = [a.get("number") for a in accounts or [] if isinstance(a, dict)]
        if self.number not in numbers:
            raise PlatformDown(
                f"the signal-cli daemon at {self.base_url} has no account {self.number}: register or link it "
                f"('signal-cli -a {self.number} register' then 'verify', or 'signal-cli link'), or fix [signal] account",
                retry_after=300.0,
            )

    async def _open_events(self) -> httpx.Response:
        """GET /api/v1/events, kept as ``_stream`` (closed by ``stop_receiving``)."""
        request = self._http().build_request(
            "GET",
            "/api/v1/events",
            params={"account": self.number},
            headers={"Accept": "text/event-stream", "Cache-Control": "no-store"},
            # signal-cli sends a keep-alive every 15 s: a minute of silence is a dead connection.
            timeout=httpx.Timeout(30.0, connect=5.0, read=60.0),
        )
        try:
            response = await self._http().send(request, stream=True)
        except httpx.HTTPError as exc:
            raise PlatformDown(f"cannot open signal-cli's event stream at {self.base_url} ({type(exc).__name__})") from None
        if response.status_code != 200:
            await response.aclose()
            raise PlatformDown(f"signal-cli's event stream answered HTTP {response.status_code}: is {self.number} one of its accounts?")
        self._stream = response
        return response

    async def _listen(self, response: httpx.Response, events: Events) -> None:
        """Deliver events until stopped; a broken stream is opened again with backoff."""
        delay = 1.0
        while True:
            try:
                async for sse in EventSource(response).aiter_sse():
                    delay = 1.0
                    if sse.event in ("receive", "message", ""):
                        self._receive(sse.data, events)
                log.warning("signal: the event stream from %s ended; reconnecting", self.base_url)
            except (httpx.HTTPError, SSEError) as exc:
                log.warning("signal: the event stream from %s broke (%s); reconnecting", self.base_url, type(exc).__name__)
            finally:
                await response.aclose()
            while True:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
                try:
                    response = await self._open_events()
                    break
                except PlatformDown as exc:
                    log.warning("signal: %s", exc.why)

    async def stop_receiving(self) -> None:
        """No new events (the first step of a graceful shutdown); sending still works."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
        response, self._stream = self._stream, None
        if response is not None:  # a listener cancelled before it ran never closed it
            await response.aclose()

    async def stop(self) -> None:
        await self.stop_receiving()
        tasks = [t for t in self._chains.values() if not t.done()]
        self._chains.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # -- receiving ------------------------------------------------------------------------

    def _receive(self, data: str, events: Events) -> None:
        """One SSE payload; handled in its own task, after the previous event of the same chat."""
        try:
            payload = json.loads(data)
        except ValueError:
            log.warning("signal: an event that is not JSON was skipped")
            return
        envelope = _envelope(payload)
        if envelope is None:
            return
        try:
            handled = self._handle(envelope)
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            log.warning("signal: an envelope of an unexpected shape was skipped (%s)", exc)
            return
        if handled is None:
            return
        key, deliver = handled
        previous = self._chains.get(key)

        async def run() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            try:
                await deliver(events)
            except Exception:
                log.exception("signal: delivering an event in %s failed", key)

        def forget(task: asyncio.Task[None]) -> None:
            if self._chains.get(key) is task:
                del self._chains[key]

        task = asyncio.create_task(run())
        self._chains[key] = task
        task.add_done_callback(forget)

    def _handle(self, envelope: dict[str, Any]) -> tuple[str, Callable[[Events], Awaitable[None]]] | None:
        """What to deliver for one envelope (None: nothing, e.g. receipts, typing, the bot's own)."""
        message = envelope.get("dataMessage")
        native = envelope.get("sourceUuid") or envelope.get("sourceNumber") or envelope.get("source")
        if not isinstance(message, dict) or not native:
            return None
        if self._is_self(envelope.get("sourceNumber"), envelope.get("sourceUuid"), envelope.get("source")):
            return None
        sender = Sender(identity(self.name, native), envelope.get("sourceName") or "")
        group = (message.get("groupInfo") or {}).get("groupId")
        place = (
            Place(self.name, f"{GROUP_PREFIX}{group}", None, direct=False) if group else Place(self.name, str(native), None, direct=True)
        )
        reaction = message.get("reaction")
        if isinstance(reaction, dict):
            return place.key, lambda events: self._react(events, place, sender, reaction)
        text, mentioned = self._text(message)
        attachments = [self._attachment(a, native, group) for a in message.get("attachments") or [] if isinstance(a, dict)]
        if not text.strip() and not attachments:
            return None  # a group update, a sticker, a deletion
        quote_author = message.get("quote") or {}
        quoted_bot = self._is_self(quote_author.get("authorNumber"), quote_author.get("authorUuid"), quote_author.get("author"))
        incoming = Incoming(
            place=place,
            sender=sender,
            text=text,
            addressed=place.direct or mentioned or quoted_bot or text.lstrip().startswith("/"),
            attachments=attachments,
            message_id=str(message.get("timestamp") or envelope.get("timestamp") or ""),
        )
        return place.key, lambda events: events.message(incoming)

    def _is_self(self, *ids: Any) -> bool:
        return any(i in self._self_ids for i in ids if i)

    def _text(self, message: dict[str, Any]) -> tuple[str, bool]:
        """The text with the bot's mentions removed and others' written out; whether the bot was mentioned."""
        text = message.get("message") or ""
        mentions = [m for m in message.get("mentions") or [] if isinstance(m, dict)]
        if not mentions:
            return text, False
        units = text.encode("utf-16-le")
        mentioned = False
        # From the end, so earlier positions stay valid.
        for mention in sorted(mentions, key=lambda m: int(m.get("start") or 0), reverse=True):
            start, length = int(mention.get("start") or 0), int(mention.get("length") or 1)
            if self._is_self(mention.get("number"), mention.get("uuid"), mention.get("name")):
                mentioned = True
                replacement = ""
            else:
                replacement = "@" + str(mention.get("number") or mention.get("uuid") or mention.get("name") or "someone")
            units = units[: 2 * start] + replacement.encode("utf-16-le") + units[2 * (start + length) :]
        cleaned = units.decode("utf-16-le", errors="replace")
        return re.sub(r"[ \t]{2,}", " ", cleaned).strip(), mentioned

    def _attachment(self, item: dict[str, Any], sender: str, group: str | None) -> Attachment:
        mime = str(item.get("contentType") or "application/octet-stream")
        attachment_id = str(item.get("id") or "")
        filename = item.get("filename")
        voice = mime.startswith("audio/") and (bool(item.get("voiceNote")) or not filename)
        if not filename:
            extension = mimetypes.guess_extension(mime.split(";")[0]) or ".bin"
            filename = f"{'voice' if voice else 'signal'}-{attachment_id.split('.')[0] or 'file'}{extension}"
        where = {"groupId": group} if group else {"recipient": sender}

        async def fetch() -> bytes:
            result = await self._call("getAttachment", {"id": attachment_id, **where})
            return base64.b64decode(result["data"] if isinstance(result, dict) else result)

        size = item.get("size")
        return Attachment(str(filename), mime, int(size) if isinstance(size, int) else None, fetch, voice=voice)

    async def _react(self, events: Events, place: Place, sender: Sender, reaction: dict[str, Any]) -> None:
        # A question's id is known once its send returns, and a reaction can overtake that answer.
        if self._sending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sent.wait(), SEND_SETTLE)
        press = self._press(place, sender, reaction)
        if press is not None:
            await events.press(press)

    def _press(self, place: Place, sender: Sender, reaction: dict[str, Any]) -> Press | None:
        """A reaction on a question the bot sent, as a press of the choice it stands for."""
        if reaction.get("isRemove"):
            return None
        if not self._is_self(reaction.get("targetAuthorNumber"), reaction.get("targetAuthorUuid"), reaction.get("targetAuthor")):
            return None
        message_id = str(reaction.get("targetSentTimestamp") or "")
        question = self._questions.get(message_id)
        position = _REACTION_POSITIONS.get(_SKIN_TONES.sub("", str(reaction.get("emoji") or "")))
        if question is None or position is None or question[0] != place.key:
            log.debug("signal: a reaction on %s in %s answers no question", message_id, place.key)
            return None
        buttons = question[1]
        if not -len(buttons) <= position < len(buttons):
            return None
        presser = Place(self.name, sender.id.partition(":")[2], None, direct=True)

        async def answer(text: str, alert: bool) -> None:
            if text:
                try:
                    await self.send(presser, ("⚠️ " if alert else "") + text)
                except (SignalError, httpx.HTTPError) as exc:
                    log.info("signal: could not answer a reaction: %s", exc)

        return Press(place=place, sender=sender, data=buttons[position].data, message_id=message_id, answer=answer)

    # -- sending --------------------------------------------------------------------------

    async def send(self, place: Place, markdown: str, *, buttons: list[Button] | None = None) -> str:
        """One message. ``buttons`` are not shown (the text lists the choices) but remembered, so
        a reaction on this message answers it."""
        self._sending += 1
        self._sent.clear()
        try:
            message_id = await self._send_text(place, markdown, {})
        finally:
            self._sending -= 1
            if not self._sending:
                self._sent.set()
        if buttons:
            self._questions[message_id] = (place.key, list(buttons))
            while len(self._questions) > QUESTIONS_KEPT:
                self._questions.popitem(last=False)
        return message_id

    async def edit(self, place: Place, message_id: str, markdown: str, *, buttons: list[Button] | None = None) -> None:
        """Replace a sent message's text (Signal shows it as edited); None forgets its choices."""
        await self._send_text(place, markdown, {"editTimestamp": int(message_id)})
        if buttons:
            self._questions[message_id] = (place.key, list(buttons))
        else:
            self._questions.pop(message_id, None)

    async def _send_text(self, place: Place, markdown: str, extra: dict[str, Any]) -> str:
        text, styles = to_signal_text(markdown)
        params = {**_target(place), **extra, "message": text or markdown or " "}
        if styles:
            try:
                return _timestamp(await self._call("send", {**params, "textStyle": styles}))
            except SignalError as exc:
                if "style" not in str(exc).lower():
                    raise
                log.info("signal-cli refused the text styles (%s); sending plain text", exc)
            params["message"] = markdown
        return _timestamp(await self._call("send", params))

    async def send_file(self, place: Place, name: str, data: bytes, mime: str, caption: str = "") -> str:
        """A file as an attachment (a data URI with its name); audio goes as a voice note."""
        uri = f"data:{mime or 'application/octet-stream'};filename={quote(name, safe='')};base64,{base64.b64encode(data).decode()}"
        text, styles = to_signal_text(caption)
        params: dict[str, Any] = {**_target(place), "message": text, "attachments": [uri]}
        if styles:
            params["textStyle"] = styles
        if mime.startswith("audio/"):
            params["voiceNote"] = True
        return _timestamp(await self._call("send", params))

    async def typing(self, place: Place) -> None:
        try:
            await self._call("sendTyping", _target(place))
        except (SignalError, httpx.HTTPError) as exc:
            log.debug("signal: typing indicator failed: %s", exc)

    def place_for(self, chat: str, thread: str | None = None) -> Place:
        return Place(self.name, chat, None, direct=not chat.startswith(GROUP_PREFIX))

    # -- JSON-RPC -------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(30.0, connect=5.0))
        return self._client

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        """One JSON-RPC request; a rate limit is waited out once (as long as the daemon says, at most 30 s)."""
        try:
            return await self._request(method, params)
        except SignalError as exc:
            if exc.code != RATE_LIMIT_ERROR:
                raise
            wait = min(_retry_after(exc.data), MAX_RETRY_WAIT)
            log.info("signal: rate limited on %s; trying again in %.0fs", method, wait)
            await asyncio.sleep(wait)
            return await self._request(method, params)

    async def _request(self, method: str, params: dict[str, Any]) -> Any:
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": {**params, "account": self.number}}
        try:
            response = await self._http().post("/api/v1/rpc", json=body)
        except httpx.HTTPError as exc:
            raise SignalError(method, f"the daemon at {self.base_url} did not answer ({type(exc).__name__}); is it running?") from None
        if response.status_code != 200:
            raise SignalError(method, f"the daemon answered HTTP {response.status_code}")
        try:
            reply = response.json()
        except ValueError:
            raise SignalError(method, "the daemon's answer is not JSON") from None
        error = reply.get("error") if isinstance(reply, dict) else None
        if error:
            code = error.get("code")
            message = str(error.get("message") or "failed")
            if code == UNTRUSTED_KEY_ERROR:
                message += (
                    " (the recipient's safety number changed: trust the new key with the daemon's 'trust' method, "
                    '{"recipient": RECIPIENT, "trustAllKnownKeys": true}, or with '
                    f"'signal-cli -a {self.number} trust -a RECIPIENT' while the daemon is stopped)"
                )
            raise SignalError(method, f"{message} (error {code})", code, error.get("data"))
        return reply.get("result") if isinstance(reply, dict) else None


def _envelope(payload: Any) -> dict[str, Any] | None:
    """The envelope of an event: the HTTP stream sends ``{"envelope", "account"}``, the socket
    form the same inside JSON-RPC ``params`` (or ``params.result`` for a subscription)."""
    for _ in range(3):
        if not isinstance(payload, dict):
            return None
        if isinstance(payload.get("envelope"), dict):
            return payload["envelope"]
        payload = payload.get("params") if "params" in payload else payload.get("result")
    return None


def _target(place: Place) -> dict[str, Any]:
    if place.chat.startswith(GROUP_PREFIX):
        return {"groupId": place.chat[len(GROUP_PREFIX) :]}
    return {"recipient": [place.chat]}


def _timestamp(result: Any) -> str:
    if isinstance(result, dict) and result.get("timestamp") is not None:
        return str(result["timestamp"])
    raise SignalError("send", "the daemon's answer has no message timestamp")


def _retry_after(data: Any) -> float:
    """The longest ``retryAfterSeconds`` in a rate-limit error's results (5 s when none is given)."""
    results = ((data or {}).get("response") or {}).get("results") if isinstance(data, dict) else None
    waits = [float(r["retryAfterSeconds"]) for r in results or [] if isinstance(r, dict) and r.get("retryAfterSeconds") is not None]
    return max(waits) if waits else 5.0


# -- Markdown to Signal's text styles ---------------------------------------------------------

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+#.-]*)\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_INLINE = re.compile(
    r"`(?P<code>[^`\n]+)`"
    r"|\[(?P<label>[^\]\n]+)\]\((?P<url>https?://[^)\s]+)\)"
    r"|\*\*(?P<bold>[^*\n]+?)\*\*|__(?P<bold2>[^_\n]+?)__"
    r"|~~(?P<strike>[^~\n]+?)~~"
    r"|\|\|(?P<spoiler>[^|\n]+?)\|\|"
    r"|(?<![\w*])\*(?P<italic>[^*\n]+?)\*(?![\w*])|(?<![\w_])_(?P<italic2>[^_\n]+?)_(?![\w_])"
)
_STYLES = {"code": "MONOSPACE", "bold": "BOLD", "bold2": "BOLD", "strike": "STRIKETHROUGH", "spoiler": "SPOILER"}
_STYLES |= {"italic": "ITALIC", "italic2": "ITALIC"}


class _Styled:
    """Text being built, with style ranges counted in UTF-16 units."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.styles: list[str] = []
        self.position = 0

    def add(self, text: str, style: str | None = None) -> None:
        length = _u16(text)
        if style and length:
            self.styles.append(f"{self.position}:{length}:{style}")
        self.parts.append(text)
        self.position += length

    def inline(self, text: str) -> None:
        pos = 0
        for match in _INLINE.finditer(text):
            self.add(text[pos : match.start()])
            pos = match.end()
            if match.group("label"):
                self.add(f"{match.group('label')} ({match.group('url')})")
                continue
            kind = next(k for k in _STYLES if match.group(k))
            self.add(match.group(kind), _STYLES[kind])
        self.add(text[pos:])


def to_signal_text(markdown: str) -> tuple[str, list[str]]:
    """Model Markdown as Signal text and its ``textStyle`` ranges (``start:length:STYLE``)."""
    out = _Styled()
    code: list[str] | None = None
    for index, line in enumerate(markdown.split("\n")):
        if _FENCE.match(line):
            if code is None:
                code = []
                if index:
                    out.add("\n")
            else:
                out.add("\n".join(code), "MONOSPACE")
                code = None
            continue
        if code is not None:
            code.append(line)
            continue
        if index:
            out.add("\n")
        if heading := _HEADING.match(line):
            start, before = out.position, len(out.styles)
            out.inline(heading.group(1))
            if out.position > start:
                out.styles.insert(before, f"{start}:{out.position - start}:BOLD")
        elif bullet := _BULLET.match(line):
            out.add(f"{bullet.group(1)}• ")
            out.inline(bullet.group(2))
        else:
            out.inline(line)
    if code is not None:  # an unclosed fence still reads as code
        out.add("\n".join(code), "MONOSPACE")
    return "".join(out.parts), out.styles
