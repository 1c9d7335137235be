"""Log messages for MCP clients: the server's own log lines and tasks' progress as ``notifications/message``.

What a client gets, and when:

- Handshake era (2025-11-25 and before): nothing until the client sends ``logging/setLevel``.
  From then on that connection (each has its own level) gets the server's log lines (Python
  logging of the ``core``, ``toolsets``, ``surface_support`` and ``hermes_mcp`` packages) at or
  above its level, and the progress of the tasks it started or followed (``ask``,
  ``task_start``, ``task_wait``, ``task_status``, ``task_cancel``): tool calls started and
  finished, approvals waited on, notices and the task's end at ``info`` and above, the reply's
  text as it is written at ``debug``.
- 2026-07-28 era (no ``logging/setLevel``): a request opts in with the ``_meta`` key
  ``io.modelcontextprotocol/logLevel`` and gets, on its own stream and while it runs, the log
  lines written on its behalf (by the task it starts too) and the progress of the task it
  starts or waits for, at or above that level.

Lines are logged under their logger's name (``hermes_mcp.tasks``); progress under
``hermes.task``, its data an object with ``message``, ``task_id``, ``session_id`` and
``event``. Every text is redacted (configured secrets, credential shapes) before it leaves.

Never blocking, never recursive: ``emit`` (any thread) only redacts and queues (at most
``QUEUE_LIMIT`` waiting; more are dropped and counted); one task sends, each send bounded by
``SEND_SECONDS``, and whatever is logged while it sends is not sent. A request's own messages
are sent before its answer (waiting at most ``FLUSH_SECONDS``). The log file and stderr keep
the configured level when a client asks for a lower one.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.events import Notice, PermissionNeeded, TextDelta, ToolFinished, ToolStarted

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from hermes_mcp.runtime import Runtime
    from hermes_mcp.tasks import Task

__all__ = ["LEVELS", "PACKAGES", "TASK_LOGGER", "LogBridge", "install_logging", "mcp_level"]

log = logging.getLogger(__name__)

# The protocol's levels (RFC 5424), least severe first, and the Python level each starts at.
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
THRESHOLDS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": 25,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL + 1,
    "emergency": logging.CRITICAL + 2,
}
PACKAGES = ("core", "toolsets", "surface_support", "hermes_mcp")
TASK_LOGGER = "hermes.task"
QUEUE_LIMIT = 1000
SEND_SECONDS = 5.0
FLUSH_SECONDS = 1.0
TEXT_CHUNK = 400  # reply text is sent in pieces of about this size, cut at line ends when it can
MAX_CONNECTIONS = 64
MAX_FOLLOWED = 50  # tasks remembered per connection
_FOLLOWING_TOOLS = ("task_wait", "task_status", "task_cancel")


def mcp_level(levelno: int) -> str:
    """The protocol level of a Python log level."""
    for name in reversed(LEVELS):
        if levelno >= THRESHOLDS[name]:
            return name
    return "debug"


@dataclass(eq=False)
class _Scope:
    """One request being answered: where its messages go while it is open."""

    request_id: Any
    session: Any
    key: str | None  # the handshake-era connection it came on; None in the 2026 era
    threshold: int | None  # the 2026 era's per-request opt-in
    follows: set[str] = field(default_factory=set)
    open: bool = True
    queued: int = 0


@dataclass(eq=False)
class _Connection:
    """A handshake-era connection that asked for log messages with ``logging/setLevel``."""

    key: str
    session: Any
    threshold: int


@dataclass(eq=False)
class _Item:
    levelno: int
    logger: str
    data: Any
    scope: _Scope | None
    task_id: str | None = None  # set for a task's progress


# The request a piece of code runs for (tasks' runners inherit it from the call that started them).
_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("hermes_mcp_log_scope", default=None)
# Set in the sending task: what is logged while a message is being sent is never sent itself.
_SENDING: contextvars.ContextVar[bool] = contextvars.ContextVar("hermes_mcp_log_sending", default=False)


def _connection_key(ctx: Any) -> str:
    headers = getattr(ctx.request, "headers", None)
    return (headers.get("mcp-session-id") if headers is not None else None) or "stdio"


def _followed_task(ctx: Any) -> str | None:
    """The task a ``tools/call`` follows by its arguments (or, for a repeated ``ask``, its state)."""
    params = ctx.params
    if ctx.method != "tools/call" or not isinstance(params, Mapping):
        return None
    name, arguments = params.get("name"), params.get("arguments")
    if name in _FOLLOWING_TOOLS and isinstance(arguments, Mapping) and isinstance(arguments.get("task_id"), str):
        return str(arguments["task_id"])
    state = params.get("requestState")  # hermes_mcp.follow's: {"task": ID, ...}, unsealed by the SDK by now
    if name == "ask" and isinstance(state, str):
        try:
            found = json.loads(state)
        except ValueError:
            return None
        task = found.get("task") if isinstance(found, dict) else None
        return task if isinstance(task, str) else None
    return None


class LogBridge(logging.Handler):
    """Log records and task events in, ``notifications/message`` out, to whoever asked for them."""

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(logging.NOTSET)
        self._redact = runtime.redact
        self._connections: OrderedDict[str, _Connection] = OrderedDict()
        self._connection_levels: tuple[int, ...] = ()  # read by emit() in any thread
        self._open: set[_Scope] = set()  # every request being answered (the loop's thread only)
        self._scope_levels: Counter[int] = Counter()
        self._follows: OrderedDict[str, OrderedDict[str, None]] = OrderedDict()
        self._texts: dict[str, list[str]] = {}
        self._local = threading.local()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._queue: asyncio.Queue[_Item | asyncio.Event] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._configured = logging.NOTSET
        self._applied = logging.NOTSET
        self._dropped = 0

    # --- what clients ask for ----------------------------------------------------------

    async def set_level(self, ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
        """``logging/setLevel``: this connection gets messages at ``params.level`` and above from now on."""
        from mcp_types import EmptyResult

        key = _connection_key(ctx)
        self._connections.pop(key, None)
        self._connections[key] = _Connection(key, ctx.session, THRESHOLDS[params.level])
        while len(self._connections) > MAX_CONNECTIONS:
            self._connections.popitem(last=False)
        self._connections_changed()
        log.debug("log messages at %s and above go to connection %s", params.level, key)
        return EmptyResult()

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        """Server middleware: each request's scope, its opt-in (2026 era) and the tasks it follows."""
        if ctx.request_id is None:
            return await call_next(ctx)
        from mcp_types import LOG_LEVEL_META_KEY
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        threshold = None
        key = None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            meta = ctx.meta if isinstance(ctx.meta, Mapping) else {}
            requested = meta.get(LOG_LEVEL_META_KEY)
            threshold = THRESHOLDS.get(requested) if isinstance(requested, str) else None
        else:
            key = _connection_key(ctx)
        scope = _Scope(ctx.request_id, ctx.session, key, threshold)
        followed = _followed_task(ctx)
        if followed is not None:
            scope.follows.add(followed)
            if key is not None:
                self._follow(key, followed)
        self._open.add(scope)
        if threshold is not None:
            self._scope_levels[threshold] += 1
            self._start()
            self._apply_levels()
        token = _SCOPE.set(scope)
        try:
            result = await call_next(ctx)
            if scope.queued:
                await self._flush()
            return result
        finally:
            _SCOPE.reset(token)
            scope.open = False
            self._open.discard(scope)
            if threshold is not None:
                self._scope_levels[threshold] -= 1
                if not self._scope_levels[threshold]:
                    del self._scope_levels[threshold]
                self._apply_levels()

    def _follow(self, key: str, task_id: str) -> None:
        tasks = self._follows.pop(key, None) or OrderedDict()
        tasks.pop(task_id, None)
        tasks[task_id] = None
        while len(tasks) > MAX_FOLLOWED:
            tasks.popitem(last=False)
        self._follows[key] = tasks
        while len(self._follows) > MAX_CONNECTIONS:
            self._follows.popitem(last=False)

    def _connections_changed(self) -> None:
        self._connection_levels = tuple(c.threshold for c in self._connections.values())
        self._start()
        self._apply_levels()

    def _listening(self, levelno: int, scope: _Scope | None) -> bool:
        if any(levelno >= t for t in self._connection_levels):
            return True
        return scope is not None and scope.open and scope.threshold is not None and levelno >= scope.threshold

    # --- in: log records (any thread) and task events (the loop's thread) ---------------

    def emit(self, record: logging.LogRecord) -> None:
        if _SENDING.get() or getattr(self._local, "busy", False):
            return
        self._local.busy = True
        try:
            scope = _SCOPE.get()
            if not self._listening(record.levelno, scope):
                return
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                text = f"{text}\n{logging.Formatter().formatException(record.exc_info)}"
            self._submit(_Item(record.levelno, record.name, self._redact(text), scope))
        except Exception:
            pass  # a log message for a client is never worth a failure, or a log line of its own
        finally:
            self._local.busy = False

    def task_event(self, task: Task, event: Any) -> None:
        """A task's event (None: it has ended), reported to whoever follows the task."""
        scope = _SCOPE.get()  # the call that started the task: the runner inherits its context
        if scope is not None:
            scope.follows.add(task.id)
            if scope.key is not None and task.id not in self._follows.get(scope.key, ()):
                self._follow(scope.key, task.id)
        if self._pump is None:
            return
        if isinstance(event, TextDelta):
            pending = self._texts.setdefault(task.id, [])
            pending.append(event.text)
            self._text_out(task, scope, final=False)
            return
        self._text_out(task, scope, final=True)
        said = self._describe(task, event)
        if said is not None:
            levelno, kind, message, extra = said
            data = {"message": self._redact(message), "task_id": task.id, "session_id": task.session.id, "event": kind}
            data.update({k: self._redact(v) if isinstance(v, str) else v for k, v in extra.items()})
            self._submit(_Item(levelno, TASK_LOGGER, data, scope, task.id))
        if event is None:
            self._texts.pop(task.id, None)

    def _text_out(self, task: Task, scope: _Scope | None, *, final: bool) -> None:
        """Send the reply text gathered so far: all of it when ``final``, else whole lines once there is enough."""
        pending = self._texts.get(task.id)
        if not pending:
            return
        text = "".join(pending)
        if not final:
            if len(text) < TEXT_CHUNK:
                return
            cut = text.rfind("\n") + 1
            if cut < TEXT_CHUNK // 2:
                if len(text) < 4 * TEXT_CHUNK:
                    return  # wait for a line's end
                cut = len(text)
            text, pending[:] = text[:cut], [text[cut:]] if text[cut:] else []
        else:
            pending.clear()
        if text.strip():
            data = {"message": self._redact(text), "task_id": task.id, "session_id": task.session.id, "event": "text"}
            self._submit(_Item(logging.DEBUG, TASK_LOGGER, data, scope, task.id))

    @staticmethod
    def _describe(task: Task, event: Any) -> tuple[int, str, str, dict[str, Any]] | None:
        if event is None:
            status = task.status
            levelno = {"failed": logging.ERROR, "cancelled": 25}.get(status, logging.INFO)
            message = f"Task {status}" + (f": {task.error}" if task.error else "")
            return levelno, "ended", message, {"status": status, "stop_reason": task.stop_reason}
        if isinstance(event, ToolStarted):
            return logging.INFO, "tool_started", event.title, {"tool": event.name, "call_id": event.call_id}
        if isinstance(event, ToolFinished):
            step = task.steps.get(event.call_id)
            title = step.title if step is not None else event.call_id
            levelno = logging.INFO if event.status == "completed" else logging.WARNING
            tool = step.tool if step is not None else None
            return levelno, "tool_finished", f"{title}: {event.status}", {"tool": tool, "call_id": event.call_id, "status": event.status}
        if isinstance(event, PermissionNeeded):
            request = event.request
            return 25, "approval_needed", f"Waiting for approval: {request.title}", {"approval_id": request.id}
        if isinstance(event, Notice):
            levelno = {"warning": logging.WARNING, "error": logging.ERROR}.get(event.level, logging.INFO)
            return levelno, "notice", event.text, {}
        return None

    def _submit(self, item: _Item) -> None:
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._offer(item)
            return
        try:
            loop.call_soon_threadsafe(self._offer, item)
        except RuntimeError:
            pass  # the loop has closed: the server is going away

    def _offer(self, item: _Item) -> None:
        queue = self._queue
        if queue is None:
            return
        if queue.full():
            self._dropped += 1
            return
        queue.put_nowait(item)
        if item.scope is not None:
            item.scope.queued += 1

    async def _flush(self) -> None:
        """Wait (briefly) until what was queued so far has been sent."""
        queue = self._queue
        if queue is None:
            return
        done = asyncio.Event()
        try:
            queue.put_nowait(done)  # may go one over the limit: a marker, not a message
        except asyncio.QueueFull:
            return
        try:
            await asyncio.wait_for(done.wait(), FLUSH_SECONDS)
        except TimeoutError:
            pass

    # --- out: one task sends ----------------------------------------------------------

    def _start(self) -> None:
        """Begin on the first client that asks: attach to the packages' loggers and start the sender."""
        if self._pump is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._queue = asyncio.Queue(QUEUE_LIMIT + 1)
        root = logging.getLogger()
        self._configured = root.getEffectiveLevel()
        for handler in root.handlers:
            # The log file and stderr keep the configured level when a client asks for a lower one.
            if handler.level == logging.NOTSET:
                handler.setLevel(self._configured)
        for name in PACKAGES:
            logging.getLogger(name).addHandler(self)
        self._pump = asyncio.create_task(self._send_all(), name="hermes-mcp-log-messages", context=contextvars.Context())

    def _apply_levels(self) -> None:
        """Let our loggers produce what the most talkative client asked for, if that is below the configured level."""
        wanted = min([*self._connection_levels, *self._scope_levels], default=None)
        level = wanted if wanted is not None and wanted < self._configured else logging.NOTSET
        if level != self._applied:
            self._applied = level
            for name in PACKAGES:
                logging.getLogger(name).setLevel(level)

    async def _send_all(self) -> None:
        _SENDING.set(True)
        queue = self._queue
        assert queue is not None
        while True:
            item = await queue.get()
            if isinstance(item, asyncio.Event):
                item.set()
                continue
            if self._dropped:
                dropped, self._dropped = self._dropped, 0
                note = _Item(
                    logging.WARNING, __name__, f"{dropped} log messages were dropped: they came faster than they could be sent", None
                )
                await self._deliver(note)
            await self._deliver(item)

    async def _deliver(self, item: _Item) -> None:
        from mcp_types import LoggingMessageNotification, LoggingMessageNotificationParams

        notification = LoggingMessageNotification(
            params=LoggingMessageNotificationParams(level=mcp_level(item.levelno), logger=item.logger, data=item.data)  # type: ignore[arg-type]
        )
        for connection, session, related in self._targets(item):
            try:
                await asyncio.wait_for(session.send_notification(notification, related_request_id=related), SEND_SECONDS)
            except Exception:
                # Logged, and not sent: whatever is logged while sending stays in the log file.
                log.debug("could not send a log message to %s", connection.key if connection else "a request", exc_info=True)
                if connection is not None and self._connections.get(connection.key) is connection:
                    # The connection is gone (or stuck): stop sending to it.
                    del self._connections[connection.key]
                    self._connection_levels = tuple(c.threshold for c in self._connections.values())
                    self._apply_levels()

    def _targets(self, item: _Item) -> list[tuple[_Connection | None, Any, Any]]:
        """(connection or None, session, related request id or None) for each destination of ``item``."""
        out: list[tuple[_Connection | None, Any, Any]] = []
        origin = item.scope
        task_id = item.task_id
        for scope in self._open:  # 2026 era: requests that opted in, for their own lines and followed tasks
            if scope.threshold is None or item.levelno < scope.threshold:
                continue
            if (scope is origin and task_id is None) or (task_id is not None and task_id in scope.follows):
                out.append((None, scope.session, scope.request_id))
        for connection in list(self._connections.values()):  # handshake era: connections at their level
            if item.levelno < connection.threshold:
                continue
            if task_id is not None and task_id not in self._follows.get(connection.key, ()):
                continue
            # On the stream of a request of this connection that is still open (HTTP clients read it
            # without a standalone stream); else on the connection's own channel.
            via = None
            if task_id is not None:
                via = next((s for s in self._open if s.key == connection.key and task_id in s.follows), None)
            if via is None and origin is not None and origin.open and origin.key == connection.key:
                via = origin
            if via is not None:
                out.append((None, via.session, via.request_id))
            else:
                out.append((connection, connection.session, None))
        return out


def install_logging(server: Any, runtime: Runtime) -> LogBridge:
    """The ``logging`` capability: ``logging/setLevel``, the per-request opt-in, and tasks' progress.

    ``server`` is ``hermes_mcp.app.HermesServer`` (which imports this module)."""
    from mcp_types import SetLevelRequestParams

    bridge = LogBridge(runtime)
    server.lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, bridge.set_level)
    server.lowlevel.middleware.append(bridge.middleware)
    runtime.tasks.watchers.append(bridge.task_event)
    return bridge
