"""The agent loop: run a turn as a sequence of steps (request, stream, execute), yielding events."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from core.agent.prompt import PROMPT_KEY, kept_prompt, system_prompt
from core.agent.session import SessionContext, TurnStats, title_from
from core.agent.stops import ModelFinished, StepLimitReached, TurnStopped
from core.agent.vision import Ask, Sight, undescribed
from core.events import (
    Event,
    Notice,
    TextDelta,
    ThoughtDelta,
    TitleChanged,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    UsageUpdated,
)
from core.host.local import Host
from core.host.processes import is_background_note, take_ended
from core.host.sandbox import status as sandbox_status
from core.learning.compression import Compression, Summariser, compress, reply_room, reply_tokens, shown_history, summarise
from core.learning.context import LearningSettings
from core.learning.personality import PERSONALITY_KEY
from core.messages import (
    AssistantMessage,
    HistoryRepair,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from core.models.base import (
    ErrorKind,
    Model,
    ModelError,
    ModelEvent,
    ModelRequest,
    ResponseDone,
    Retrying,
    TextChunk,
    ThinkingChunk,
    ToolSpec,
)
from core.policy.approvals import ApprovalBroker, ApprovalPolicy, Mode
from core.store import RuleDecision, SessionNotFoundError, SessionStore, Surface
from core.tools.context import ToolContext, ToolSettings
from core.tools.delegation import Delegate
from core.tools.diffs import ledger_for
from core.tools.dispatch import PreparedCall, prepare, run_prepared
from core.tools.mcp_client import McpPool, SessionMcp
from core.tools.registry import Tool

__all__ = ["Agent", "Delegated", "Session"]

log = logging.getLogger(__name__)

Emit = Callable[[Event], Awaitable[None]]
_SUMMARY_SYSTEM = "You summarise past conversations for a coding agent. Be brief, factual and specific (paths, names, decisions)."


@dataclass(frozen=True, slots=True)
class Delegated:
    """What makes a session a subagent's: it runs inside a turn of another session."""

    # Questions, checkpoints (so undo takes the subagent's changes back with the turn) and the
    # tools' view of "this session" are the parent's; the messages are the subagent's own.
    parent_id: str
    turn_id: str | None
    tools: dict[str, Tool]
    max_steps: int
    depth: int = 1
    # The parent's broker, naming the subagent in its questions; None: the agent's.
    broker: ApprovalBroker | None = None
    # Its name as the user sees it: "Subagent 2", and "Subagent 2.1" for one it runs.
    label: str = ""


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
    turn: asyncio.Task[None] | None = None
    # The model for this session when it differs from the agent's default (the model picker).
    model: Model | None = None
    reasoning_effort: str | None = None
    context_window: int = 0
    # Prompts that arrive while a turn runs wait here, in order.
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Bumped by cancel: prompts queued before a cancel end as cancelled too.
    cancels: int = 0
    # Extra tools for this session only (e.g. from MCP servers the editor passed in).
    extra_tools: dict[str, Tool] = field(default_factory=dict)
    # config.toml's MCP servers for this session, and notices when any of its servers drops or returns.
    mcp: SessionMcp | None = None
    # Prompt sections (SOUL, memory snapshot, skills, AGENTS.md) and nudge state; see core.agent.session.
    context: SessionContext | None = None
    # How requests are built from a long history; see core.learning.compression.
    compression: Compression | None = None
    # Set for a subagent's session (see core.agent.subagents).
    delegated: Delegated | None = None
    # What the subagents this session ran used (their own sessions hold it; ``usage`` leaves it out).
    subagents_usage: Usage = field(default_factory=Usage)
    # The history as requests carry it (``repair_history``), kept up to date step by step.
    repaired: HistoryRepair = field(default_factory=HistoryRepair)
    # Set when the session was reopened without reading its stored history (to be shown, say):
    # its next turn reads it (``Agent.read_history``).
    history_unread: bool = False

    def billed(self) -> Usage:
        """The session's usage with its subagents': what its turns cost."""
        total = Usage()
        total.add(self.usage)
        total.add(self.subagents_usage)
        return total


