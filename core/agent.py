"""The agent loop: run a turn as a sequence of steps (request, stream, execute), yielding events."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from core.approvals import ApprovalBroker, ApprovalPolicy, Mode
from core.events import (
    Event,
    Notice,
    TextDelta,
    ThoughtDelta,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    UsageUpdated,
)
from core.host import Host
from core.messages import AssistantMessage, Message, TextPart, ToolResultMessage, UserMessage
from core.models.base import ErrorKind, Model, ModelError, ModelRequest, ResponseDone, Retrying, TextChunk, ThinkingChunk, Usage
from core.prompt import system_prompt
from core.tools import Tool, ToolContext, run_tool, tool_locations, tool_title

__all__ = ["Agent", "Session"]

log = logging.getLogger(__name__)

_FINISH_TO_STOP = {"length": "max_tokens", "refusal": "refusal"}


@dataclass(slots=True)
class Session:
    """A conversation's live state. The store holds its history; ``history`` mirrors it."""

    id: str
    cwd: Path
    roots: list[Path]
    host: Host
    policy: ApprovalPolicy
    system: str
    history: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    title: str | None = None
    turn: asyncio.Task | None = None


class Agent:
    """Runs turns for sessions of one surface over one model and one set of tools."""

    def __init__(
        self,
        *,
        model: Model,
        tools: list[Tool],
        store,
        broker: ApprovalBroker,
        surface: str,
        max_steps: int = 60,
        max_tokens: int = 8192,
    ) -> None:
        self.model = model
        self.tools = {t.name: t for t in tools}
        self._specs = [t.spec() for t in tools]
        self.store = store
        self.broker = broker
        self.surface = surface
        self.max_steps = max_steps
        self.max_tokens = max_tokens

    async def new_session(self, cwd: Path, host: Host, *, roots: list[Path] | None = None, mode: Mode = "ask") -> Session:
        """Create and persist a session rooted at ``cwd``."""
        cwd = cwd.resolve()
        record = await self.store.create_session(cwd=str(cwd), surface=self.surface, model=self.model.name)
        return await self._attach(record.id, cwd, host, roots, mode, [])

    async def open_session(self, session_id: str, host: Host, *, cwd: Path | None = None, mode: Mode = "ask") -> Session | None:
        """Reattach a stored session, its history loaded; None when it does not exist."""
        record = await self.store.get_session(session_id)
        if record is None:
            return None
        history = [m.message for m in await self.store.messages(session_id)]
        session = await self._attach(record.id, (cwd or Path(record.cwd)).resolve(), host, None, mode, history)
        session.title = record.title
        return session

    async def _attach(self, sid, cwd, host, roots, mode, history) -> Session:
        roots = [r.resolve() for r in (roots or [cwd])]
        rules = await self.store.approval_rules(str(roots[0]))
        policy = ApprovalPolicy(mode=mode, roots=roots, rules=list(rules))
        return Session(sid, cwd, roots, host, policy, system_prompt(cwd), history)

    async def run_turn(self, session: Session, prompt: UserMessage) -> AsyncIterator[Event]:
        """Run one turn; yields events and always ends with ``TurnEnded``."""
        if session.turn is not None and not session.turn.done():
            busy = "A turn is already running in this session; wait for it or cancel it."
            yield Notice(busy, "error")
            yield TurnEnded("end_turn", error=busy)
            return
        queue: asyncio.Queue[Event] = asyncio.Queue()
        session.turn = asyncio.create_task(self._turn(session, prompt, queue))
        while True:
            event = await queue.get()
            yield event
            if isinstance(event, TurnEnded):
                break
        await asyncio.shield(session.turn)

    def cancel(self, session: Session) -> None:
        """Stop the running turn: the model stream and any running tool stop at once."""
        if session.turn is not None and not session.turn.done():
            session.turn.cancel()

    async def _turn(self, session: Session, prompt: UserMessage, queue: asyncio.Queue[Event]) -> None:
        emit = queue.put
        state = _TurnState()
        try:
            await self._append(session, prompt)
            if session.title is None:
                session.title = _title_from(prompt.text)
                await self.store.update_session(session.id, title=session.title)
            stop = "max_turn_requests"
            for _ in range(self.max_steps):
                stop = await self._step(session, state, emit)
                if stop is not None:
                    break
            else:
                await emit(Notice(f"Stopped after {self.max_steps} model requests in one turn (max_steps).", "warning"))
                stop = "max_turn_requests"
            await emit(TurnEnded(stop))
        except asyncio.CancelledError:
            await asyncio.shield(self._finish_cancelled(session, state, emit))
            await emit(TurnEnded("cancelled"))
        except ModelError as exc:
            text = exc.user_message()
            log.warning("turn ended by model error: %s", text)
            await asyncio.shield(self._finish_cancelled(session, state, emit, reason="The model request failed."))
            await emit(Notice(text, "error"))
            await emit(TurnEnded("end_turn", error=text))
        except Exception as exc:
            log.exception("turn failed")
            await asyncio.shield(self._finish_cancelled(session, state, emit, reason="The turn failed."))
            text = f"Internal error: {type(exc).__name__}: {exc}. The conversation is saved; try again."
            await emit(Notice(text, "error"))
            await emit(TurnEnded("end_turn", error=text))

    async def _step(self, session: Session, state: _TurnState, emit) -> str | None:
        request = ModelRequest(
            system=session.system,
            messages=repair_history(session.history),
            tools=self._specs,
            max_tokens=self.max_tokens,
        )
        state.partial = []
        done: ResponseDone | None = None
        async for event in self.model.stream(request):
            if isinstance(event, TextChunk):
                state.partial.append(event.text)
                await emit(TextDelta(event.text))
            elif isinstance(event, ThinkingChunk):
                await emit(ThoughtDelta(event.text))
            elif isinstance(event, Retrying):
                restarted = " (the partial reply above is being regenerated)" if state.partial else ""
                state.partial = []
                await emit(
                    Notice(
                        f"{event.error.user_message()} Retrying in {event.delay:.1f}s "
                        f"(attempt {event.attempt + 1}){restarted}.",
                        "warning",
                    )
                )
            elif isinstance(event, ResponseDone):
                done = event
        if done is None:
            raise ModelError(ErrorKind.BAD_RESPONSE, "the model stream ended without a final response")
        state.partial = []
        message = done.message
        await self._append(session, message)
        session.usage.add(done.usage)
        await self.store.add_usage(
            session.id,
            done.usage.input_tokens,
            done.usage.output_tokens,
            done.usage.cache_read_tokens,
            done.usage.cache_write_tokens,
            done.usage.cost_usd,
        )
        context = done.usage.input_tokens + done.usage.cache_read_tokens + done.usage.cache_write_tokens
        await emit(UsageUpdated(done.usage, session.usage, context + done.usage.output_tokens))
        calls = message.tool_calls
        if not calls:
            return _FINISH_TO_STOP.get(done.finish_reason, "end_turn")
        await self._execute(session, calls, state, emit)
        return None

    async def _execute(self, session: Session, calls, state: _TurnState, emit) -> None:
        contexts = {}
        for call in calls:
            ctx = self._context(session, emit)
            found = self.tools.get(call.name)
            contexts[call.id] = ctx
            state.open_calls[call.id] = call.name
            await emit(
                ToolStarted(
                    call.id,
                    call.name,
                    tool_title(found, call.name, call.arguments),
                    found.kind if found else "other",
                    tool_locations(found, call.arguments, ctx),
                    call.arguments,
                )
            )

        async def one(call) -> None:
            run = await run_tool(self.tools, call, contexts[call.id])
            await self._append(session, run.result)
            state.open_calls.pop(call.id, None)
            await emit(ToolFinished(call.id, "failed" if run.failed else "completed", run.content, run.result.content))

        # Consecutive read-only calls run together; anything that changes state runs alone, in order.
        batch = []
        for call in calls:
            found = self.tools.get(call.name)
            if found is not None and found.read_only:
                batch.append(call)
                continue
            if batch:
                await asyncio.gather(*(one(c) for c in batch))
                batch = []
            await one(call)
        if batch:
            await asyncio.gather(*(one(c) for c in batch))

    def _context(self, session: Session, emit) -> ToolContext:
        async def remember(tool: str, pattern: str, decision: str) -> None:
            await self.store.add_approval_rule(str(session.roots[0]), tool, pattern, decision)

        return ToolContext(
            session_id=session.id,
            cwd=session.cwd,
            roots=session.roots,
            host=session.host,
            policy=session.policy,
            broker=self.broker,
            emit=emit,
            remember_rule=remember,
        )

    async def _append(self, session: Session, message: Message) -> None:
        await self.store.append_message(session.id, message)
        session.history.append(message)

    async def _finish_cancelled(self, session: Session, state: _TurnState, emit, reason: str = "Cancelled by the user.") -> None:
        """Keep what was said, and close every tool call so the history stays valid."""
        try:
            if state.partial:
                text = "".join(state.partial)
                state.partial = []
                await self._append(session, AssistantMessage(parts=[TextPart(text=text)], model=self.model.name, interrupted=True))
            for call_id, name in list(state.open_calls.items()):
                await self._append(
                    session, ToolResultMessage(tool_call_id=call_id, tool_name=name, content=reason, is_error=True)
                )
                await emit(ToolFinished(call_id, "failed", raw_output=reason))
            state.open_calls.clear()
        except Exception:
            log.exception("could not record the end of a cancelled turn")


@dataclass(slots=True)
class _TurnState:
    partial: list[str] = field(default_factory=list)
    open_calls: dict[str, str] = field(default_factory=dict)


def repair_history(history: list[Message]) -> list[Message]:
    """The history as a model can take it: every tool call answered, empty interruptions dropped.

    A crash can leave a tool call without a result; models reject such a history, so a
    synthetic result is supplied for the request only.
    """
    out: list[Message] = []
    pending: dict[str, str] = {}

    def close_pending() -> None:
        for call_id, name in pending.items():
            out.append(
                ToolResultMessage(
                    tool_call_id=call_id, tool_name=name, content="Interrupted before a result.", is_error=True
                )
            )
        pending.clear()

    for message in history:
        if isinstance(message, ToolResultMessage):
            if message.tool_call_id in pending:
                pending.pop(message.tool_call_id)
                out.append(message)
            continue  # a result whose call is not in the history is dropped
        close_pending()
        if isinstance(message, AssistantMessage):
            if message.interrupted and not message.text:
                continue
            pending = {c.id: c.name for c in message.tool_calls}
        out.append(message)
    close_pending()
    return out


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:59].rstrip() + "…"
