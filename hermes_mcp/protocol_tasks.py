"""The protocol's own tasks (MCP 2025-11-25): a long ``ask`` as a task the client follows itself.

A client of the handshake era that sees ``tasks.requests.tools.call`` in our capabilities, and
``execution.taskSupport: "optional"`` on the ``ask`` tool, may send ``tools/call`` for ``ask``
with a ``task`` field. The agent task then starts as ``ask`` starts it (same arguments, same
roots and project checks), and the call answers at once with a ``CreateTaskResult``. From there
the client follows it with:

- ``tasks/get``: status (``working``, ``input_required`` while an approval waits for the user,
  ``completed``, ``failed``, ``cancelled``) and a status message (what the agent is doing);
- ``tasks/result``: waits for the end and returns exactly what ``ask`` would have returned. While
  it waits, approvals are asked in the client's form where the client declared elicitation (as
  ``ask`` does); otherwise the user answers elsewhere (``hermes-editor approvals``, an editor,
  the phone);
- ``tasks/cancel``: stops the agent's turn (work done so far is kept);
- ``tasks/list``: the tasks started this way, oldest first, a page at a time;
- ``notifications/tasks/status`` on each change of status, on the connection that started it.

One task, two views: the protocol task's id is the agent task's id (``hermes_mcp.tasks``), so
``task_status``, ``task_wait`` and ``task_cancel`` see and steer the same task, and a cancel
from either side shows in both. Tasks live as long as this process; a finished one is
forgotten once its ``ttl`` has passed (the client's, within a minute and a day; an hour by
default) or when 200 newer ones have finished (its conversation stays in the store). Questions
asked while ``tasks/result`` waits carry the task in ``_meta`` (related-task). In the
2026-07-28 era tasks are an extension we do not offer: ``task`` is ignored there and the
``tasks/*`` methods are unknown.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import MCPServer

    from hermes_mcp.runtime import Runtime
    from hermes_mcp.tasks import Task

__all__ = [
    "TASK_TOOLS",
    "ProtocolTasks",
    "capability",
    "install_protocol_tasks",
    "runs_as_protocol_task",
    "with_task_support",
]

log = logging.getLogger(__name__)

# Tools that may run as a protocol task, and how (the tool's execution.taskSupport).
TASK_TOOLS: dict[str, Literal["optional", "required"]] = {"ask": "optional"}
RELATED_TASK = "io.modelcontextprotocol/related-task"
IMMEDIATE_RESPONSE = "io.modelcontextprotocol/model-immediate-response"
DEFAULT_TTL_MS = 3_600_000
MIN_TTL_MS = 60_000
MAX_TTL_MS = 86_400_000
POLL_INTERVAL_MS = 1_000
MAX_KEPT = 200
PAGE = 50

_STATUS = {"running": "working", "needs_approval": "input_required", "done": "completed", "failed": "failed", "cancelled": "cancelled"}
TERMINAL = frozenset({"completed", "failed", "cancelled"})

# Set while ``ask`` runs for a task-augmented call: it returns as soon as its task has started.
_as_protocol_task: contextvars.ContextVar[bool] = contextvars.ContextVar("hermes_mcp_protocol_task", default=False)


def runs_as_protocol_task() -> bool:
    """Whether the tool call being served is task-augmented (the client follows the task itself)."""
    return _as_protocol_task.get()


def capability() -> dict[str, Any]:
    """The ``tasks`` server capability as it goes on the wire (handshake era; the early answer's)."""
    from hermes_mcp.handshake import capabilities

    tasks: dict[str, Any] = capabilities()["tasks"]
    return tasks


def with_task_support(tools: list[Any]) -> list[Any]:
    """The listed tools, those that may run as a protocol task marked so (``execution.taskSupport``)."""
    from mcp_types import ToolExecution

    return [
        tool.model_copy(update={"execution": ToolExecution(task_support=TASK_TOOLS[tool.name])}) if tool.name in TASK_TOOLS else tool
        for tool in tools
    ]


def _iso(timestamp: float) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _error(code: int, message: str) -> Exception:
    from mcp.shared.exceptions import MCPError

    return MCPError(code=code, message=message)


@dataclass(eq=False)
class Record:
    """One protocol task: the agent task it follows, or the error result of a call that never started one."""

    id: str
    created: float
    ttl_ms: int
    task: Task | None = None
    # The tools/call result when the call failed before a task existed (wire form).
    early_result: dict[str, Any] | None = None
    cancelled: bool = False
    updated: float = field(default_factory=time.time)
    seen_version: int = -1
    session: Any = None  # the connection that started it, for status notices
    watcher: asyncio.Task[None] | None = None

    @property
    def status(self) -> str:
        if self.cancelled:
            return "cancelled"
        if self.task is None:
            return "failed"
        return _STATUS[self.task.status]

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def touched(self) -> None:
        """Note the agent task's latest change (for ``lastUpdatedAt``)."""
        if self.task is not None and self.task.version != self.seen_version:
            self.seen_version = self.task.version
            self.updated = time.time()

    def message(self) -> str:
        status = self.status
        if self.task is None:
            return "The call failed before the task started; tasks/result has the error."
        if status == "cancelled":
            return "Cancelled. What was done so far is kept."
        if status == "input_required":
            request = self.task.open_approvals()[0]
            return (
                f"Waiting for the user's approval of: {request.title}. Only the user answers: in this client's form "
                f"while tasks/result waits (where the client shows forms), in a terminal with `hermes-editor approvals "
                f"allow {request.id}` (or `deny {request.id}`), in their editor, or on their phone."
            )
        if status == "failed" and self.task.error:
            return f"Failed: {self.task.error[:500]}"
        return self.task.headline()

    def wire(self) -> dict[str, Any]:
        """The protocol's ``Task`` object."""
        self.touched()
        return {
            "taskId": self.id,
            "status": self.status,
            "statusMessage": self.message(),
            "createdAt": _iso(self.created),
            "lastUpdatedAt": _iso(max(self.updated, self.created)),
            "ttl": self.ttl_ms,
            "pollInterval": POLL_INTERVAL_MS,
        }

    def expired(self, now: float) -> bool:
        return self.terminal and now > self.created + self.ttl_ms / 1000


class ProtocolTasks:
    """This server's protocol tasks, and the handlers that serve them."""

    def __init__(self, server: MCPServer, runtime: Runtime) -> None:
        self._server = server
        self._runtime = runtime
        self._records: OrderedDict[str, Record] = OrderedDict()

    # --- tools/call with a task ---------------------------------------------------------

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        """Server middleware: a task-augmented ``tools/call`` becomes a protocol task."""
        params = ctx.params
        if ctx.method != "tools/call" or not isinstance(params, dict) or params.get("task") is None or _modern(ctx):
            return await call_next(ctx)
        from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND, TaskMetadata
        from pydantic import ValidationError

        try:
            metadata = TaskMetadata.model_validate(params["task"] or {}, by_name=False)
        except ValidationError:
            raise _error(INVALID_PARAMS, "task must be an object, with ttl in milliseconds if given") from None
        name = params.get("name")
        plain = {key: value for key, value in params.items() if key != "task"}
        if name not in TASK_TOOLS:
            if name not in {tool.name for tool in await self._server.list_tools()}:
                return await call_next(replace(ctx, params=plain))  # the SDK's answer to an unknown tool
            shown = ", ".join(TASK_TOOLS)
            raise _error(METHOD_NOT_FOUND, f"Tool {name!r} does not run as a task (execution.taskSupport); only {shown} does.")
        token = _as_protocol_task.set(True)
        try:
            answer = await call_next(replace(ctx, params=plain))
        finally:
            _as_protocol_task.reset(token)
        record = self._open(answer, metadata.ttl, ctx)
        log.info("task %s started as a protocol task (%s)", record.id, record.status)
        meta = {IMMEDIATE_RESPONSE: self._started_note(record)}
        return {"task": record.wire(), "_meta": meta}

    def _open(self, answer: Any, ttl: int | None, ctx: ServerRequestContext[Any, Any]) -> Record:
        ttl_ms = DEFAULT_TTL_MS if ttl is None else min(max(int(ttl), MIN_TTL_MS), MAX_TTL_MS)
        structured = answer.get("structuredContent") if isinstance(answer, dict) else None
        task_id = structured.get("task_id") if isinstance(structured, dict) and not answer.get("isError") else None
        task = None
        if isinstance(task_id, str):
            try:
                task = self._runtime.tasks.get(task_id)
            except Exception:
                task = None
        if task is None:
            record = Record(id=uuid.uuid4().hex[:12], created=time.time(), ttl_ms=ttl_ms, early_result=dict(answer or {}))
        else:
            record = Record(id=task.id, created=task.started, ttl_ms=ttl_ms, task=task, session=ctx.session)
            record.touched()
            record.watcher = asyncio.create_task(self._watch(record), name=f"protocol-task-{record.id}")
        self._records[record.id] = record
        self._forget_old()
        return record

    @staticmethod
    def _started_note(record: Record) -> str:
        if record.task is None:
            return "The task could not start; tasks/result has the error."
        return (
            f"Started the agent on task {record.id}; the client follows it (tasks/get, tasks/result). "
            f"The same task is also task_status(task_id='{record.id}')."
        )

    async def _watch(self, record: Record) -> None:
        """Tell the client of each change of status until the task ends."""
        assert record.task is not None
        last = record.status
        while last not in TERMINAL:
            await record.task.wait_change(30)
            record.touched()
            if record.status != last:
                last = record.status
                await self._notify(record)

    async def _notify(self, record: Record) -> None:
        if record.session is None:
            return
        from mcp_types import TaskStatusNotification, TaskStatusNotificationParams

        notice = TaskStatusNotification(params=TaskStatusNotificationParams.model_validate(record.wire(), by_name=False))
        try:
            await record.session.send_notification(notice)
        except Exception:  # advisory: a closed connection still has tasks/get
            log.debug("could not send a task status notice", exc_info=True)

    # --- tasks/* -----------------------------------------------------------------------

    def _record(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> Record:
        from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND

        if _modern(ctx):
            raise _error(METHOD_NOT_FOUND, "Method not found")
        self._expire()
        record = self._records.get(task_id)
        if record is None:
            raise _error(
                INVALID_PARAMS,
                f"No task {task_id!r} in this server: tasks live as long as the hermes-mcp process (finished ones for "
                "their ttl). Their conversations are saved: find them with sessions_list or sessions_search.",
            )
        return record

    async def get(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        return self._record(ctx, params.task_id).wire()

    async def result(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        record = self._record(ctx, params.task_id)
        if record.task is not None and not record.terminal:
            await self._follow(ctx, record)
        return self._payload(ctx, record)

    async def _follow(self, ctx: ServerRequestContext[Any, Any], record: Record) -> None:
        """Wait for the end; ask the task's approvals in the client's form where it has one, and carry
        the steps of the client's model when it answers for the task (sampling)."""
        from hermes_mcp.follow import MAX_WAIT, can_elicit, follow

        task = record.task
        assert task is not None
        context = _task_context(ctx, self._server, record.id)
        elicit = can_elicit(context)
        asked: set[str] = set()
        sampling = getattr(self._runtime, "sampling", None)
        while not record.terminal:
            fresh = [r.id for r in task.open_approvals() if r.id not in asked]
            # A step of the client's own model (no model configured) is carried by this call too.
            if (fresh and elicit) or (sampling is not None and sampling.waiting(task)):
                await follow(context, self._runtime, task, MAX_WAIT)
                asked.update(fresh)
                asked.update(r.id for r in task.open_approvals())  # dismissed: not asked again here
            else:
                await task.wait_change(30)

    def _payload(self, ctx: ServerRequestContext[Any, Any], record: Record) -> dict[str, Any]:
        """What the ``tools/call`` would have returned, tied to its task."""
        from mcp_types import CallToolResult, TextContent
        from mcp_types.methods import serialize_server_result

        from hermes_mcp.views import dumps

        if record.task is None:
            body = dict(record.early_result or {})
        else:
            view = record.task.view()
            body = CallToolResult(
                content=[TextContent(type="text", text=dumps(view))], structured_content=view.model_dump(mode="json")
            ).model_dump(by_alias=True, mode="json", exclude_none=True)
        body["_meta"] = {**(body.get("_meta") or {}), RELATED_TASK: {"taskId": record.id}}
        return serialize_server_result("tools/call", ctx.protocol_version, body)

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        from mcp_types import INVALID_PARAMS

        record = self._record(ctx, params.task_id)
        if record.terminal:
            raise _error(INVALID_PARAMS, f"Cannot cancel task {record.id}: it is already {record.status}.")
        record.cancelled = True
        record.updated = time.time()
        if record.task is not None:
            await self._runtime.tasks.cancel(record.task.id)
        log.info("protocol task %s cancelled by the client", record.id)
        return record.wire()

    async def list_tasks(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND

        if _modern(ctx):
            raise _error(METHOD_NOT_FOUND, "Method not found")
        self._expire()
        ids = list(self._records)
        start = 0
        cursor = getattr(params, "cursor", None)
        if cursor:
            if cursor not in self._records:
                raise _error(INVALID_PARAMS, "cursor is not valid (the task it pointed to is gone); list again without a cursor.")
            start = ids.index(cursor)
        page = ids[start : start + PAGE]
        out: dict[str, Any] = {"tasks": [self._records[i].wire() for i in page]}
        if start + PAGE < len(ids):
            out["nextCursor"] = ids[start + PAGE]
        return out

    # --- housekeeping ------------------------------------------------------------------

    def _expire(self) -> None:
        now = time.time()
        for task_id in [i for i, r in self._records.items() if r.expired(now)]:
            del self._records[task_id]

    def _forget_old(self) -> None:
        while len(self._records) > MAX_KEPT:
            oldest = next((i for i, r in self._records.items() if r.terminal), None)
            if oldest is None:
                return
            del self._records[oldest]


def _task_context(ctx: ServerRequestContext[Any, Any], server: MCPServer, task_id: str) -> Any:
    """The tool context for following a task from ``tasks/result``: its questions to the user
    carry the task they are for (``_meta`` related-task), as the protocol asks."""
    from mcp.server.elicitation import AcceptedElicitation, CancelledElicitation, DeclinedElicitation, render_elicitation_schema
    from mcp.server.mcpserver import Context
    from mcp.shared.message import ServerMessageMetadata
    from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult
    from pydantic import ValidationError

    class TaskContext(Context):
        async def elicit(self, message: str, schema: Any) -> Any:
            params = ElicitRequestFormParams.model_validate(
                {"message": message, "requestedSchema": render_elicitation_schema(schema), "_meta": {RELATED_TASK: {"taskId": task_id}}},
                by_name=False,
            )
            answer = await self.request_context.session.send_request(
                ElicitRequest(params=params), ElicitResult, metadata=ServerMessageMetadata(related_request_id=self.request_id)
            )
            if answer.action == "accept":
                try:
                    return AcceptedElicitation(data=schema.model_validate(answer.content or {}))
                except ValidationError as exc:
                    raise ValueError("the answer does not fit the question") from exc
            return DeclinedElicitation() if answer.action == "decline" else CancelledElicitation()

    return TaskContext(request_context=ctx, mcp_server=server)  # type: ignore[call-arg]


def install_protocol_tasks(server: MCPServer, runtime: Runtime) -> ProtocolTasks:
    """Serve protocol tasks on ``server``: the middleware, ``tasks/*`` and the capability."""
    from mcp_types import (
        CancelTaskRequestParams,
        GetTaskPayloadRequestParams,
        GetTaskRequestParams,
        PaginatedRequestParams,
        ServerTasksCapability,
    )

    tasks = ProtocolTasks(server, runtime)
    server.middleware.append(tasks.middleware)
    lowlevel: Any = server._lowlevel_server  # the SDK's registry of request handlers
    lowlevel.add_request_handler("tasks/get", GetTaskRequestParams, tasks.get)
    lowlevel.add_request_handler("tasks/result", GetTaskPayloadRequestParams, tasks.result)
    lowlevel.add_request_handler("tasks/cancel", CancelTaskRequestParams, tasks.cancel)
    lowlevel.add_request_handler("tasks/list", PaginatedRequestParams, tasks.list_tasks)
    # The handshake's capabilities are not derived from handlers for tasks (the SDK has none):
    # they are added to what every transport asks the low-level server for.
    options_of = lowlevel.create_initialization_options
    offered = ServerTasksCapability.model_validate(capability(), by_name=False)

    def initialization_options(*args: Any, **kwargs: Any) -> Any:
        options = options_of(*args, **kwargs)
        options.capabilities = options.capabilities.model_copy(update={"tasks": offered})
        return options

    lowlevel.create_initialization_options = initialization_options
    return tasks
