"""Subagents: the delegate tool's tasks, each run as one turn of a session of its own.

A subagent starts fresh: the parent's system prompt with a note on its role, then one user
message holding its goal and the context it was given; nothing of the parent's conversation.
It has its own step budget and a restricted toolset, and the parent's host (the editor's
files and terminals, the sandbox), approval policy and broker: its questions reach the user as
the parent's do, titled with the subagent's name. Its session is stored, linked to the parent
(``parent_id``) and to the delegate call that ran it (``parent_call_id``), so it can be searched
and replayed.

The parent's surface sees, as events of the parent's turn: each subagent as a tool call of kind
"think" (id ``<call>/<n>``) whose content lists the subagent's tool calls as they start and end,
then its final report; and the subagent's calls that change something or ask a question as tool
calls of their own (``<call>/<n>/<its id>``), with their diffs, terminals and approvals. The
parent's model gets each final report, bounded, never the transcript.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

from core.agent.loop import Agent, Delegated, Emit, Session
from core.agent.session import title_from
from core.config import DelegateConfig
from core.events import (
    ApprovalRequest,
    Decision,
    Event,
    Notice,
    PermissionNeeded,
    TextContent,
    ToolFinished,
    ToolStarted,
    ToolUpdated,
    TurnEnded,
)
from core.messages import AssistantMessage, UserMessage
from core.policy.approvals import ApprovalBroker
from core.store import ApprovalStatus
from core.tools.delegation import Delegate, SubagentOutcome, SubagentTask, SubagentToolset
from core.tools.errors import ToolError
from core.tools.registry import Tool

__all__ = ["SUBAGENT_NOTE", "Subagents", "bounded_report", "subagent_tools"]

log = logging.getLogger(__name__)

SUBAGENT_NOTE = """# You are a subagent
Another agent gave you one task. Only your final message goes back to it; the user sees your tool \
calls, not your text. Work alone: nobody answers questions. End with a short report: what you \
found or changed (paths, names, facts) and what is left undone."""

# Tools a subagent never gets: undo would take back the parent's turn.
_NEVER = frozenset({"undo"})
_MARKS = {"running": "…", "completed": "✓", "failed": "✗"}


def subagent_tools(tools: dict[str, Tool], toolset: SubagentToolset, *, nested: bool) -> dict[str, Tool]:
    """A subagent's tools out of its parent's: without undo, without delegate unless ``nested``,
    and only the reading ones for "read-only"."""
    return {
        name: t
        for name, t in tools.items()
        if name not in _NEVER and (nested or name != "delegate") and (toolset == "editor" or t.read_only)
    }


def bounded_report(text: str, limit: int, session_id: str | None) -> str:
    """``text`` cut to ``limit`` characters, with a marker saying how much was left out and where it is kept."""
    if len(text) <= limit:
        return text
    where = f"; the subagent's whole conversation is kept in session {session_id}" if session_id else ""
    return f"{text[:limit].rstrip()}\n[report cut: {len(text) - limit:,} more characters{where}]"


class Subagents:
    """Runs the delegate tool's subagents for one agent's sessions."""

    def __init__(self, agent: Agent, settings: DelegateConfig) -> None:
        self.agent = agent
        self.settings = settings
        agent.delegator = self.bind

    def bind(self, session: Session, turn_id: str | None, emit: Emit) -> Delegate | None:
        """The delegate callable for a tool call of ``session``'s turn; None past the nesting depth."""
        depth = session.delegated.depth if session.delegated is not None else 0
        if depth >= self.settings.max_depth:
            return None
        return partial(self.run, session, turn_id, emit)

    async def run(
        self, parent: Session, turn_id: str | None, emit: Emit, tasks: Sequence[SubagentTask], call_id: str
    ) -> list[SubagentOutcome]:
        """Run ``tasks`` (at most ``max_parallel`` at once) for the parent's tool call ``call_id``;
        one outcome per task, in order. Cancelling this cancels every subagent and waits for them."""
        if not tasks:
            raise ToolError("delegate needs at least one task.")
        if len(tasks) > self.settings.max_tasks:
            raise ToolError(
                f"delegate got {len(tasks)} tasks; it takes at most {self.settings.max_tasks} ([delegate] max_tasks). "
                "Give fewer, larger tasks, or call it again for the rest."
            )
        above = parent.delegated.label if parent.delegated is not None else ""
        runs = [_Run(f"{above}.{n}" if above else f"Subagent {n}", n, task, f"{call_id}/{n}", emit) for n, task in enumerate(tasks, 1)]
        for one in runs:  # every subagent is shown at once; those waiting for a slot stay pending
            await emit(ToolStarted(one.call_id, "delegate", one.label_title, "think", raw_input={"goal": one.task.goal}))
        gate = asyncio.Semaphore(self.settings.max_parallel)
        jobs = [asyncio.create_task(self._one(parent, turn_id, call_id, one, gate)) for one in runs]
        try:
            await asyncio.wait(jobs)
        except asyncio.CancelledError:
            for job in jobs:
                job.cancel()
            # Each subagent closes its tool calls before its job ends; a second cancel does not cut that short.
            while not all(job.done() for job in jobs):
                try:
                    await asyncio.wait(jobs)
                except asyncio.CancelledError:
                    continue
            raise
        return [job.result() for job in jobs]

    async def _one(self, parent: Session, turn_id: str | None, call_id: str, one: _Run, gate: asyncio.Semaphore) -> SubagentOutcome:
        """One subagent, start to end; every failure becomes its outcome (cancellation re-raises once it is shown)."""
        child: Session | None = None
        try:
            async with gate:
                await one.emit(ToolUpdated(one.call_id))  # in progress
                child = await self._start(parent, turn_id, call_id, one)
                outcome = await self._drive(child, one)
        except asyncio.CancelledError:
            await one.finish(SubagentOutcome(one.task, "cancelled", "Cancelled before it finished.", one.session_id))
            raise
        except Exception as exc:  # one subagent's failure is its own outcome, not the parent's turn's
            log.exception("subagent %s failed", one.call_id)
            outcome = SubagentOutcome(one.task, "failed", f"The subagent could not run: {type(exc).__name__}: {exc}", one.session_id)
        finally:
            if child is not None:  # what it used is billed with the parent's turn
                parent.subagents_usage.add(child.billed())
        await one.finish(outcome)
        return dataclasses.replace(outcome, report=bounded_report(outcome.report, self.settings.report_chars, one.session_id))

    async def _start(self, parent: Session, turn_id: str | None, call_id: str, one: _Run) -> Session:
        """The subagent's session: stored, linked to the parent's call, with its tools and budget."""
        agent, up = self.agent, parent.delegated
        depth = (up.depth if up is not None else 0) + 1
        tools = subagent_tools(
            agent.tools_for(parent) if up is not None else agent.tools, one.task.toolset, nested=depth < self.settings.max_depth
        )
        one.tools = tools
        model = parent.model or agent.model
        record = await agent.store.create_session(
            cwd=str(parent.cwd),
            surface=agent.surface,
            model=model.name,
            title=f"Subagent: {title_from(one.task.goal) or 'task'}",
            parent_id=parent.id,
            parent_call_id=call_id,
            meta={"subagent": {"number": one.number, "toolset": one.task.toolset}},
        )
        one.session_id = record.id
        return Session(
            record.id,
            parent.cwd,
            list(parent.roots),
            parent.host,
            parent.policy,  # the parent's mode and remembered rules, live
            parent.system if up is not None else f"{parent.system}\n\n{SUBAGENT_NOTE}",
            title=record.title,
            model=parent.model,
            reasoning_effort=parent.reasoning_effort,
            context_window=parent.context_window,
            delegated=Delegated(
                parent_id=up.parent_id if up is not None else parent.id,
                turn_id=up.turn_id if up is not None else turn_id,
                tools=tools,
                max_steps=self.settings.max_steps,
                depth=depth,
                broker=_SubagentBroker.nested(up.broker if up is not None else None, agent.broker, one.label, f"{one.call_id}/"),
                label=one.label,
            ),
        )

    async def _drive(self, child: Session, one: _Run) -> SubagentOutcome:
        """Run the subagent's turn, forwarding its events; on cancel, stop it and wait until it has closed its calls."""
        prompt = one.task.goal if not one.task.context else f"{one.task.goal}\n\n# Context\n{one.task.context}"
        pump = asyncio.create_task(self._pump(child, UserMessage.of(prompt), one))
        try:
            await asyncio.shield(pump)
        except asyncio.CancelledError:
            if child.turn is None:
                pump.cancel()  # the turn never started
            self.agent.cancel(child)
            while not pump.done():
                try:
                    await asyncio.shield(pump)
                except asyncio.CancelledError:
                    continue
                except Exception:
                    break
            raise
        ended = pump.result()
        report = _last_text(child)
        steps = child.delegated.max_steps if child.delegated is not None else 0
        if ended.stop_reason == "cancelled":
            return SubagentOutcome(one.task, "cancelled", report or "Cancelled before it finished.", child.id)
        if ended.error:
            return SubagentOutcome(one.task, "failed", f"{ended.error}\n{report}".strip(), child.id)
        if ended.stop_reason == "max_turn_requests":
            note = f"[Stopped after {steps} model requests ([delegate] max_steps) before it finished.]"
            return SubagentOutcome(one.task, "incomplete", f"{report}\n{note}".strip(), child.id)
        if ended.stop_reason != "end_turn":
            return SubagentOutcome(
                one.task, "incomplete", f"{report}\n[Its last reply ended early: {ended.stop_reason}.]".strip(), child.id
            )
        return SubagentOutcome(one.task, "completed", report or "(The subagent ended without a report.)", child.id)

    async def _pump(self, child: Session, prompt: UserMessage, one: _Run) -> TurnEnded:
        ended = TurnEnded("end_turn")
        async for event in self.agent.run_turn(child, prompt):
            if isinstance(event, TurnEnded):
                ended = event
            else:
                await one.forward(event)
        return ended


