"""Automatic context compression: prune old tool outputs, then summarise the middle.

The stored history is never rewritten. A :class:`Compression` says how requests are built
from it: the first user message (the head), a summary of everything up to ``tail_from``, and
the messages from ``tail_from`` on verbatim; tool outputs before ``prune_before`` are cut to
a stub. The summary is kept in a new session linked to its parent (``parent_id``), and the
parent's ``meta["compression"]`` points at it, so a reopened session builds the same requests.
The editor's session id never changes.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, fields, is_dataclass
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
    "Compression",
    "Conversation",
    "Summariser",
    "choose_cut",
    "compress",
    "estimate_tokens",
    "message_sizes",
    "prune_outputs",
    "request_view",
    "summarise",
    "summary_request",
]

SUMMARY_PROMPT = (
    "Summarise the conversation above for your own later use; it will replace those messages. Keep: the user's "
    "goals and constraints, decisions and why, files changed (paths), commands run and their results, errors and "
    "how they were solved, and what is left to do. Be concise and specific. Reply with the summary only."
)
PRUNED = "[tool output pruned to save context: {n} characters; run the tool again if you need it]"
_KEEP_OUTPUT = 400


@dataclass(slots=True)
class Compression:
    """How to build requests from a long history (persisted in the session's meta)."""

    tail_from: int = 0  # history index of the first message kept verbatim
    prune_before: int = 0  # tool outputs before this index are stubs
    summary: str = ""
    summary_session: str | None = None

    def to_meta(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_meta(cls, raw: object) -> Compression | None:
        if not isinstance(raw, dict):
            return None
        try:
            return cls(**{k: raw[k] for k in ("tail_from", "prune_before", "summary", "summary_session") if k in raw})
        except TypeError:
            return None


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
        size = len(dump_message(message))
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
    # len(json.dumps(list)) without building it: "[" + items joined by ", " + "]".
    size = len(system) + 2 + sum(_spec_size(t) for t in tools) + 2 * max(len(tools) - 1, 0)
    size += sum(message_sizes.size(m) for m in messages)
    return int(size / 3.5)


def prune_outputs(messages: list[Message], before: int) -> list[Message]:
    """Tool results before index ``before`` cut to a stub (copies; the history is untouched)."""
    out: list[Message] = []
    for index, message in enumerate(messages):
        if index < before and isinstance(message, ToolResultMessage) and len(message.content) > _KEEP_OUTPUT:
            message = message.model_copy(update={"content": PRUNED.format(n=len(message.content)), "diffs": []})
        out.append(message)
    return out


def request_view(history: list[Message], state: Compression | None) -> list[Message]:
    """The messages a request is built from (before ``repair_history``)."""
    if state is None:
        return history
    pruned = prune_outputs(history, state.prune_before)
    if not state.summary or state.tail_from <= 0:
        return pruned
    head = _head_text(history)
    opening = UserMessage.of(
        f"{head}\n\n<summary of the conversation since this request (earlier messages were compressed)>\n{state.summary}\n</summary>"
    )
    tail = pruned[state.tail_from :]
    if tail and isinstance(tail[0], UserMessage):
        # Two user messages in a row are refused by some providers: a stand-in reply separates them.
        return [opening, AssistantMessage(parts=[TextPart(text="Understood; continuing from the summary.")]), *tail]
    return [opening, *tail]


def _head_text(history: list[Message]) -> str:
    for message in history:
        if isinstance(message, UserMessage):
            return message.text[:4000]
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


def summary_request(view: list[Message]) -> list[Message]:
    """The messages for the summarising request: outputs pruned, long texts clipped, secrets masked."""
    out: list[Message] = []
    for message in prune_outputs(view, len(view)):
        if isinstance(message, UserMessage) and len(message.text) > 6000:
            message = UserMessage.of(message.text[:3000] + "\n[…]\n" + message.text[-2000:])
        out.append(message)
    if out and isinstance(out[-1], UserMessage):
        merged = out[-1].text + "\n\n" + SUMMARY_PROMPT
        return [*out[:-1], UserMessage.of(merged)]
    return [*out, UserMessage.of(SUMMARY_PROMPT)]


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
    context window (or always, with ``force``). Prunes tool outputs first; summarises only when
    that is not enough. True when requests got smaller."""
    settings = summariser.settings
    window = session.context_window
    threshold = settings.compress_at * window

    def over() -> bool:
        view = repair_history(request_view(session.history, session.compression))
        return force or (bool(window) and estimate_tokens(session.system, specs, view) > threshold)

    if not over():
        return False
    state = session.compression or Compression()
    cut = choose_cut(session.history, settings.compress_keep_tail, state.tail_from)
    if cut is None:
        return False
    if state.prune_before < cut:
        session.compression = Compression(state.tail_from, cut, state.summary, state.summary_session)
        if not over():
            await summariser.store.update_session(session.id, meta={"compression": session.compression.to_meta()})
            await emit(Notice("Context compressed: old tool outputs were pruned from requests.", "info"))
            return True
    made = await summarise(summariser, session, cut)
    if made is None:
        return False
    await emit(Notice(f"Context compressed: {cut} earlier messages summarised (summary kept in session {made[1][:8]}).", "info"))
    return True


async def summarise(summariser: Summariser, session: Conversation, cut: int) -> tuple[str, str] | None:
    """Summarise ``session.history[:cut]`` (after any earlier summary) into a linked child
    session and make requests start from it: (summary, child session id); None when the model
    gave no summary. The stored history is untouched."""
    state = session.compression or Compression()
    view = repair_history(request_view(session.history[:cut], state))
    request = ModelRequest(system=session.system, messages=summary_request(view), max_tokens=min(summariser.max_tokens, 4096))
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
    session.compression = Compression(cut, cut, summary, child.id)
    await store.update_session(session.id, meta={"compression": session.compression.to_meta()})
    return summary, child.id
