"""Stored sessions out, in the shapes trainers and evaluators read (``hermes-editor sessions export``).

Formats (README, "Exporting sessions", documents each shape):

- ``md``: a readable transcript; ``jsonl``: one stored message a line, as the store holds it;
- ``sharegpt``: LLaMA-Factory's ShareGPT (``conversations`` of ``from``/``value`` with
  ``human``/``gpt``/``function_call``/``observation``, plus ``system`` and a ``tools`` string),
  one JSON array for the whole export;
- ``openai``: OpenAI's chat fine-tuning JSONL, one ``{"messages", "tools", "parallel_tool_calls"}``
  line per session;
- ``trajectory``: one JSON object a line per session, every step with its text, thinking, tool
  calls, results, statuses and times (the shape evaluators and RL pipelines need).

Everything streams: sessions are read a page at a time, and each session's messages a page at a
time, and written as they are read, so an export of a million messages holds one page (and at
most one turn's steps, for ShareGPT) in memory. Every string goes through a :class:`Cleaner`.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from core.learning.export_clean import Cleaner
from core.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SummaryMessage,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
    dump_message,
    load_message,
)
from core.store.records import SessionRecord, StoredMessage

if TYPE_CHECKING:
    from core.models.base import ToolSpec
    from core.store import SessionStore

__all__ = [
    "FORMATS",
    "LAST_TURN_KEY",
    "OUTCOMES",
    "Exported",
    "Selection",
    "export_sessions",
    "outcome_of",
    "select_sessions",
    "session_outcome",
]

FORMATS = ("md", "jsonl", "sharegpt", "openai", "trajectory")
# How a session's last turn ended. The agent loop keeps it in ``meta[LAST_TURN_KEY]``
# (``{"stop_reason", "error", "ended_at"}``); sessions from before that, or whose last turn never
# ended (a killed process), are "completed" when they end on a finished answer, else "unknown".
OUTCOMES = ("completed", "cancelled", "failed", "refused", "incomplete", "unknown")
LAST_TURN_KEY = "last_turn"
_STOP_OUTCOME = {
    "end_turn": "completed",
    "cancelled": "cancelled",
    "refusal": "refused",
    "max_tokens": "incomplete",
    "max_turn_requests": "incomplete",
}
_PROMPT_KEY = "prompt"  # core.agent.prompt.PROMPT_KEY: the system prompt a session kept (agent is a room above)
_PAGE = 500
INTERRUPTED = "Interrupted before a result."  # what core.messages.repair_history answers an unanswered call with
Write = Callable[[str], object]


@dataclass(frozen=True, slots=True)
class Selection:
    """Which sessions an export takes: all fields are ANDed; empty sets take every value."""

    project: str | None = None  # an absolute folder: sessions whose working directory is it or under it
    since: float | None = None  # started at or after
    until: float | None = None  # started at or before
    surfaces: frozenset[str] = frozenset()
    outcomes: frozenset[str] = frozenset()


@dataclass(slots=True)
class Exported:
    """What an export wrote: session ids written, and those left out as holding nothing the format can carry."""

    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


# -- reading the store ---------------------------------------------------------------------


async def select_sessions(store: SessionStore, selection: Selection) -> AsyncIterator[SessionRecord]:
    """The sessions ``selection`` takes, oldest first, read a page at a time."""
    where, params = _where(selection)
    created, last_id = -math.inf, ""
    while True:
        rows = await store.select(
            f"SELECT * FROM sessions WHERE {' AND '.join(where)} AND (created_at > ? OR (created_at = ? AND id > ?))"
            " ORDER BY created_at, id LIMIT ?",
            (*params, created, created, last_id, _PAGE),
        )
        for row in rows:
            record = SessionRecord.from_row(row)
            if not selection.outcomes or await session_outcome(store, record) in selection.outcomes:
                yield record
        if len(rows) < _PAGE:
            return
        created, last_id = rows[-1]["created_at"], rows[-1]["id"]


def _where(selection: Selection) -> tuple[list[str], list[Any]]:
    where: list[str] = ["1 = 1"]
    params: list[Any] = []
    if selection.project:
        prefix = selection.project.rstrip("/") + "/"
        # substr, not LIKE: LIKE ignores case and reads % and _ in folder names.
        where.append("(cwd = ? OR substr(cwd, 1, ?) = ?)")
        params += [selection.project, len(prefix), prefix]
    if selection.since is not None:
        where.append("created_at >= ?")
        params.append(selection.since)
    if selection.until is not None:
        where.append("created_at <= ?")
        params.append(selection.until)
    if selection.surfaces:
        where.append(f"surface IN ({', '.join('?' for _ in selection.surfaces)})")
        params += sorted(selection.surfaces)
    return where, params


async def _messages(store: SessionStore, session_id: str) -> AsyncIterator[StoredMessage]:
    after = 0
    while True:
        page = await store.messages(session_id, after_seq=after, limit=_PAGE)
        for stored in page:
            yield stored
        if len(page) < _PAGE:
            return
        after = page[-1].seq


async def session_outcome(store: SessionStore, record: SessionRecord) -> str:
    """One of :data:`OUTCOMES` for a stored session (see there)."""
    return (await _session_end(store, record))[0]


async def _session_end(store: SessionStore, record: SessionRecord) -> tuple[str, str | None]:
    """The session's outcome, and the stop reason it comes from (None when it comes from the last message)."""
    rows = await store.select(
        "SELECT content, (SELECT MAX(created_at) FROM messages WHERE session_id = ?1 AND role = 'user') AS user_at"
        " FROM messages WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1",
        (record.id,),
    )
    last, prompt_at = (load_message(rows[0]["content"]), rows[0]["user_at"]) if rows else (None, None)
    kept = _kept_end(record.meta, prompt_at)
    return outcome_of(record.meta, last, prompt_at), str(kept["stop_reason"]) if kept else None


