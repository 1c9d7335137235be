"""Tasks: agent turns that run in this process while MCP calls come and go.

A task is one turn of a session (new, or continued from any surface: the store is shared).
It starts at once and runs in the background; its events are folded into a small state that
``task_status`` / ``task_wait`` / ``ask`` report. Every message is persisted by the core as
it completes, so the conversation outlives the task (and this process).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.events import (
    ApprovalRequest,
    DiffContent,
    Notice,
    PermissionNeeded,
    TextDelta,
    TitleChanged,
    ToolFinished,
    ToolStarted,
    ToolUpdated,
    TurnEnded,
)
from hermes_mcp.views import RESULT_BUDGET, ChangedFile, Step, TaskStatus, TaskView, clip, clip_tail, json_size, request_view, unified_diff

if TYPE_CHECKING:
    from collections.abc import Callable

    from core.agent.loop import Session
    from hermes_mcp.backend import Backend

__all__ = ["Task", "TaskError", "TaskManager"]

log = logging.getLogger(__name__)

MAX_TASKS_KEPT = 200
REPLY_CHARS = 16_000
STEPS_SHOWN = 40
DIFF_BUDGET = 28_000
DIFF_PER_FILE = 12_000


class TaskError(Exception):
    """A request about tasks that cannot be met; the message says why and what to do."""


@dataclass(eq=False)
class Task:
    """One running or finished turn, as the MCP tools see it."""

    id: str
    session: Session
    prompt: str
    mode: str
    started: float = field(default_factory=time.time)
    ended: float | None = None
    reply: list[str] = field(default_factory=list)
    steps: OrderedDict[str, Step] = field(default_factory=OrderedDict)
    # path -> [text before the task's first change, text after its last]
    changes: OrderedDict[str, list[str | None]] = field(default_factory=OrderedDict)
    approvals: list[ApprovalRequest] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    error: str | None = None
    version: int = 0
    # Whether this server lets the client answer approvals (--trust-client-approvals).
    client_answers: bool = False
    runner: asyncio.Task[None] | None = None
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def finished(self) -> bool:
        return self.ended is not None

    @property
    def status(self) -> TaskStatus:
        if self.finished:
            if self.error:
                return "failed"
            return "cancelled" if self.stop_reason == "cancelled" else "done"
        return "needs_approval" if self.open_approvals() else "running"

    def open_approvals(self) -> list[ApprovalRequest]:
        return [r for r in self.approvals if r.future is not None and not r.future.done()]

    def headline(self) -> str:
        """One line for a progress notice."""
        if self.finished:
            return f"Task {self.status}"
        waiting = self.open_approvals()
        if waiting:
            return f"Waiting for approval: {waiting[0].title}"
        running = [s for s in self.steps.values() if s.status == "running"]
        if running:
            return running[-1].title
        return "Writing the reply" if self.reply else "Thinking"

    async def wait_change(self, timeout: float) -> None:
        """Return when the task changes, or after ``timeout`` seconds."""
        event = self._changed
        try:
            await asyncio.wait_for(event.wait(), max(timeout, 0))
        except TimeoutError:
            pass

    def touch(self) -> None:
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    def observe(self, event: Any) -> None:
        """Fold one core event into the task's state."""
        if isinstance(event, TextDelta):
            self.reply.append(event.text)
        elif isinstance(event, ToolStarted):
            self.steps[event.call_id] = Step(id=event.call_id, tool=event.name, title=event.title[:200], status="running")
        elif isinstance(event, ToolUpdated):
            step = self.steps.get(event.call_id)
            if step is not None and event.title:
                step.title = event.title[:200]
        elif isinstance(event, ToolFinished):
            step = self.steps.get(event.call_id)
            if step is not None:
                step.status = event.status
            if event.status == "completed":
                for item in event.content:
                    if isinstance(item, DiffContent):
                        self._record_change(item)
        elif isinstance(event, PermissionNeeded):
            request = event.request
            self.approvals.append(request)
            future = getattr(request, "future", None)
            if future is not None:
                future.add_done_callback(lambda _f: self.touch())
        elif isinstance(event, TitleChanged):
            self.session.title = event.title
        elif isinstance(event, Notice):
            self.notices = (self.notices + [event.text[:500]])[-10:]
        elif isinstance(event, TurnEnded):
            self.stop_reason = event.stop_reason
            self.error = event.error
            self.ended = time.time()
        else:
            return  # thoughts, usage, plans: not part of what a client reads
        self.touch()

    def _record_change(self, diff: DiffContent) -> None:
        entry = self.changes.get(diff.path)
        if entry is None:
            self.changes[diff.path] = [diff.old_text, diff.new_text]
        else:
            entry[1] = diff.new_text

    def view(self, *, next_hint: str = "") -> TaskView:
        """The task as a result, within the result budget."""
        cwd = self.session.cwd
        reply, cut = clip_tail("".join(self.reply), REPLY_CHARS, f"read the whole reply with session_read(session_id='{self.session.id}')")
        steps = list(self.steps.values())[-STEPS_SHOWN:]
        view = TaskView(
            task_id=self.id,
            session_id=self.session.id,
            status=self.status,
            cwd=str(cwd),
            mode=self.mode,
            title=self.session.title,
            reply=reply,
            reply_truncated=cut,
            steps=steps,
            approvals=[request_view(r, self.session, task_id=self.id) for r in self.open_approvals()],
            changed_files=self._changed_files(DIFF_BUDGET, cwd),
            notices=list(self.notices),
            stop_reason=self.stop_reason,
            error=self.error,
            elapsed_seconds=round((self.ended or time.time()) - self.started, 1),
            next=next_hint or self.next_hint(),
        )
        # Diffs are the part that can still be large: halve their budget until the result fits.
        budget = DIFF_BUDGET
        while json_size(view) > RESULT_BUDGET and budget > 500:
            budget //= 2
            view.changed_files = self._changed_files(budget, cwd)
        return view

    def _changed_files(self, budget: int, cwd: Path) -> list[ChangedFile]:
        out = []
        left = budget
        for path, (old, new) in self.changes.items():
            diff = unified_diff(path, old, new, cwd)
            limit = max(min(DIFF_PER_FILE, left), 200)
            shown, cut = clip(diff, limit, "read the file for the rest")
            out.append(ChangedFile(path=path, diff=shown, truncated=cut))
            left -= len(shown)
        return out

    def next_hint(self) -> str:
        status = self.status
        if status == "needs_approval":
            first = self.open_approvals()[0]
            elsewhere = (
                f"in a terminal with `hermes-editor approvals allow {first.id}` (or `deny {first.id}`), "
                "in their editor, on their phone, or in this client's approval form if it shows one"
            )
            if self.client_answers:
                how = (
                    "show them what it does (see approvals), ask, and pass on their answer with "
                    f"approval_respond(approval_id='{first.id}', decision='allow' or 'deny'). They can also answer {elsewhere}"
                )
            else:
                how = f"show them what it does (see approvals) and ask them to answer {elsewhere}"
            return (
                f"Waiting for the user's approval of: {first.title}. Only the user decides, never you: {how}. "
                f"Then call task_wait(task_id='{self.id}')."
            )
        if status == "running":
            return f"Still running: call task_wait(task_id='{self.id}') to follow it."
        if status == "failed":
            return "The task failed; the error says why. The conversation is saved: continue it with task_start(session_id=...)."
        if status == "cancelled":
            return "Cancelled. What was done so far is kept; continue with task_start(session_id=...)."
        return f"Done. Continue the conversation with task_start(session_id='{self.session.id}', prompt=...)."