class Agent:
    """Runs turns for sessions of one surface over one model and one set of tools."""

    def __init__(
        self,
        *,
        model: Model,
        tools: list[Tool],
        store: SessionStore,
        broker: ApprovalBroker,
        surface: Surface,
        max_steps: int = 60,
        max_tokens: int = 8192,
        learning: LearningSettings | None = None,
        context_window: int = 0,
        summary_model: Model | None = None,
        tool_settings: ToolSettings | None = None,
        mcp: McpPool | None = None,
        sight: Sight | None = None,
    ) -> None:
        self.model = model
        # Which models take images, and the vision model that sees them for those that do not.
        self.sight = sight or Sight()
        # config.toml's MCP servers: connected when a session first needs them, for every session.
        self.mcp = mcp
        # For short summaries tools ask for (``ToolContext.summarize``); None: the session's model.
        self.summary_model = summary_model
        # Tokens the default model takes; compression starts from a share of it (0: unknown).
        self.context_window = context_window
        self.tools = {t.name: t for t in tools}
        self._specs = [t.spec() for t in tools]
        # Schemas of a session's extra (MCP) tools, built once per tool object, not once per step.
        self._extra_specs: dict[str, tuple[Tool, ToolSpec]] = {}
        self.store = store
        self.broker = broker
        self.surface = surface
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.learning = learning or LearningSettings()
        # What tools read of the configuration (``ToolContext.settings``).
        self.tool_settings = tool_settings or ToolSettings(learning=self.learning)
        # What skills may require or stand in for: the toolsets every tool of this agent belongs to,
        # and the capability groups ("file", "web", ...) of any of its tools.
        self.toolsets = (
            frozenset.intersection(*(t.toolsets for t in tools)) | frozenset().union(*(t.groups for t in tools)) if tools else frozenset()
        )
        # Runs subagents for a session's turn (``ToolContext.delegate``); set by core.agent.subagents.
        self.delegator: Callable[[Session, str | None, Emit], Delegate | None] | None = None

    async def new_session(
        self, cwd: Path, host: Host, *, roots: list[Path] | None = None, mode: Mode = "ask", session_id: str | None = None
    ) -> Session:
        """Create and persist a session rooted at ``cwd`` (under ``session_id`` when given)."""
        cwd = cwd.resolve()
        base = await self._base_prompt(cwd)  # kept with the session: reopened, it begins its requests the same way
        record = await self.store.create_session(
            cwd=str(cwd), surface=self.surface, model=self.model.name, session_id=session_id, meta={PROMPT_KEY: base}
        )
        return await self._attach(record.id, cwd, host, roots, mode, [], base)

    async def open_session(
        self, session_id: str, host: Host, *, cwd: Path | None = None, mode: Mode = "ask", read_history: bool = True
    ) -> Session | None:
        """Reattach a stored session, its history loaded (``read_history=False``: read by its next
        turn, so a session reopened only to be shown never holds a long history); None when it
        does not exist."""
        record = await self.store.get_session(session_id)
        if record is None:
            return None
        history = [m.message for m in await self.store.messages(session_id)] if read_history else []
        cwd = (cwd or Path(record.cwd)).resolve()
        session = await self._attach(record.id, cwd, host, None, mode, history, kept_prompt(record.meta, cwd, tuple(self.tools)))
        session.title = record.title
        session.compression = Compression.from_meta(record.meta.get("compression"))
        session.usage = Usage(
            record.input_tokens, record.output_tokens, record.cache_read_tokens, record.cache_write_tokens, record.cost_usd
        )
        session.subagents_usage = await self.store.subagents_usage(session_id)
        session.history_unread = not read_history
        personality = record.meta.get(PERSONALITY_KEY)
        if isinstance(personality, str) and session.context is not None:  # the overlay chosen earlier: from its next turn
            await asyncio.to_thread(session.context.choose_personality, personality)
        return session

    async def read_history(self, session: Session) -> None:
        """Read the stored history of a session reopened without it (see ``open_session``)."""
        if session.history_unread:
            history = [m.message for m in await self.store.messages(session.id)]
            if session.history_unread:  # not read meanwhile by another caller, whose turn may have gone on
                session.history, session.history_unread = history, False

    async def fork_session(self, source_id: str, host: Host, *, cwd: Path, mode: Mode = "ask") -> Session | None:
        """A new session that starts with a copy of another's history; None when it does not exist."""
        source = await self.store.get_session(source_id)
        if source is None:
            return None
        title = f"{source.title} (fork)" if source.title else None
        record = await self.store.create_session(
            cwd=str(cwd.resolve()), surface=self.surface, model=source.model, title=title, parent_id=source_id
        )
        await self.store.copy_messages(source_id, record.id)
        return await self.open_session(record.id, host, cwd=cwd, mode=mode)

    async def _base_prompt(self, cwd: Path) -> str:
        names = tuple(self.tools)
        return await asyncio.to_thread(lambda: system_prompt(cwd, tools=names))  # `git status`: off the event loop

    async def _attach(
        self, sid: str, cwd: Path, host: Host, roots: list[Path] | None, mode: Mode, history: list[Message], base: str | None = None
    ) -> Session:
        roots = [r.resolve() for r in (roots or [cwd])]
        # Probe the sandbox now, off the event loop, so the first command does not wait for it.
        asyncio.get_running_loop().run_in_executor(None, sandbox_status)
        rules = await self.store.approval_rules(str(roots[0]))
        policy = ApprovalPolicy(mode=mode, roots=roots, rules=list(rules))
        unsandboxed = getattr(host, "unsandboxed", None)  # a host whose commands run outside any sandbox says why
        if isinstance(unsandboxed, str) and unsandboxed:
            policy.sandbox, policy.sandbox_detail = False, unsandboxed
        names = tuple(self.tools)
        if base is None:
            base = await self._base_prompt(cwd)
        context = await asyncio.to_thread(SessionContext.build, cwd, base, self.learning, self.toolsets, names)
        session = Session(sid, cwd, roots, host, policy, context.prompt(), history, context=context)
        session.context_window = self.context_window
        session.mcp = SessionMcp(self.mcp, cwd)  # config.toml's servers start now, in the background
        return session

    async def run_turn(self, session: Session, prompt: UserMessage) -> AsyncIterator[Event]:
        """Run one turn; yields events and always ends with ``TurnEnded``.

        A prompt that arrives while another turn of the session runs waits for it (and says so).
        """
        generation = session.cancels
        if session.lock.locked():
            yield Notice("Queued: this message will be answered when the current turn ends.", "info")
        async with session.lock:
            if session.cancels != generation:  # cancelled while it waited
                yield TurnEnded("cancelled")
                return
            await self.read_history(session)
            queue: asyncio.Queue[Event] = asyncio.Queue()
            session.turn = asyncio.create_task(self._turn(session, prompt, queue))
            while True:
                event = await queue.get()
                if isinstance(event, TurnEnded):
                    await self._keep_end(session, event)
                yield event
                if isinstance(event, TurnEnded):
                    break
            await asyncio.shield(session.turn)

    def cancel(self, session: Session) -> None:
        """Stop the running turn (model stream and tools at once) and every queued prompt."""
        session.cancels += 1
        if session.turn is not None and not session.turn.done():
            session.turn.cancel()

    async def compact(self, session: Session) -> str:
        """Summarise the conversation so far (``/compact``); later requests start from the first
        request, the summary and what follows. The same compression as the automatic path: the
        summary is kept in a linked child session and the full history stays in the store.
        Returns the summary; "" when there is nothing new to compact."""
        await self.read_history(session)
        state = session.compression or Compression()
        cut = len(session.history)
        if cut <= state.tail_from or not any(isinstance(m, AssistantMessage) for m in session.history[state.tail_from :]):
            return ""
        made = await summarise(self._summariser(session), session, cut)
        if made is None:
            raise ModelError(ErrorKind.BAD_RESPONSE, "the model returned no summary")
        return made[0]

    def _spec(self, tool: Tool) -> ToolSpec:
        cached = self._extra_specs.get(tool.name)
        if cached is None or cached[0] is not tool:
            cached = self._extra_specs[tool.name] = (tool, tool.spec())
        return cached[1]

    def tools_for(self, session: Session) -> dict[str, Tool]:
        if session.delegated is not None:
            return session.delegated.tools
        remote = session.mcp.tools(session.extra_tools) if session.mcp is not None else {}
        if not remote and not session.extra_tools:
            return self.tools
        return {**self.tools, **remote, **session.extra_tools}

    async def _turn(self, session: Session, prompt: UserMessage, queue: asyncio.Queue[Event]) -> None:
        emit = queue.put
        turn = _Turn(emit)
        try:
            await self._announce_ended(session, emit)
            try:
                prompt = await self.sight.described(self._asker(session), session.model or self.model, prompt, emit)
            except BaseException:  # cancelled or failed while its images were described: the words are kept
                await asyncio.shield(self._keep_prompt(session, undescribed(prompt)))
                raise
            await self._append(session, prompt)
            if session.mcp is not None:
                for notice in await session.mcp.open_turn(session.extra_tools):
                    await emit(notice)
            turn.nudge = await self._open_turn(session, prompt, emit)
            steps = session.delegated.max_steps if session.delegated is not None else self.max_steps
            for _ in range(steps):
                await self._step(session, turn)
            raise StepLimitReached(steps)
        except TurnStopped as stop:
            if stop.message:
                await emit(Notice(stop.message, stop.level))
            if session.context is not None:
                session.context.last_turn = turn.stats
            await emit(TurnEnded(stop.reason))
        except asyncio.CancelledError:
            await asyncio.shield(self._finish_cancelled(session, turn))
            await emit(TurnEnded("cancelled"))
        except ModelError as exc:
            text = exc.user_message()
            log.warning("turn ended by model error: %s", text)
            await asyncio.shield(self._finish_cancelled(session, turn, reason="The model request failed."))
            await emit(Notice(text, "error"))
            await emit(TurnEnded("end_turn", error=text))
        except Exception as exc:
            log.exception("turn failed")
            await asyncio.shield(self._finish_cancelled(session, turn, reason="The turn failed."))
            text = f"Internal error: {type(exc).__name__}: {exc}. The conversation is saved; try again."
            await emit(Notice(text, "error"))
            await emit(TurnEnded("end_turn", error=text))

    async def _step(self, session: Session, turn: _Turn) -> None:
        """One model request, then the tool calls it made; raises ``ModelFinished`` when it made none."""
        await self._announce_ended(session, turn.emit)
        if session.mcp is not None:
            for notice in session.mcp.changes(session.extra_tools):  # an MCP server dropped or came back
                await turn.emit(notice)
        try:
            done = await self._request(session, turn)
        except ModelError as exc:
            # A turn does not fail with "context too long" when compression can help: the next step retries.
            if exc.kind is not ErrorKind.CONTEXT_TOO_LONG or turn.compressed:
                raise
            if not await compress(self._summariser(session), session, turn.emit, specs=self._specs, force=True):
                raise
            turn.compressed = True
            return
        await self._append(session, done.message)
        u = done.usage
        context = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
        await turn.emit(UsageUpdated(u, session.billed(), context + u.output_tokens, session.context_window))
        if not done.message.tool_calls:
            raise ModelFinished(done.finish_reason)
        await self._execute(session, done.message.tool_calls, turn)

    async def _request(self, session: Session, turn: _Turn) -> ResponseDone:
        """Compress when due, then stream one request built from the history, showing text as it comes."""
        tools = self.tools_for(session)
        specs = self._specs if tools is self.tools else [self._spec(t) for t in tools.values()]
        await compress(self._summariser(session), session, turn.emit, specs=specs)
        request = ModelRequest(
            system=session.system,
            messages=session.repaired(shown_history(session, specs, self.learning)),
            tools=specs,
            max_tokens=reply_tokens(session, self.learning, self.max_tokens),
            # The same text on every step of the turn; the adapter puts it after the cached prefix.
            ephemeral=turn.nudge,
            reasoning_effort=session.reasoning_effort,
            reply_room=reply_room(session, self.learning),
        )
        turn.partial = []
        done = await self._charged(session, request, on_event=turn.show)
        if done is None:
            raise ModelError(ErrorKind.BAD_RESPONSE, "the model stream ended without a final response")
        turn.partial = []
        return done

    async def _execute(self, session: Session, calls: list[ToolCallPart], turn: _Turn) -> None:
        """Run the calls: consecutive read-only ones together, anything that changes state alone, in order."""
        tools = self.tools_for(session)
        prepared: list[tuple[PreparedCall, ToolContext]] = []
        for call in calls:
            ctx = self._context(session, turn.emit, turn.turn_id)
            ready = prepare(tools, call, ctx)
            prepared.append((ready, ctx))
            turn.open_calls[call.id] = call.name
            await turn.emit(ToolStarted(call.id, call.name, ready.title, ready.kind, ready.locations, call.arguments))

        async def one(ready: PreparedCall, ctx: ToolContext) -> None:
            run = await run_prepared(ready, ctx)
            turn.stats.record(run.failed)
            if not run.failed and session.context is not None:
                run.result.content += session.context.nested_note(ready.paths)
            await self._append(session, run.result)
            turn.open_calls.pop(ready.call.id, None)
            await turn.emit(ToolFinished(ready.call.id, "failed" if run.failed else "completed", run.content, run.result.content))

        for group in _batches(prepared):
            if group[0][0].read_only:
                await asyncio.gather(*(one(*item) for item in group))
            else:
                await one(*group[0])

    async def _open_turn(self, session: Session, prompt: UserMessage, emit: Emit) -> str | None:
        """Start a turn: the session context's changes (prompt, findings), a title for an untitled
        session; returns the turn's nudge."""
        nudge = None
        if session.context is not None:
            turn_number = sum(1 for m in session.history if isinstance(m, UserMessage) and not is_background_note(m.text))
            model = session.model or self.model
            opening = await asyncio.to_thread(session.context.begin_turn, turn_number, prompt.text, model.name, model.family)
            if opening.prompt is not None:
                session.system = opening.prompt
            for finding in opening.findings:
                await emit(Notice(f"Screened {finding.describe()}; that passage was neutralised before reaching the model.", "warning"))
            nudge = opening.nudge
        if session.title is None and (title := title_from(prompt.text)) is not None:
            session.title = title
            await self.store.update_session(session.id, title=title)
            await emit(TitleChanged(title))
        return nudge

    def _context(self, session: Session, emit: Emit, turn_id: str | None = None) -> ToolContext:
        async def remember(tool: str, pattern: str, decision: RuleDecision) -> None:
            await self.store.add_approval_rule(str(session.roots[0]), tool, pattern, decision)

        sub = session.delegated
        return ToolContext(
            session_id=sub.parent_id if sub is not None else session.id,
            cwd=session.cwd,
            roots=session.roots,
            host=session.host,
            policy=session.policy,
            broker=sub.broker if sub is not None and sub.broker is not None else self.broker,
            emit=emit,
            remember_rule=remember,
            turn_id=sub.turn_id if sub is not None else turn_id,
            files=ledger_for(session.id) if sub is not None else None,
            delegate=self.delegator(session, turn_id, emit) if self.delegator is not None else None,
            summarize=(lambda text: self._summarize(session, text)) if self.learning.search_summary else None,
            store=self.store,
            settings=self.tool_settings,
            look=lambda images, question: self.sight.look(self._asker(session), session.model or self.model, images, question),
        )

    async def _charged(
        self,
        session: Session,
        request: ModelRequest,
        *,
        model: Model | None = None,
        on_event: Callable[[ModelEvent], Awaitable[None]] | None = None,
    ) -> ResponseDone | None:
        """Stream one request (from ``model``, else the session's) and charge its usage to the session.
        Every event but the last goes to ``on_event``; returns the final response (None: the stream
        ended without one)."""
        done: ResponseDone | None = None
        async for event in (model or session.model or self.model).stream(request):
            if isinstance(event, ResponseDone):
                done = event
            elif on_event is not None:
                await on_event(event)
        if done is not None:
            u = done.usage
            session.usage.add(u)
            await self.store.add_usage(session.id, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.cost_usd)
        return done

    def _asker(self, session: Session) -> Ask:
        """Requests to a given model, charged to ``session``."""
        return lambda request, model: self._charged(session, request, model=model)

    def _summariser(self, session: Session) -> Summariser:
        """Compression's collaborators for this session: requests with its model, charged to it."""
        model = session.model or self.model
        return Summariser(self.store, self.learning, partial(self._charged, session), model.name, self.surface, self.max_tokens)

    async def _summarize(self, session: Session, text: str) -> str:
        """One short answer to ``text`` from the summary model (or the session's), counted in
        the session's usage."""
        request = ModelRequest(system=_SUMMARY_SYSTEM, messages=[UserMessage.of(text)], max_tokens=min(self.max_tokens, 1024))
        done = await self._charged(session, request, model=self.summary_model)
        return done.message.text.strip() if done is not None else ""

    async def _announce_ended(self, session: Session, emit: Emit) -> None:
        """Background commands that ended unread since the last request: a note for the model
        each, appended to the history (what came before, the cached prefix, is unchanged), and a
        notice for the user unless the surface has shown one already."""
        jobs = getattr(session.host, "jobs", None)
        if not jobs or session.delegated is not None:  # a subagent shares its parent's host: the parent tells
            return
        unseen = {e.job_id for e in take_ended(jobs, "user")}
        for ended in take_ended(jobs, "model"):
            await self._append(session, UserMessage.of(ended.note))
            if ended.job_id in unseen:
                await emit(Notice(ended.notice, "warning"))

    async def _append(self, session: Session, message: Message) -> None:
        stored = await self.store.append_message(session.id, message)
        session.history.append(stored.message)  # as stored: scrubbed of configured secrets

    async def _keep_prompt(self, session: Session, prompt: UserMessage) -> None:
        try:
            await self._append(session, prompt)
        except Exception:
            log.exception("could not store the prompt of a turn that ended before it started")

    async def _keep_end(self, session: Session, ended: TurnEnded) -> None:
        """Keep how the turn ended in the session's meta (``last_turn``): exports and their
        ``--outcome`` filter read it there, as no message records a stop reason."""
        end = {"stop_reason": ended.stop_reason, "error": ended.error is not None, "ended_at": time.time()}
        try:
            await self.store.update_session(session.id, meta={"last_turn": end})
        except SessionNotFoundError:
            pass  # deleted while its turn ran (sessions delete --force): nothing to keep it in
        except Exception:
            log.exception("could not keep how the turn ended")

    async def _finish_cancelled(self, session: Session, turn: _Turn, reason: str = "Cancelled by the user.") -> None:
        """Keep what was said, and close every tool call so the history stays valid."""
        try:
            if turn.partial:
                text = "".join(turn.partial)
                turn.partial = []
                model = (session.model or self.model).name
                await self._append(session, AssistantMessage(parts=[TextPart(text=text)], model=model, interrupted=True))
            for call_id, name in list(turn.open_calls.items()):
                await self._append(session, ToolResultMessage(tool_call_id=call_id, tool_name=name, content=reason, is_error=True))
                await turn.emit(ToolFinished(call_id, "failed", raw_output=reason))
            turn.open_calls.clear()
        except Exception:
            log.exception("could not record the end of a cancelled turn")