def _kept_end(meta: Mapping[str, Any], last_prompt_at: float | None) -> dict[str, Any] | None:
    """The kept end of the last turn, unless a prompt came after it (a turn that never ended)."""
    ended = meta.get(LAST_TURN_KEY)
    if not isinstance(ended, dict) or not isinstance(ended.get("ended_at"), (int, float)) or "stop_reason" not in ended:
        return None
    return ended if last_prompt_at is None or last_prompt_at <= ended["ended_at"] else None


def outcome_of(meta: Mapping[str, Any], last: Message | None, last_prompt_at: float | None) -> str:
    """The outcome from the kept end of the last turn, when no prompt came after it; else from the last message."""
    ended = _kept_end(meta, last_prompt_at)
    if ended is not None:
        return "failed" if ended.get("error") else _STOP_OUTCOME.get(str(ended["stop_reason"]), "unknown")
    if isinstance(last, AssistantMessage) and last.text and not last.tool_calls and not last.interrupted:
        return "completed"
    return "unknown"


async def _has_assistant(store: SessionStore, session_id: str) -> bool:
    rows = await store.select("SELECT 1 FROM messages WHERE session_id = ? AND role = 'assistant' LIMIT 1", (session_id,))
    return bool(rows)


Approvals = dict[tuple[str, str], str]


async def _approvals(store: SessionStore, record: SessionRecord) -> Approvals:
    """The last answer to each question about the session's calls, by (call id, tool name). A
    subagent's questions are asked under its parent session (whose own call ids may repeat its
    ids: the tool name tells them apart)."""
    owners = [record.id, record.parent_id] if record.parent_call_id and record.parent_id else [record.id]
    rows = await store.select(
        f"SELECT tool_call_id, tool_name, status FROM approvals WHERE session_id IN ({', '.join('?' for _ in owners)}) ORDER BY created_at",
        tuple(owners),
    )
    return {(row["tool_call_id"], row["tool_name"]): row["status"] for row in rows}


# -- the export ----------------------------------------------------------------------------


async def export_sessions(
    store: SessionStore,
    records: AsyncIterator[SessionRecord],
    fmt: str,
    write: Write,
    *,
    cleaner: Cleaner | None = None,
    tool_specs: Mapping[str, ToolSpec] | None = None,
) -> Exported:
    """Write ``records`` in format ``fmt`` through ``write``; ``tool_specs`` describe the tools
    (by name) in the formats that list them."""
    if fmt not in _WRITERS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    writer = _WRITERS[fmt](store, write, cleaner or Cleaner(), tool_specs or {})
    done = Exported()
    writer.begin()
    async for record in records:
        (done.written if await writer.session(record) else done.skipped).append(record.id)
    writer.end()
    return done