class TaskManager:
    """Starts, tracks and cancels this process's tasks."""

    def __init__(self, backend: Backend, *, allow_auto: bool, trust_client_approvals: bool, on_project: Callable[[Path], None]) -> None:
        self._backend = backend
        self._allow_auto = allow_auto
        self._trust_client_approvals = trust_client_approvals
        self._on_project = on_project
        self._tasks: OrderedDict[str, Task] = OrderedDict()
        self._sessions: dict[str, Session] = {}
        self._retiring: set[asyncio.Task[None]] = set()
        # Called with (task, event) for each core event a task folds in, and (task, None) once it has
        # ended, inside the task's runner (hermes_mcp.logs sends tasks' progress to clients that asked).
        self.watchers: list[Callable[[Task, Any], None]] = []

    def get(self, task_id: str) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskError(
                f"No task {task_id!r} in this server. Tasks live as long as the hermes-mcp process; "
                "their conversations are saved: find them with sessions_list or sessions_search."
            )
        return task

    def for_request(self, approval_id: str) -> Task | None:
        """The task that waits on this approval, if it is one of ours."""
        for task in self._tasks.values():
            if any(r.id == approval_id for r in task.approvals):
                return task
        return None

    def running(self) -> list[Task]:
        return [t for t in self._tasks.values() if not t.finished]

    async def start(self, prompt: str, *, cwd: str | None, session_id: str | None, mode: str, allowed: list[Path]) -> Task:
        """Start a turn now and return at once in a folder within ``allowed`` (see hermes_mcp.projects).

        Raises TaskError, ProjectRefused or backend.NotReady."""
        from core.config import ConfigError
        from core.host.select import host_for
        from core.messages import UserMessage
        from core.policy.approvals import MODES, as_mode
        from hermes_mcp.projects import confine

        try:
            chosen = as_mode(mode)
        except ValueError as exc:
            raise TaskError(f"mode must be one of {', '.join(MODES)}") from exc
        if mode == "auto" and not self._allow_auto:
            raise TaskError(
                "mode 'auto' (no approvals) is off for MCP clients; use 'accept-edits' or 'ask', or start hermes-mcp with --allow-auto."
            )
        if not prompt.strip():
            raise TaskError("prompt is empty")
        path = confine(cwd, allowed) if cwd else None
        agent = await self._backend.agent()
        store = await self._backend.store()

        def host(folder: Path):
            try:
                return host_for(self._backend.config, folder, secrets=self._backend.secrets)
            except ConfigError as exc:
                raise TaskError(str(exc)) from None

        if session_id:
            record = await store.get_session(session_id)
            if record is None:
                raise TaskError(f"No session {session_id!r}. Find sessions with sessions_list or sessions_search.")
            # A stored session (from any surface) is continued only inside a folder this client may use.
            path = path or confine(record.cwd, allowed)
            session = self._sessions.get(session_id)
            if session is None or session.cwd != path:
                replaced = session
                session = await agent.open_session(session_id, host(path), cwd=path, mode=chosen)
                if session is None:
                    raise TaskError(f"No session {session_id!r}.")
                self._sessions[session_id] = session
                if replaced is not None:
                    self._retire(replaced)
        else:
            if path is None:
                raise TaskError("cwd is required for a new task: the absolute path of the project directory.")
            session = await agent.new_session(path, host(path), mode=chosen)
            self._sessions[session.id] = session
        session.policy.mode = chosen
        self._on_project(session.cwd)
        task = Task(id=uuid.uuid4().hex[:12], session=session, prompt=prompt, mode=mode, client_answers=self._trust_client_approvals)
        self._tasks[task.id] = task
        self._forget_old()
        task.runner = asyncio.create_task(self._run(task, UserMessage.of(prompt)), name=f"task-{task.id}")
        log.info("task %s started in session %s (%s, mode %s)", task.id, session.id, session.cwd, mode)
        return task

    async def _run(self, task: Task, message: Any) -> None:
        agent = self._backend.agent_if_built
        assert agent is not None
        try:
            async for event in agent.run_turn(task.session, message):
                task.observe(event)
                self._tell(task, event)
        except Exception as exc:  # the core ends turns itself; this is a last resort
            log.exception("task %s failed", task.id)
            task.error = self._backend.redact(f"{type(exc).__name__}: {exc}")
        finally:
            if not task.finished:
                task.ended = time.time()
                task.stop_reason = task.stop_reason or "cancelled"
            if task.error:
                task.error = self._backend.redact(task.error)
            task.touch()
            log.info("task %s ended: %s", task.id, task.status)
            self._tell(task, None)

    def _tell(self, task: Task, event: Any) -> None:
        for watch in list(self.watchers):
            try:
                watch(task, event)
            except Exception:  # a watcher only reports; the task goes on
                log.debug("a task watcher failed", exc_info=True)

    async def cancel(self, task_id: str) -> Task:
        """Stop the task's turn (model stream, tools, its questions) and wait briefly for it to end."""
        task = self.get(task_id)
        agent = self._backend.agent_if_built
        if not task.finished and agent is not None:
            agent.cancel(task.session)
            if task.runner is not None:
                await asyncio.wait([task.runner], timeout=10)
        return task

    def _forget_old(self) -> None:
        while len(self._tasks) > MAX_TASKS_KEPT:
            oldest = next((tid for tid, t in self._tasks.items() if t.finished), None)
            if oldest is None:
                return
            del self._tasks[oldest]

    def _retire(self, session: Session) -> None:
        """Stop the background commands of a session object no longer used (reopened elsewhere),
        once its running tasks end."""
        runners = [t.runner for t in self.running() if t.session is session and t.runner is not None]

        async def close() -> None:
            if runners:
                await asyncio.wait(runners)
            await _close_hosts([session])

        closing = asyncio.create_task(close(), name=f"retire-{session.id}")
        self._retiring.add(closing)
        closing.add_done_callback(self._retiring.discard)

    async def aclose(self) -> None:
        """Cancel running tasks, then stop every background command the sessions started."""
        agent = self._backend.agent_if_built
        runners = [t.runner for t in self.running() if t.runner is not None]
        if agent is not None:
            for task in self.running():
                agent.cancel(task.session)
        if runners:
            await asyncio.wait(runners, timeout=10)
        if self._retiring:
            await asyncio.wait(self._retiring, timeout=10)
        stopped = await _close_hosts(list(self._sessions.values()))
        if stopped:
            log.info("stopped %d background command%s", stopped, "" if stopped == 1 else "s")


async def _close_hosts(sessions: list[Session]) -> int:
    """Close the sessions' hosts (their background commands end); how many commands were running."""
    running = sum(len(getattr(s.host, "jobs", {})) for s in sessions)

    async def close(session: Session) -> None:
        try:
            await session.host.aclose()
        except Exception:
            log.debug("host close failed", exc_info=True)

    await asyncio.gather(*(close(s) for s in sessions))
    return running
