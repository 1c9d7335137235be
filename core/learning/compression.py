"""Automatic context compression: cut tool outputs to a budget, prune old ones, then summarise.

The stored history is never rewritten. A :class:`Compression` says how requests are built
from it: the first user message (the head), a summary of everything up to ``tail_from``, and
the messages from ``tail_from`` on; tool outputs before ``prune_before`` are cut to a stub, those
before ``clip_before`` to ``clip_chars`` characters (head and tail, with a marker), and every later
one to the window's output budget (:class:`Budget`). Stubs and markers say how to read the whole
output back from the store (``session_search`` with ``session_id``, ``seq``, ``offset`` and
``limit``). The summary is kept in a new session linked to its parent (``parent_id``), and the
parent's ``meta["compression"]`` points at it, so a reopened session builds the same requests.
The editor's session id never changes.

Budgets, in tokens by :func:`estimate_tokens`: no request passes ``compress_at`` of the window;
a compression brings the request down to a target well below that (about 30% of the room left
by the system prompt and tool schemas), and a tool output is cut when it arrives so that several
steps fit between the target and the limit. Between compressions every request repeats the
previous one as its prefix: a message is shown the same way from the step it arrives on.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Protocol

from core.events import Event, Notice
from core.learning.screening import redact_secrets
from core.learning_config import LearningSettings
from core.messages import (
    AssistantMessage,
    Message,
    SummaryMessage,
    TextPart,
    ToolResultMessage,
    UserMessage,
    dump_message,
    repair_history,
)
from core.models.base import ModelRequest, ResponseDone, ToolSpec
from core.store import SessionStore, Surface

__all__ = [
    "SUMMARY_PROMPT",
    "Budget",
    "Compression",
    "Conversation",
    "Summariser",
    "choose_cut",
    "compress",
    "cut_output",
    "estimate_tokens",
    "message_sizes",
    "prune_outputs",
    "reply_tokens",
    "request_view",
    "shown_history",
    "summarise",
    "summary_request",
]

SUMMARY_PROMPT = (
    "Summarise the conversation above for your own later use; it will replace those messages. Keep: the user's "
    "goals and constraints, decisions and why, files changed (paths), commands run and their results, errors and "
    "how they were solved, and what is left to do. Be concise and specific. Reply with the summary only."
)
CHARS_PER_TOKEN = 3.5
PRUNED = "[tool output pruned to save context: {n} characters; the whole output is kept: {read}]"
CUT = "\n[… tool output cut to save context: characters {start}-{end} of {total} left out here; the whole output is kept: {read}]\n"
CUT_PROMPT = (
    "\n[… message cut to fit the context window: characters {start}-{end} of {total} left out here; the whole message is kept: {read}]\n"
)
READ_BACK = 'session_search(session_id="{sid}", seq={seq}, offset={offset}, limit={limit}) reads {what}'
_KEEP_OUTPUT = 400
_HEAD_CHARS = 4000
_MIN_CLIP = 300  # characters of an output kept at the least when it is cut (head and tail)


@dataclass(slots=True)
class Compression:
    """How to build requests from a long history (persisted in the session's meta)."""

    tail_from: int = 0  # history index of the first message kept after the summary
    prune_before: int = 0  # tool outputs before this index are stubs
    summary: str = ""
    summary_session: str | None = None
    clip_before: int = 0  # tool outputs from prune_before to here are cut to clip_chars (0: not cut)
    clip_chars: int = 0
    head_chars: int = _HEAD_CHARS  # of the first user message, above the summary

    def to_meta(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_meta(cls, raw: object) -> Compression | None:
        if not isinstance(raw, dict):
            return None
        try:
            return cls(**{f.name: raw[f.name] for f in fields(cls) if f.name in raw})
        except TypeError:
            return None


@dataclass(frozen=True, slots=True)
class Budget:
    """A session's token budgets, from its context window and the fixed part of every request
    (system prompt and tool schemas)."""

    window: int
    limit: int  # no request's input passes this (``compress_at`` of the window)
    fixed: int
    target: int  # a compression brings a request down to this
    output_chars: int  # a tool output is cut to this many characters (0: never)
    head_chars: int  # of the first user message shown above a summary
    summary_tokens: int  # the longest summary asked for
    # A user message's text is cut to this many characters (0: never): half the room the fixed
    # part leaves, so that a pasted log or file cannot by itself carry a request past the limit.
    prompt_chars: int = 0

    @classmethod
    def of(cls, settings: LearningSettings, window: int, fixed: int) -> Budget:
        if window <= 0:
            return cls(0, 0, fixed, 0, 0, _HEAD_CHARS, 4096, 0)
        # The wire wraps each tool schema and call in a little more JSON than the estimate counts.
        limit = int(settings.compress_at * window) - fixed // 10
        room = max(limit - fixed, limit // 4)  # a window the fixed part nearly fills still gets some
        target = limit - room * 7 // 10
        # Five steps of one output each between the target and the limit (a step's call, the
        # marker and the JSON around an output take about 120 tokens).
        per_step = (limit - target) // 5
        output_chars = max(int((per_step - 120) * CHARS_PER_TOKEN), 2 * _MIN_CLIP)
        head_chars = min(_HEAD_CHARS, max(int(room * CHARS_PER_TOKEN) // 10, 200))
        prompt_chars = max(int(room * CHARS_PER_TOKEN) // 2, 2 * _MIN_CLIP)
        return cls(window, limit, fixed, target, output_chars, head_chars, min(4096, max(room // 5, 256)), prompt_chars)

    def reply_tokens(self, max_tokens: int) -> int:
        """The ``max_tokens`` of a request: what the window leaves above the input limit."""
        return min(max_tokens, self.reply_room) if self.window else max_tokens

    @property
    def reply_room(self) -> int:
        """The most a reply may take: what the window leaves above the input limit (0: no window)."""
        return max(self.window - self.limit - self.fixed // 10, 1) if self.window else 0


class MessageSizes:
    """Serialised sizes of messages by identity, so a step measures only what is new.

    Entries hold weak references: an id reused by a later object is never taken for the old one.
    Messages in a history are never changed in place, so a size measured once stays true.
    """

    def __init__(self, limit: int = 8192) -> None:
        self.limit = limit
        self.measured = 0  # messages serialised so far; a cached one costs nothing
        self._entries: dict[int, tuple[weakref.ref[Message], int]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def size(self, message: Message) -> int:
        entry = self._entries.get(id(message))
        if entry is not None and entry[0]() is message:
            return entry[1]
        # A tool result's diffs are for the user's eyes (the editor shows them); requests never
        # carry them, so they are not counted (a written file would count twice, an edit more).
        sent = message.model_copy(update={"diffs": []}) if isinstance(message, ToolResultMessage) and message.diffs else message
        size = len(dump_message(sent))
        self.measured += 1
        if len(self._entries) >= self.limit:
            live = {k: v for k, v in self._entries.items() if v[0]() is not None}
            self._entries = live if len(live) < self.limit // 2 else {}
        self._entries[id(message)] = (weakref.ref(message), size)
        return size


message_sizes = MessageSizes()
# Tool specs are few and live as long as their agent; strong references keep their ids unique.
_spec_sizes: dict[int, tuple[object, int]] = {}


def _spec_size(spec: object) -> int:
    entry = _spec_sizes.get(id(spec))
    if entry is not None and entry[0] is spec:
        return entry[1]
    if is_dataclass(spec) and not isinstance(spec, type):
        shape: object = {f.name: getattr(spec, f.name) for f in fields(spec)}
    else:
        shape = getattr(spec, "__dict__", str(spec))
    size = len(json.dumps(shape, default=str))
    if len(_spec_sizes) >= 1024:
        _spec_sizes.clear()
    _spec_sizes[id(spec)] = (spec, size)
    return size


def estimate_tokens(system: str, tools: list[ToolSpec], messages: list[Message]) -> int:
    """A conservative token estimate (about 3.5 characters a token for English and code).

    Counts the characters of the system prompt, of the tool specs as a JSON list, and of each
    message as stored; sizes are cached, so a step serialises only the messages new to it.
    """
    size = _fixed_chars(system, tools) + sum(message_sizes.size(m) for m in messages)
    return int(size / 3.5)


def _fixed_chars(system: str, tools: list[ToolSpec]) -> int:
    # len(json.dumps(list)) without building it: "[" + items joined by ", " + "]".
    return len(system) + 2 + sum(_spec_size(t) for t in tools) + 2 * max(len(tools) - 1, 0)


@dataclass(slots=True)
class _KeptView:
    """A session's request view and the size of its messages, extended as its history grows."""

    history: list[Message]
    state: Compression | None
    output_chars: int
    prompt_chars: int
    length: int
    last: Message | None
    view: list[Message]
    chars: int


_views: dict[str, _KeptView] = {}


def _current_view(session: Conversation, output_chars: int, prompt_chars: int = 0) -> tuple[list[Message], int]:
    """The session's request view (a new list) and its messages' characters: built once, then
    extended by the messages a step adds while the compression and the budget stay the same."""
    history, state = session.history, session.compression
    kept = _views.get(session.id)
    if (
        kept is not None
        and kept.history is history
        and kept.state is state
        and kept.output_chars == output_chars
        and kept.prompt_chars == prompt_chars
        and kept.length <= len(history)
        and (kept.last is None or history[kept.length - 1] is kept.last)
    ):
        shown_state = state or Compression()
        new = [_show(history[i], i, shown_state, session.id, output_chars, prompt_chars) for i in range(kept.length, len(history))]
        kept.view.extend(new)
        kept.chars += sum(message_sizes.size(m) for m in new)
    else:
        view = request_view(history, state, session_id=session.id, output_chars=output_chars, prompt_chars=prompt_chars)
        view = view if view is not history else list(history)
        kept = _KeptView(history, state, output_chars, prompt_chars, 0, None, view, sum(message_sizes.size(m) for m in view))
        _views.pop(session.id, None)
        if len(_views) >= 64:  # the sessions stepped most recently; a closed one's history goes
            _views.pop(next(iter(_views)))
        _views[session.id] = kept
    kept.length = len(history)
    kept.last = history[-1] if history else None
    return list(kept.view), kept.chars


def _read_back(session_id: str, index: int, offset: int, length: int, chunk: int, what: str) -> str:
    limit = min(length, max(chunk, 200))
    text = READ_BACK.format(sid=session_id, seq=index + 1, offset=offset, limit=limit, what=what)
    return text + (" (each answer says where the next part starts)" if length > limit else "")


def cut_output(content: str, chars: int, *, session_id: str, index: int, chunk: int, template: str = CUT) -> str:
    """``content`` cut to about ``chars`` characters, its head and its tail, on line ends where it
    can; the marker between them (``template``) says which characters were left out and how to read them."""
    if len(content) <= chars:
        return content
    keep = max(chars, _MIN_CLIP)
    head_end = keep * 2 // 3
    tail_start = len(content) - (keep - head_end)
    newline = content.rfind("\n", 0, head_end)
    if newline > head_end // 2:
        head_end = newline + 1
    newline = content.find("\n", tail_start)
    if newline != -1 and newline + 1 < len(content) and newline - tail_start < (keep - head_end) // 2:
        tail_start = newline + 1
    left_out = tail_start - head_end
    read = _read_back(session_id, index, head_end, left_out, chunk, "them")
    marker = template.format(start=head_end + 1, end=tail_start, total=len(content), read=read)
    return content[:head_end] + marker + content[tail_start:]


def stub_output(content: str, *, session_id: str, index: int, chunk: int) -> str:
    return PRUNED.format(n=len(content), read=_read_back(session_id, index, 0, len(content), chunk, "it"))


class _Shown:
    """Messages as requests show them (tool results stubbed or cut, long user messages cut), made
    once per message and way of showing: the same object every step keeps the request bytes and
    the size cache stable."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._entries: dict[int, tuple[weakref.ref[Message], tuple[object, ...], Message]] = {}

    def get(self, message: Message, key: tuple[object, ...], make: Callable[[], Message]) -> Message:
        entry = self._entries.get(id(message))
        if entry is not None and entry[0]() is message and entry[1] == key:
            return entry[2]
        shown = make()
        if len(self._entries) >= self.limit:
            self._entries = {k: v for k, v in self._entries.items() if v[0]() is not None}
            if len(self._entries) >= self.limit // 2:
                self._entries = {}
        self._entries[id(message)] = (weakref.ref(message), key, shown)
        return shown


_shown = _Shown()
_openings: dict[tuple[str, str], Message] = {}


def _show(message: Message, index: int, state: Compression, session_id: str, output_chars: int, prompt_chars: int = 0) -> Message:
    """One message of the history as requests show it."""
    chunk = (output_chars or 4000) - 400
    if isinstance(message, UserMessage):
        if not prompt_chars or len(message.text) <= prompt_chars:
            return message
        key: tuple[object, ...] = ("prompt", session_id, index, prompt_chars, chunk)
        return _shown.get(message, key, lambda: _cut_prompt(message, prompt_chars, session_id=session_id, index=index, chunk=chunk))
    if not isinstance(message, ToolResultMessage):
        return message
    content = message.content
    if index < state.prune_before:
        if len(content) <= _KEEP_OUTPUT:
            return message
        key = ("stub", session_id, index, chunk)
        return _shown.get(
            message, key, lambda: _with_content(message, stub_output(content, session_id=session_id, index=index, chunk=chunk))
        )
    chars = state.clip_chars if index < state.clip_before else output_chars
    if not chars or len(content) <= chars:
        return message
    key = ("cut", session_id, index, chars, chunk)
    return _shown.get(
        message, key, lambda: _with_content(message, cut_output(content, chars, session_id=session_id, index=index, chunk=chunk))
    )


def _with_content(message: ToolResultMessage, content: str) -> Message:
    return message.model_copy(update={"content": content, "diffs": []})


def _cut_prompt(message: UserMessage, chars: int, *, session_id: str, index: int, chunk: int) -> Message:
    """A user message whose text is cut to about ``chars`` characters (head and tail, the marker
    between them naming the part left out); its images stay, after the text."""
    text = cut_output(message.text, chars, session_id=session_id, index=index, chunk=chunk, template=CUT_PROMPT)
    images = [p for p in message.parts if not isinstance(p, TextPart)]
    return UserMessage(parts=[TextPart(text=text), *images])


def prune_outputs(messages: list[Message], before: int, *, session_id: str = "") -> list[Message]:
    """Tool results before index ``before`` cut to a stub (copies; the history is untouched)."""
    state = Compression(prune_before=before)
    return [_show(m, i, state, session_id, 0) for i, m in enumerate(messages)]


def request_view(
    history: list[Message], state: Compression | None, *, session_id: str = "", output_chars: int = 0, prompt_chars: int = 0
) -> list[Message]:
    """The messages a request is built from (before ``repair_history``); tool outputs past the
    compression's cuts are cut to ``output_chars``, user messages to ``prompt_chars`` (0: shown whole)."""
    if state is None:
        if not output_chars and not prompt_chars:
            return history
        state = Compression()
    summarised = bool(state.summary) and state.tail_from > 0
    start = state.tail_from if summarised else 0
    tail = [_show(history[i], i, state, session_id, output_chars, prompt_chars) for i in range(start, len(history))]
    if not summarised:
        return tail
    head = _head_text(history)[: state.head_chars]
    key = (head, state.summary)
    opening = _openings.get(key)
    if opening is None:
        if len(_openings) > 64:
            _openings.clear()
        opening = _openings[key] = UserMessage.of(
            f"{head}\n\n<summary of the conversation since this request (earlier messages were compressed)>\n{state.summary}\n</summary>"
        )
    if tail and isinstance(tail[0], UserMessage):
        # Two user messages in a row are refused by some providers: a stand-in reply separates them.
        return [opening, _STAND_IN, *tail]
    return [opening, *tail]


_STAND_IN = AssistantMessage(parts=[TextPart(text="Understood; continuing from the summary.")])


def _head_text(history: list[Message]) -> str:
    for message in history:
        if isinstance(message, UserMessage):
            return message.text[:_HEAD_CHARS]
        if isinstance(message, SummaryMessage):
            return ""
    return ""


def choose_cut(history: list[Message], keep_tail: int, current: int = 0) -> int | None:
    """Where the verbatim tail starts: about ``keep_tail`` messages from the end, on a user or
    assistant message (never between a tool call and its result); None when nothing would shrink."""
    start = max(len(history) - keep_tail, 1)
    for index in range(start, 0, -1):
        if isinstance(history[index], (UserMessage, AssistantMessage)):
            return index if index > max(current, 1) else None
    return None


def _boundaries(history: list[Message], start: int) -> list[int]:
    """Indexes from ``start`` on where a tail may begin (a user or assistant message)."""
    return [i for i in range(max(start, 1), len(history)) if isinstance(history[i], (UserMessage, AssistantMessage))]


def summary_request(view: list[Message], system: str = "", limit: int = 0) -> list[Message]:
    """The messages for the summarising request: outputs pruned, long texts clipped, secrets
    masked; with ``limit``, the oldest messages after the first are left out until it fits."""
    out: list[Message] = []
    for message in prune_outputs(view, len(view)):
        if isinstance(message, UserMessage) and len(message.text) > 6000:
            message = UserMessage.of(message.text[:3000] + "\n[…]\n" + message.text[-2000:])
        out.append(message)
    prompt = SUMMARY_PROMPT
    if limit:
        dropped = 0
        while len(out) > 2 and estimate_tokens(system, [], [*out, UserMessage.of(prompt)]) > limit:
            out.pop(1)
            dropped += 1
            # What remains must still pair each tool result with its call.
            while len(out) > 1 and isinstance(out[1], ToolResultMessage):
                out.pop(1)
                dropped += 1
        if dropped:
            prompt += f" ({dropped} messages after the first were left out of this request to fit the context window.)"
    if out and isinstance(out[-1], UserMessage):
        merged = out[-1].text + "\n\n" + prompt
        return [*out[:-1], UserMessage.of(merged)]
    return [*out, UserMessage.of(prompt)]


def clean_summary(text: str) -> str:
    return redact_secrets(text.strip())


@dataclass(frozen=True, slots=True)
class Summariser:
    """What compression works with: the store, the settings, and a request with the session's model
    whose usage is charged to the session."""

    store: SessionStore
    settings: LearningSettings
    request: Callable[[ModelRequest], Awaitable[ResponseDone | None]]
    model: str  # the name of the model ``request`` streams from
    surface: Surface
    max_tokens: int


class Conversation(Protocol):
    """The parts of a session compression reads, and ``compression``, which it sets."""

    id: str
    cwd: Path
    title: str | None
    system: str
    history: list[Message]
    compression: Compression | None
    context_window: int


async def compress(
    summariser: Summariser, session: Conversation, emit: Callable[[Event], Awaitable[None]], *, specs: list[ToolSpec], force: bool = False
) -> bool:
    """Shrink what the next request carries when it would pass the configured share of the
    context window (or always, with ``force``), down to the budget's target: prune and cut tool
    outputs first; summarise only when that is not enough. True when requests got smaller."""
    settings = summariser.settings
    history, sid = session.history, session.id
    fixed = estimate_tokens(session.system, specs, [])
    budget = Budget.of(settings, session.context_window, fixed)

    def size(state: Compression | None) -> int:
        # Without repair_history: it only adds results to calls a crash left unanswered.
        view = request_view(history, state, session_id=sid, output_chars=budget.output_chars, prompt_chars=budget.prompt_chars)
        return estimate_tokens(session.system, specs, view)

    shown = _current_view(session, budget.output_chars, budget.prompt_chars)[1]
    current = int((_fixed_chars(session.system, specs) + shown) / CHARS_PER_TOKEN)
    if not budget.window:
        if not force:
            return False
        # The provider said the request was too long: take its size for the window.
        budget = Budget.of(settings, int(current / settings.compress_at), fixed)
    elif not force and current <= budget.limit:
        return False
    state = session.compression or Compression(head_chars=budget.head_chars)
    cut = max(choose_cut(history, settings.compress_keep_tail) or 0, state.prune_before, 1)

    steps = _boundaries(history, cut)
    last_step = steps[-1] if steps else len(history)

    def fit(base: Compression, last: int, *, keep_last: bool = False) -> Compression | None:
        """``base`` with tool outputs pruned from ``base.prune_before`` (or a later step, up to
        ``last``) and cut to the most characters that bring the request to the target; the
        last step's outputs stay as they arrived unless nothing fits otherwise (or ``keep_last``)."""
        for clip_before in (last_step,) if keep_last else (last_step, len(history)):
            prunes = [p for p in _boundaries(history, base.prune_before) if p <= min(last, clip_before)]
            for prune in prunes or [base.prune_before]:
                plan = replace(base, prune_before=prune, clip_before=clip_before, clip_chars=budget.output_chars)
                if size(plan) <= budget.target:
                    return plan
                low, high = _MIN_CLIP, budget.output_chars
                if size(replace(plan, clip_chars=low)) > budget.target:
                    continue
                while high - low > 50:
                    middle = (low + high) // 2
                    low, high = (middle, high) if size(replace(plan, clip_chars=middle)) <= budget.target else (low, middle)
                return replace(plan, clip_chars=low)
        return None

    # Pruning and cutting alone, keeping at least the last step: no model request.
    pruned = fit(replace(state, prune_before=cut), last_step)
    if pruned is not None and size(pruned) < current:
        session.compression = pruned
        await summariser.store.update_session(sid, meta={"compression": pruned.to_meta()})
        await emit(Notice("Context compressed: old tool outputs were pruned or cut in requests (kept whole in the session).", "info"))
        return True
    # Summarise: the longest tail whose last step fits whole beside a summary of half the longest asked for.
    stand_in = "x" * int(budget.summary_tokens * CHARS_PER_TOKEN / 2)
    cuts = [c for c in steps if c > state.tail_from][: settings.compress_keep_tail]
    for cut in cuts:
        if fit(Compression(cut, cut, stand_in, head_chars=state.head_chars), len(history), keep_last=True) is not None:
            break
    if cut <= state.tail_from:
        return False
    made = await summarise(summariser, session, cut, budget=budget)
    if made is None:
        return False
    summarised = session.compression or Compression()
    final = fit(summarised, len(history)) or replace(summarised, clip_before=len(history), clip_chars=_MIN_CLIP)
    session.compression = final
    await summariser.store.update_session(sid, meta={"compression": final.to_meta()})
    await emit(Notice(f"Context compressed: {cut} earlier messages summarised (summary kept in session {made[1][:8]}).", "info"))
    return True


async def summarise(summariser: Summariser, session: Conversation, cut: int, *, budget: Budget | None = None) -> tuple[str, str] | None:
    """Summarise ``session.history[:cut]`` (after any earlier summary) into a linked child
    session and make requests start from it: (summary, child session id); None when the model
    gave no summary. The stored history is untouched."""
    state = session.compression or Compression()
    budget = budget or Budget.of(summariser.settings, session.context_window, 0)
    view = repair_history(request_view(session.history[:cut], state, session_id=session.id))
    reply = min(summariser.max_tokens, budget.summary_tokens)
    limit = max(budget.limit - reply, 0) if budget.window else 0
    request = ModelRequest(system=session.system, messages=summary_request(view, session.system, limit), max_tokens=reply)
    done = await summariser.request(request)
    if done is None or not done.message.text.strip():
        return None
    summary = clean_summary(done.message.text)
    store = summariser.store
    child = await store.create_session(
        cwd=str(session.cwd),
        surface=summariser.surface,
        model=summariser.model,
        title=f"{session.title or 'session'} (summary)",
        parent_id=session.id,
    )
    await store.append_message(child.id, SummaryMessage(text=summary, model=summariser.model))
    head_chars = budget.head_chars if budget.window else state.head_chars
    session.compression = Compression(cut, cut, summary, child.id, head_chars=head_chars)
    await store.update_session(session.id, meta={"compression": session.compression.to_meta()})
    return summary, child.id


def shown_history(session: Conversation, specs: list[ToolSpec], settings: LearningSettings) -> list[Message]:
    """The session's history as its next request shows it (before ``repair_history``): the
    compression applied and every tool output within the window's budget."""
    budget = Budget.of(settings, session.context_window, estimate_tokens(session.system, specs, []))
    return _current_view(session, budget.output_chars, budget.prompt_chars)[0]


def reply_tokens(session: Conversation, settings: LearningSettings, max_tokens: int) -> int:
    """The ``max_tokens`` of the session's next request: no more than its window leaves."""
    return Budget.of(settings, session.context_window, 0).reply_tokens(max_tokens)


def reply_room(session: Conversation, settings: LearningSettings) -> int:
    """The most output tokens the session's window leaves a reply (0: the window is unknown)."""
    return Budget.of(settings, session.context_window, 0).reply_room