class _Writer:
    """One format: ``begin``, then ``session`` for each record (False: nothing written), then ``end``."""

    def __init__(self, store: SessionStore, write: Write, cleaner: Cleaner, specs: Mapping[str, ToolSpec]) -> None:
        self.store = store
        self.write = write
        self.cleaner = cleaner
        self.specs = specs
        self.count = 0

    def begin(self) -> None:
        return None

    def end(self) -> None:
        return None

    async def session(self, record: SessionRecord) -> bool:
        raise NotImplementedError

    def dumps(self, value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    def clean(self, value: Any, record: SessionRecord) -> Any:
        return self.cleaner.value(value, record.cwd)

    def tool(self, name: str) -> dict[str, Any]:
        """A tool as OpenAI's ``tools`` lists it: its schema when known, else its name and an open object."""
        spec = self.specs.get(name)
        if spec is None:
            return {"name": name, "description": "", "parameters": {"type": "object"}}
        return {"name": spec.name, "description": spec.description, "parameters": spec.parameters}


def _user_text(message: UserMessage) -> str:
    return "".join(p.text if isinstance(p, TextPart) else "[image]" for p in message.parts if isinstance(p, (TextPart, ImagePart)))


def _thinking(message: AssistantMessage) -> str:
    return "".join(p.text for p in message.parts if p.kind == "thinking" and not p.redacted)


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


class _UniqueIds:
    """Call ids unique within a session (a model may reuse ``call_1`` every step), so that every
    tool message answers exactly one earlier call."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.tried: dict[str, int] = {}  # per id, the last suffix tried: a reused id costs one step, not one per use

    def fresh(self, call_id: str) -> str:
        base = call_id or "call"
        out, n = base, self.tried.get(base, 1)
        while out in self.seen:
            n += 1
            out = f"{base}_{n}"
        self.tried[base] = n
        self.seen.add(out)
        return out


class _Step:
    """The calls of the last assistant message and the results that answer them, in call order."""

    def __init__(self, calls: list[ToolCallPart], ids: _UniqueIds, at: float) -> None:
        self.calls = [(call, ids.fresh(call.id)) for call in calls]
        self.at = at
        self.results: dict[int, tuple[ToolResultMessage | None, float | None]] = {}

    def answer(self, result: ToolResultMessage, at: float) -> bool:
        for index, (call, _) in enumerate(self.calls):
            if call.id == result.tool_call_id and index not in self.results:
                self.results[index] = (result, at)
                return True
        return False

    def closed(self) -> list[tuple[ToolCallPart, str, ToolResultMessage | None, float | None]]:
        """Each call with its result (None: never answered) and when that was stored."""
        return [(call, new_id, *self.results.get(i, (None, None))) for i, (call, new_id) in enumerate(self.calls)]


# -- md and jsonl --------------------------------------------------------------------------


class _Markdown(_Writer):
    async def session(self, record: SessionRecord) -> bool:
        def text(raw: str) -> str:
            return self.cleaner.text(raw, record.cwd)

        if self.count:
            self.write("\n---\n\n")
        self.count += 1
        started = datetime.fromtimestamp(record.created_at).strftime("%Y-%m-%d %H:%M")
        self.write(
            f"# {text(record.title or 'Untitled session')}\n\n- id: `{record.id}`\n- project: `{text(record.cwd)}`\n- started: {started}\n\n"
        )
        async for stored in _messages(self.store, record.id):
            self.write(text(_markdown(stored.message)))
        return True


def _markdown(message: Message) -> str:
    out: list[str] = []
    if isinstance(message, UserMessage):
        out += ["## User", "", _user_text(message), ""]
    elif isinstance(message, AssistantMessage):
        out += ["## Assistant", ""] + ([message.text, ""] if message.text else [])
        for call in message.tool_calls:
            out += [f"**{call.name}**", "```json", json.dumps(call.arguments, indent=1, ensure_ascii=False), "```", ""]
    elif isinstance(message, ToolResultMessage):
        status = " (failed)" if message.is_error else ""
        out += [f"<details><summary>{message.tool_name} result{status}</summary>", "", "```", message.content, "```", "</details>", ""]
    elif isinstance(message, SummaryMessage):
        out += ["## Summary of the earlier conversation", "", message.text, ""]
    return "\n".join(out) + "\n"


class _Jsonl(_Writer):
    async def session(self, record: SessionRecord) -> bool:
        async for stored in _messages(self.store, record.id):
            message = self.clean(json.loads(dump_message(stored.message)), record)
            row = {"session_id": record.id, "seq": stored.seq, "created_at": stored.created_at, "message": message}
            self.write(self.dumps(row) + "\n")
        return True


# -- OpenAI chat fine-tuning ---------------------------------------------------------------


class _OpenAI(_Writer):
    """One line per session: ``{"messages": [...], "tools": [...], "parallel_tool_calls": true}``.

    Thinking is not part of the format and is left out; an interrupted reply is kept with
    ``"weight": 0`` (not trained on); a call never answered gets the tool message
    "Interrupted before a result." (what the agent itself sends a model in its place)."""

    async def session(self, record: SessionRecord) -> bool:
        if not await _has_assistant(self.store, record.id):
            return False
        first = True

        def emit(entry: dict[str, Any]) -> None:
            nonlocal first
            self.write(("" if first else ", ") + self.dumps(entry))
            first = False

        self.write('{"messages": [')
        system = record.meta.get(_PROMPT_KEY)
        if isinstance(system, str) and system:
            emit({"role": "system", "content": self.clean(system, record)})
        ids, parallel = _UniqueIds(), False
        used: dict[str, None] = {}
        step: _Step | None = None
        async for stored in _messages(self.store, record.id):
            message = stored.message
            if isinstance(message, ToolResultMessage):
                if step is not None:  # a result whose call is not the last message's is not part of the conversation
                    step.answer(message, stored.created_at)
                continue
            if step is not None:
                self._results(step, record, emit)
                step = None
            if isinstance(message, UserMessage):
                emit({"role": "user", "content": self.clean(_user_text(message), record)})
            elif isinstance(message, AssistantMessage) and (message.text or message.tool_calls):
                entry: dict[str, Any] = {"role": "assistant"}
                if message.text:
                    entry["content"] = self.clean(message.text, record)
                if message.tool_calls:
                    step = _Step(message.tool_calls, ids, stored.created_at)
                    entry["tool_calls"] = [self._call(call, new_id, record) for call, new_id in step.calls]
                    used.update(dict.fromkeys(call.name for call in message.tool_calls))
                    parallel = parallel or len(message.tool_calls) > 1
                if message.interrupted:
                    entry["weight"] = 0
                emit(entry)
        if step is not None:
            self._results(step, record, emit)
        tail = ""
        if used:
            tools = [{"type": "function", "function": self.clean(self.tool(name), record)} for name in used]
            tail += f', "tools": {self.dumps(tools)}'
        if parallel:
            tail += ', "parallel_tool_calls": true'
        self.write(f"]{tail}}}\n")
        return True

    def _call(self, call: ToolCallPart, new_id: str, record: SessionRecord) -> dict[str, Any]:
        arguments = self.dumps(self.clean(call.arguments, record))
        return {"id": new_id, "type": "function", "function": {"name": call.name, "arguments": arguments}}

    def _results(self, step: _Step, record: SessionRecord, emit: Callable[[dict[str, Any]], None]) -> None:
        for _, new_id, result, _ in step.closed():
            content = self.clean(result.content, record) if result is not None else INTERRUPTED
            emit({"role": "tool", "tool_call_id": new_id, "content": content})


# -- ShareGPT (LLaMA-Factory) --------------------------------------------------------------


class _ShareGPT(_Writer):
    """``[{"system": str, "conversations": [{"from", "value"}], "tools": str}, ...]``.

    LLaMA-Factory's converter drops a conversation unless ``human``/``observation`` stand at odd
    positions and ``gpt``/``function_call`` at even ones, ending on the model; so: consecutive
    prompts are joined, the tool steps of a turn that never reached an answer are left out (the
    other formats keep them), a reply's text beside its tool calls is left out (a
    ``function_call`` holds only calls), and the conversation ends on the last answer. The
    ``function_call`` value is ``{"name", "arguments"}`` as JSON (a JSON list for several calls);
    the ``observation`` is the result (a JSON list of results, in call order, for several)."""

    def begin(self) -> None:
        self.write("[")

    def end(self) -> None:
        self.write("\n]\n" if self.count else "]\n")

    async def session(self, record: SessionRecord) -> bool:
        convo = _Alternation()
        ids = _UniqueIds()
        used: dict[str, None] = {}
        step: _Step | None = None
        wrote = False

        def flush(entries: list[dict[str, str]]) -> None:
            nonlocal wrote
            for entry in entries:
                if not wrote:
                    self.write(("\n" if not self.count else ",\n") + self._head(record))
                    self.count += 1
                else:
                    self.write(", ")
                wrote = True
                self.write(self.dumps(entry))

        async for stored in _messages(self.store, record.id):
            message = stored.message
            if isinstance(message, ToolResultMessage):
                if step is not None:
                    step.answer(message, stored.created_at)
                continue
            if step is not None:
                flush(convo.add(*self._pair(step, record)))
                step = None
            if isinstance(message, UserMessage):
                flush(convo.add({"from": "human", "value": self.clean(_user_text(message), record)}))
            elif isinstance(message, AssistantMessage) and message.tool_calls:
                step = _Step(message.tool_calls, ids, stored.created_at)
                used.update(dict.fromkeys(call.name for call in message.tool_calls))
            elif isinstance(message, AssistantMessage) and message.text:
                flush(convo.add({"from": "gpt", "value": self.clean(message.text, record)}))
        if step is not None:
            flush(convo.add(*self._pair(step, record)))
        flush(convo.finish())
        if not wrote:
            return False
        tools = [self.clean(self.tool(name), record) for name in used]
        self.write("]" + (f', "tools": {self.dumps(self.dumps(tools))}' if tools else "") + "}")
        return True

    def _head(self, record: SessionRecord) -> str:
        system = record.meta.get(_PROMPT_KEY)
        head = f'{{"system": {self.dumps(self.clean(system, record))}, ' if isinstance(system, str) and system else "{"
        return head + '"conversations": ['

    def _pair(self, step: _Step, record: SessionRecord) -> tuple[dict[str, str], dict[str, str]]:
        closed = step.closed()
        calls = [{"name": call.name, "arguments": self.clean(call.arguments, record)} for call, _, _, _ in closed]
        results = [self.clean(result.content, record) if result is not None else INTERRUPTED for _, _, result, _ in closed]
        call_value = self.dumps(calls[0] if len(calls) == 1 else calls)
        result_value = results[0] if len(results) == 1 else self.dumps(results)
        return {"from": "function_call", "value": call_value}, {"from": "observation", "value": result_value}


class _Alternation:
    """Keeps a ShareGPT conversation valid while it streams: entries wait until a ``gpt`` answer
    closes them (a turn with no answer is never written), and the last answer waits in case the
    next one must be joined to it."""

    def __init__(self) -> None:
        self.pending: list[dict[str, str]] = []
        self.held: dict[str, str] | None = None

    def add(self, *entries: dict[str, str]) -> list[dict[str, str]]:
        """Take one entry (or a function_call with its observation); returns those now final."""
        role = entries[0]["from"]
        if role == "human":
            self.pending = [e for e in self.pending if e["from"] == "human"]  # a turn that never answered
            if self.pending:
                self.pending[-1] = {"from": "human", "value": self.pending[-1]["value"] + "\n\n" + entries[0]["value"]}
            else:
                self.pending.append(entries[0])
            return []
        if role == "function_call":
            if self.pending:  # after a prompt or an observation; right after an answer there is no place for it
                self.pending += entries
            return []
        if not self.pending:  # gpt right after gpt: one answer; before any prompt: dropped
            if self.held is not None:
                self.held = {"from": "gpt", "value": self.held["value"] + "\n\n" + entries[0]["value"]}
            return []
        final = ([self.held] if self.held else []) + self.pending
        self.held, self.pending = entries[0], []
        return final

    def finish(self) -> list[dict[str, str]]:
        """The held answer; whatever followed it had no answer and is left out."""
        held, self.held, self.pending = self.held, None, []
        return [held] if held else []


# -- trajectories --------------------------------------------------------------------------


class _Trajectory(_Writer):
    """One object a line per session; README "Exporting sessions" describes it and
    tests/export_schemas/trajectory.schema.json is its JSON Schema."""

    VERSION: ClassVar[int] = 1

    async def session(self, record: SessionRecord) -> bool:
        approvals = await _approvals(self.store, record)
        self.write(self.dumps({"format": "hermes-editor.trajectory", "version": self.VERSION})[:-1])
        self.write(f', "session": {self.dumps(await self._meta(record))}')
        system = record.meta.get(_PROMPT_KEY)
        self.write(f', "system": {self.dumps(self.clean(system, record) if isinstance(system, str) else None)}, "steps": [')
        index, counts = 0, {"steps": 0, "tool_calls": 0, "failed_tool_calls": 0}
        ids = _UniqueIds()
        step: tuple[dict[str, Any], _Step] | None = None
        previous_at: float | None = None

        def emit(entry: dict[str, Any]) -> None:
            nonlocal index
            self.write(("" if index == 0 else ", ") + self.dumps({"index": index, **entry}))
            index += 1

        async for stored in _messages(self.store, record.id):
            message, at = stored.message, stored.created_at
            if isinstance(message, ToolResultMessage):
                if step is not None:
                    step[1].answer(message, at)
                previous_at = at
                continue
            if step is not None:
                emit(self._close(step, approvals, counts, record))
                step = None
            if isinstance(message, UserMessage):
                emit({"kind": "user", "seq": stored.seq, "at": _iso(at), "text": self.clean(_user_text(message), record)})
            elif isinstance(message, SummaryMessage):
                emit({"kind": "summary", "seq": stored.seq, "at": _iso(at), "text": self.clean(message.text, record)})
            elif isinstance(message, AssistantMessage):
                entry = {
                    "kind": "model",
                    "seq": stored.seq,
                    "model": message.model,
                    "started_at": _iso(previous_at),
                    "finished_at": _iso(at),
                    "duration_s": _seconds(previous_at, at),
                    "text": self.clean(message.text, record),
                    "thinking": self.clean(_thinking(message), record),
                    "interrupted": message.interrupted,
                }
                step = (entry, _Step(message.tool_calls, ids, at))
            previous_at = at
        if step is not None:
            emit(self._close(step, approvals, counts, record))
        counts["steps"] = index
        self.write(f'], "counts": {self.dumps(counts)}}}\n')
        return True

    async def _meta(self, record: SessionRecord) -> dict[str, Any]:
        outcome, stop_reason = await _session_end(self.store, record)
        return {
            "id": record.id,
            "title": self.clean(record.title, record) if record.title else None,
            "project": self.clean(record.cwd, record),
            "surface": record.surface,
            "model": record.model,
            "parent_id": record.parent_id,
            "parent_call_id": record.parent_call_id,
            "created_at": _iso(record.created_at),
            "updated_at": _iso(record.updated_at),
            "outcome": outcome,
            "stop_reason": stop_reason,
            "usage": {
                "input_tokens": record.input_tokens,
                "output_tokens": record.output_tokens,
                "cache_read_tokens": record.cache_read_tokens,
                "cache_write_tokens": record.cache_write_tokens,
                "cost_usd": record.cost_usd,
            },
        }

    def _close(
        self, step: tuple[dict[str, Any], _Step], approvals: Approvals, counts: dict[str, int], record: SessionRecord
    ) -> dict[str, Any]:
        entry, calls = step
        out = []
        for call, new_id, result, finished in calls.closed():
            failed = result is None or result.is_error
            counts["tool_calls"] += 1
            counts["failed_tool_calls"] += failed
            one: dict[str, Any] = {
                "id": new_id,
                "name": call.name,
                "arguments": self.clean(call.arguments, record),
                "status": "failed" if failed else "completed",
                "result": self.clean(result.content, record) if result is not None else None,
                "started_at": _iso(calls.at),
                "finished_at": _iso(finished),
                "duration_s": _seconds(calls.at, finished),
                "approval": approvals.get((call.id, call.name)),
                "files_changed": [self.clean(d.path, record) for d in result.diffs] if result is not None else [],
            }
            if call.invalid_arguments is not None:
                one["invalid_arguments"] = self.clean(call.invalid_arguments, record)
            out.append(one)
        return {**entry, "tool_calls": out}


def _seconds(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else round(max(0.0, end - start), 3)


_WRITERS: dict[str, type[_Writer]] = {
    "md": _Markdown,
    "jsonl": _Jsonl,
    "sharegpt": _ShareGPT,
    "openai": _OpenAI,
    "trajectory": _Trajectory,
}