def _last_text(child: Session) -> str:
    """The subagent's final words: the text of its last reply that has some."""
    for message in reversed(child.history):
        if isinstance(message, AssistantMessage) and message.text.strip():
            return message.text.strip()
    return ""


@dataclass(slots=True)
class _Run:
    """One subagent as the parent's surface sees it: a tool call listing its progress."""

    label: str  # "Subagent 2"; "Subagent 2.1" for the first one subagent 2 runs
    number: int
    task: SubagentTask
    call_id: str
    emit: Emit
    tools: dict[str, Tool] = field(default_factory=dict)
    session_id: str | None = None
    lines: list[str] = field(default_factory=list)
    line_of: dict[str, int] = field(default_factory=dict)
    # The subagent's tool calls shown as tool calls of their own (by their id in the parent's thread), and all that started.
    shown: set[str] = field(default_factory=set)
    started: dict[str, ToolStarted] = field(default_factory=dict)

    @property
    def label_title(self) -> str:
        return f"{self.label}: {title_from(self.task.goal) or 'task'}"

    def titled(self, title: str) -> str:
        """A title of the subagent's own call, named with the subagent; one that a subagent it runs
        already named ("Subagent 2.1: ...") as it is."""
        return title if title.startswith(f"{self.label}.") else f"{self.label}: {title}"

    def ident(self, child_call: str) -> str:
        """A subagent's tool call id as the parent's thread knows it (unique across subagents)."""
        return f"{self.call_id}/{child_call}"

    async def forward(self, event: Event) -> None:
        """Show one of the subagent's events in the parent's thread."""
        if isinstance(event, ToolStarted):
            self.started[event.call_id] = event
            self.line_of[event.call_id] = len(self.lines)
            self.lines.append(f"{_MARKS['running']} {event.title}")
            tool = self.tools.get(event.name)
            if tool is None or not tool.read_only:  # changes and commands are shown like the parent's own
                await self._show(event.call_id)
            await self._progress()
        elif isinstance(event, ToolUpdated):
            if self.ident(event.call_id) in self.shown:
                title = self.titled(event.title) if event.title else None
                await self.emit(dataclasses.replace(event, call_id=self.ident(event.call_id), title=title))
        elif isinstance(event, ToolFinished):
            if (index := self.line_of.get(event.call_id)) is not None:
                self.lines[index] = f"{_MARKS[event.status]}{self.lines[index][1:]}"
            if self.ident(event.call_id) in self.shown:
                await self.emit(dataclasses.replace(event, call_id=self.ident(event.call_id)))
            await self._progress()
        elif isinstance(event, PermissionNeeded):
            # Its broker already named the call as the editor knows it; the editor must have been shown the call.
            child_call = self._asking(event.request.tool_call_id)
            if child_call is not None and self.ident(child_call) not in self.shown:
                await self._show(child_call)
            await self.emit(event)
        elif isinstance(event, Notice):
            self.lines.append(f"Note: {event.text}")
            await self._progress()
        # Its text, thoughts, usage, title and plan stay in its own session.

    def _asking(self, tool_call_id: str) -> str | None:
        """The subagent's own id of the call a question names (after the prefixes of the subagents it runs in)."""
        for child_call in self.started:
            ident = self.ident(child_call)
            if tool_call_id == ident or tool_call_id.endswith(f"/{ident}"):
                return child_call
        return None

    async def _show(self, child_call: str) -> None:
        start = self.started[child_call]
        self.shown.add(self.ident(child_call))
        await self.emit(dataclasses.replace(start, call_id=self.ident(child_call), title=self.titled(start.title)))

    def text(self) -> str:
        head = f"Goal: {self.task.goal}"
        return "\n".join([head, *self.lines])

    async def _progress(self) -> None:
        await self.emit(ToolUpdated(self.call_id, content=[TextContent(self.text())]))

    async def finish(self, outcome: SubagentOutcome) -> None:
        """End the subagent's tool call with its progress and final report."""
        status: Literal["completed", "failed"] = "failed" if outcome.status in ("failed", "cancelled") else "completed"
        body = f"{self.text()}\n\n{outcome.report}"
        await self.emit(ToolFinished(self.call_id, status, [TextContent(body)], raw_output=outcome.report))