@dataclass(slots=True)
class _Turn:
    """The state of one running turn."""

    emit: Emit
    partial: list[str] = field(default_factory=list)
    open_calls: dict[str, str] = field(default_factory=dict)
    # One checkpoint per turn: every write of the turn is undone together.
    turn_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # Request-only text for every step of this turn (``ModelRequest.ephemeral``); never stored.
    nudge: str | None = None
    stats: TurnStats = field(default_factory=TurnStats)
    # Set once a "context too long" answer was met by compressing: a second one ends the turn.
    compressed: bool = False

    async def show(self, event: ModelEvent) -> None:
        """Show a streamed event; the text so far is kept for a cancelled turn, dropped on a retry."""
        if isinstance(event, TextChunk):
            self.partial.append(event.text)
            await self.emit(TextDelta(event.text))
        elif isinstance(event, ThinkingChunk):
            await self.emit(ThoughtDelta(event.text))
        elif isinstance(event, Retrying):
            restarted = " (the partial reply above is being regenerated)" if self.partial else ""
            self.partial = []
            attempt = f"Retrying in {event.delay:.1f}s (attempt {event.attempt + 1}){restarted}."
            await self.emit(Notice(f"{event.error.user_message()} {attempt}", "warning"))


def _batches(prepared: list[tuple[PreparedCall, ToolContext]]) -> list[list[tuple[PreparedCall, ToolContext]]]:
    """Consecutive read-only calls in one batch; every other call alone."""
    batches: list[list[tuple[PreparedCall, ToolContext]]] = []
    for item in prepared:
        if item[0].read_only and batches and batches[-1][0][0].read_only:
            batches[-1].append(item)
        else:
            batches.append([item])
    return batches
