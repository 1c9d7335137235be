"""Resumable streams for ``hermes-mcp --http``: each session keeps its newest events, so a client
whose connection dropped reconnects with ``Last-Event-ID`` and gets what it missed.

Every message the SDK's streamable HTTP transport sends on a session's streams is stored here
first and goes out with the returned id as its SSE ``id``. In a session that negotiated
2025-11-25 every stream opens with a priming event (an id, empty data and ``retry``), so the
client holds an id to resume from before anything else arrives. A ``GET`` with ``Last-Event-ID``
is answered from here: the stream's events after that id, then, live, the rest of the stream
up to the call's result. A call keeps running when its connection drops, so its result reaches
the resumed stream. (The 2026-07-28 protocol has no sessions and no resumable streams: there
closing a call's stream cancels the call.)

Bounds: a session keeps its newest ``MAX_EVENTS`` events and at most ``MAX_BYTES`` of their
JSON, evicting the oldest first; the newest event is always kept, however large. A resume whose
missed events were evicted is refused with 410 and a message saying so; the standalone ``GET``
stream starts afresh instead. A session's events go with the session (closed by the client,
idle for 30 minutes, or the server stopping).

The SDK hands an ``EventStore`` no session, so one ``ResumableEvents`` serves them all and
``EventScope`` (ASGI middleware) binds each request to its session's ``SessionEvents`` in a
context variable; the session's own tasks inherit it from the request that opened the session.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
import logging
import re
import secrets
import weakref
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.server.streamable_http import GET_STREAM_KEY, EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCError, JSONRPCResponse
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, is_version_at_least

if TYPE_CHECKING:
    from mcp_types import JSONRPCMessage

__all__ = ["MAX_BYTES", "MAX_EVENTS", "RETRY_MS", "EventScope", "Refused", "ResumableEvents", "SessionEvents"]

log = logging.getLogger(__name__)

MAX_EVENTS = 1000
MAX_BYTES = 4 * 1024 * 1024
RETRY_MS = 1000  # the `retry` of priming events: how long a client waits before reconnecting
PRIMED_FROM = "2025-11-25"  # older clients cannot read an event with empty data
_ID = re.compile(r"([0-9a-f]{8})\.([0-9]{1,9})\.([0-9]{1,15})")

_current: contextvars.ContextVar[SessionEvents | None] = contextvars.ContextVar("hermes_mcp_session_events", default=None)


class Refused(Exception):
    """A ``Last-Event-ID`` this session cannot resume from; the message says why and what to do."""

    def __init__(self, status: int, message: str, stream: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.stream = stream  # the stream it names, when known


@dataclass(eq=False, slots=True)
class _Stream:
    key: str  # the SDK's stream id: a request's id, or GET_STREAM_KEY
    number: int
    kept: int = 0  # its events still held
    lost_after: int = 0  # seq of the newest of its messages evicted
    done: bool = False  # its response has been stored
    follower: object | None = None  # the resumed connection now serving it


@dataclass(eq=False, slots=True)
class _Event:
    seq: int
    stream: _Stream
    message: JSONRPCMessage | None  # None: a priming event
    size: int


class SessionEvents:
    """One session's newest events, in the order they were sent."""

    def __init__(self) -> None:
        self.tag = secrets.token_hex(4)  # ids of another session (or an earlier run) are told apart
        self.negotiated: str | None = None  # the protocol version its initialize settled on
        self.closed = False
        self._events: deque[_Event] = deque()
        self._bytes = 0
        self._seq = 0
        self._streams: dict[str, _Stream] = {}
        self._numbers: dict[int, _Stream] = {}
        self._stream_numbers = itertools.count(1)
        self._changed = asyncio.Event()
        self._router: asyncio.Task[Any] | None = None

    @property
    def primes(self) -> bool:
        """Whether this session's streams open with a priming event."""
        return self.negotiated is not None and is_version_at_least(self.negotiated, PRIMED_FROM)

    def store(self, key: str, message: JSONRPCMessage | None) -> str:
        stream = self._streams.get(key)
        if stream is None or stream.done:
            # A request id may be used again once answered: the new request is a stream of its own.
            stream = self._open(key)
        self._seq += 1
        size = len(message.model_dump_json(by_alias=True, exclude_unset=True)) if message is not None else 0
        event = _Event(self._seq, stream, message, size)
        self._events.append(event)
        self._bytes += size
        stream.kept += 1
        if isinstance(message, JSONRPCResponse | JSONRPCError) and key != GET_STREAM_KEY:
            stream.done = True
        if self.negotiated is None and isinstance(message, JSONRPCResponse):
            version = message.result.get("protocolVersion")
            if "serverInfo" in message.result and version in HANDSHAKE_PROTOCOL_VERSIONS:
                self.negotiated = version
        self._evict()
        self._notify()
        return self._id(event)

    def locate(self, last_event_id: str) -> tuple[_Stream, int]:
        """The stream an id belongs to and its sequence number, if what follows it is all still held."""
        found = _ID.fullmatch(last_event_id.strip())
        if found is None or found.group(1) != self.tag or int(found.group(3)) > self._seq:
            raise Refused(
                400,
                "Last-Event-ID is not the id of an event sent in this session: resume with the id of the last event "
                "received on the stream, or repeat the request",
            )
        stream, seq = self._numbers.get(int(found.group(2))), int(found.group(3))
        if stream is None or stream.lost_after > seq:
            raise Refused(
                410,
                f"the events after this Last-Event-ID are no longer kept (a session keeps its newest {MAX_EVENTS} events "
                f"and {MAX_BYTES // (1024 * 1024)} MiB): repeat the request; an agent's reply is also kept in its session "
                "(sessions_list, session_read)",
                stream.key if stream is not None else None,
            )
        return stream, seq

    async def follow(self, stream: _Stream, after: int, send: EventCallback) -> None:
        """Send the stream's events after ``after``, then new ones as they come, until its response.

        Ends early when another connection resumes the same stream, when the session ends, or
        when events the client has not had were evicted meanwhile (its next resume is refused
        with the reason)."""
        mine = object()
        stream.follower = mine
        cursor = after
        try:
            while True:
                changed = self._changed
                if stream.lost_after > cursor:
                    log.info("a resumed stream fell more than %d events or %d bytes behind; closing it", MAX_EVENTS, MAX_BYTES)
                    return
                first = self._events[0].seq if self._events else self._seq + 1
                for event in list(itertools.islice(self._events, max(cursor + 1 - first, 0), None)):
                    if stream.follower is not mine or self.closed:
                        return
                    cursor = event.seq
                    if event.stream is stream and event.message is not None:
                        await send(EventMessage(event.message, self._id(event)))
                        if stream.key != GET_STREAM_KEY and isinstance(event.message, JSONRPCResponse | JSONRPCError):
                            return
                if stream.done or stream.follower is not mine or self.closed:
                    return  # its response went out before `after`
                await changed.wait()
        finally:
            if stream.follower is mine:
                stream.follower = None

    def retire(self, key: str) -> None:
        """The client opened the stream afresh: a resumed connection still serving it stops."""
        stream = self._streams.get(key)
        if stream is not None and stream.follower is not None:
            stream.follower = None
            self._notify()

    def watch(self, router: asyncio.Task[Any] | None) -> None:
        """The task that routes the session's messages: the session ends when it does."""
        if self._router is None and router is not None:
            self._router = router
            router.add_done_callback(lambda _task: self.close())

    def close(self) -> None:
        """The session ended: followers stop, and what it kept is let go (a task the session started
        may outlive it, holding this object)."""
        self.closed = True
        self._events.clear()
        self._streams.clear()
        self._numbers.clear()
        self._bytes = 0
        self._notify()

    def _open(self, key: str) -> _Stream:
        stream = _Stream(key, next(self._stream_numbers))
        self._streams[key] = self._numbers[stream.number] = stream
        return stream

    def _id(self, event: _Event) -> str:
        return f"{self.tag}.{event.stream.number}.{event.seq}"

    def _evict(self) -> None:
        while len(self._events) > 1 and (len(self._events) > MAX_EVENTS or self._bytes > MAX_BYTES):
            old = self._events.popleft()
            self._bytes -= old.size
            stream = old.stream
            stream.kept -= 1
            if old.message is not None:
                stream.lost_after = old.seq
            if stream.kept == 0 and (stream.done or len(self._numbers) > 2 * MAX_EVENTS):
                # Finished and fully evicted (or left unanswered among very many): nothing to resume.
                del self._numbers[stream.number]
                if self._streams.get(stream.key) is stream:
                    del self._streams[stream.key]

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