class _SubagentBroker(ApprovalBroker):
    """The parent's broker for a subagent's questions: titled with the subagent's name, and
    naming its tool call as the parent's thread knows it."""

    def __init__(self, inner: ApprovalBroker, label: str, prefix: str) -> None:
        super().__init__()
        self._inner = inner
        self._label = label
        self._prefix = prefix

    @classmethod
    def nested(cls, above: ApprovalBroker | None, agent: ApprovalBroker, label: str, prefix: str) -> _SubagentBroker:
        """The broker of a subagent run by a session whose broker is ``above`` (None: the agent's,
        ``agent``): a nested one's call ids carry every prefix above it, its title its own label only."""
        if isinstance(above, _SubagentBroker):
            return cls(above._inner, label, above._prefix + prefix)
        return cls(above or agent, label, prefix)

    @property
    def pending(self) -> list[ApprovalRequest]:
        return self._inner.pending

    async def open(self, request: ApprovalRequest) -> ApprovalRequest:
        request.title = f"{self._label}: {request.title}"
        request.tool_call_id = f"{self._prefix}{request.tool_call_id}"
        return await self._inner.open(request)

    async def wait(self, request: ApprovalRequest) -> Decision:
        return await self._inner.wait(request)

    async def answer(self, approval_id: str, decision: Decision, *, by: str, status: ApprovalStatus | None = None) -> bool:
        return await self._inner.answer(approval_id, decision, by=by, status=status)