class ResumableEvents(EventStore):
    """The SDK's event store, for every session: each call goes to the current request's session."""

    def __init__(self) -> None:
        self._sessions: weakref.WeakValueDictionary[str, SessionEvents] = weakref.WeakValueDictionary()
        self._unbound_warned = False

    def session(self, session_id: str) -> SessionEvents | None:
        return self._sessions.get(session_id)

    def register(self, session_id: str, events: SessionEvents) -> None:
        # Held weakly: the session's own tasks hold its events (in their context) while it lives.
        self._sessions[session_id] = events

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        events = _current.get()
        if events is None:
            if not self._unbound_warned:
                self._unbound_warned = True
                log.warning("an event was sent outside any session's request; it cannot be resumed")
            events = SessionEvents()
        if message is not None:
            events.watch(asyncio.current_task())  # only the session's message router stores messages
        return events.store(stream_id, message)

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        events = _current.get()
        if events is None:
            return None
        try:
            stream, seq = events.locate(last_event_id)
        except Refused:
            return None  # EventScope answered these before the SDK saw them
        await events.follow(stream, seq, send_callback)
        # None: the stream is served to its end here, so the SDK ends the response (rather than
        # tail it from where this left off, which could miss an event sent in between).
        return None


class EventScope:
    """ASGI middleware: binds each request to its session's events.

    Besides the binding: a new session's id is learnt from the answer that opens it; a plain
    ``GET`` stream is primed like the SDK primes request streams; a ``Last-Event-ID`` that cannot
    be resumed is refused with the reason; and the version the session negotiated decides whether
    its streams are primed, even when a request's ``MCP-Protocol-Version`` names an older one.
    """

    def __init__(self, app: Any, store: ResumableEvents) -> None:
        self._app = app
        self._store = store

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        session_id = _header(scope, b"mcp-session-id")
        if session_id is None:
            events = SessionEvents()
            send = self._registering(send, events)
        else:
            found = self._store.session(session_id)
            if found is None or found.closed:  # unknown or ended: the SDK answers
                await self._app(scope, receive, send)
                return
            events = found
            scope = _negotiated_version(scope, events)
            if scope["method"] == "GET":
                last = _header(scope, b"last-event-id")
                if last is not None:
                    try:
                        events.locate(last)
                    except Refused as refused:
                        if refused.stream != GET_STREAM_KEY:
                            await _refuse(send, session_id, refused)
                            return
                        log.warning("the notification stream resumed too late to replay what it missed; it starts afresh")
                        scope = _without_header(scope, b"last-event-id")
                        last = None
                if last is None:
                    events.retire(GET_STREAM_KEY)
                    if events.primes:
                        send = _priming(send, events)
            elif scope["method"] == "DELETE":
                send = _closing(send, events)
        token = _current.set(events)
        try:
            await self._app(scope, receive, send)
        finally:
            _current.reset(token)

    def _registering(self, send: Any, events: SessionEvents) -> Any:
        async def registering(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                session_id = next((v.decode("latin-1") for k, v in message.get("headers", []) if k.lower() == b"mcp-session-id"), None)
                if session_id:
                    self._store.register(session_id, events)
            await send(message)

        return registering


def _priming(send: Any, events: SessionEvents) -> Any:
    """Open an SSE answer with a priming event, as the SDK does on request streams."""
    started = False

    async def priming(message: dict[str, Any]) -> None:
        nonlocal started
        await send(message)
        if message["type"] == "http.response.start" and not started:
            started = True
            kind = next((v for k, v in message.get("headers", []) if k.lower() == b"content-type"), b"")
            if message["status"] == 200 and kind.startswith(b"text/event-stream"):
                event_id = events.store(GET_STREAM_KEY, None)
                frame = f"id: {event_id}\r\ndata: \r\nretry: {RETRY_MS}\r\n\r\n".encode()
                await send({"type": "http.response.body", "body": frame, "more_body": True})

    return priming


def _closing(send: Any, events: SessionEvents) -> Any:
    async def closing(message: dict[str, Any]) -> None:
        await send(message)
        if message["type"] == "http.response.start" and message["status"] < 300:
            events.close()

    return closing


async def _refuse(send: Any, session_id: str, refused: Refused) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": str(refused)}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers.append((b"mcp-session-id", session_id.encode("latin-1")))
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == name), None)


def _without_header(scope: dict[str, Any], name: bytes) -> dict[str, Any]:
    return {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != name]}


def _negotiated_version(scope: dict[str, Any], events: SessionEvents) -> dict[str, Any]:
    """The session's negotiated version in ``MCP-Protocol-Version`` when the request names an older
    handshake version or none (the SDK primes by the header, and takes a missing one for 2025-03-26)."""
    negotiated = events.negotiated
    stated = _header(scope, b"mcp-protocol-version")
    if negotiated is None or stated == negotiated or (stated is not None and stated not in HANDSHAKE_PROTOCOL_VERSIONS):
        return scope
    if stated is not None and is_version_at_least(stated, negotiated):
        return scope
    headers = [(k, v) for k, v in scope["headers"] if k != b"mcp-protocol-version"]
    headers.append((b"mcp-protocol-version", negotiated.encode()))
    return {**scope, "headers": headers}
