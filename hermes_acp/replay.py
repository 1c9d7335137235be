"""A stored conversation as ACP session updates, for ``session/load``.

Built only from what was persisted, so what replays is exactly what was saved. The store is
read a page at a time (the next while this one's updates are sent), so a long session replays
in bounded memory.

A replay sends tens of thousands of updates, so each is written straight as its JSON text from
the message's stored JSON: no models are built, neither the messages' nor the SDK's. The text is
what the SDK would send for its models (``serialize_params``: aliases, no None or default
fields, ``oldText: null`` for a new file), encoded as the transport encodes a message (compact,
not ASCII-escaped); ``tests/hermes_acp/test_replay_bytes.py`` holds it to that byte for byte.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from json.encoder import encode_basestring
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_core import from_json

from core.events import DiffContent, Notice, TerminalContent, TextContent, ToolContent
from core.host.processes import is_background_note, notice_of_note
from core.messages import AssistantMessage, Message, ToolCallPart, ToolResultMessage, UserMessage, dump_message, load_message
from core.tools.dispatch import shown_path
from core.tools.registry import Tool

if TYPE_CHECKING:
    from core.store import SessionStore

__all__ = ["FIRST_PAGE", "PAGE", "PAGE_CHARS", "Replay", "replay_updates", "send_replay", "subagent_content"]

MAX_REPLAYED_OUTPUT = 4000
# Messages read from the store at a time, at most; and about how many characters of their
# stored JSON (large messages make shorter pages: whole tool outputs, files in diffs, images).
# The first page is shorter: the size of the messages is not known yet.
PAGE = 500
PAGE_CHARS = 2_000_000
FIRST_PAGE = 50

Update = dict[str, Any]
# A JSON string, as the transport's encoder writes one (the C function it uses itself).
_str = encode_basestring
# Any other JSON value, as the transport writes it.
_value = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode

_COMPACTED = "\n\n*Earlier conversation compacted into a summary.*\n\n"
_INTERRUPTED = ',"status":"failed","rawOutput":{"output":"Interrupted before a result."},"sessionUpdate":"tool_call_update"}'


class Replay:
    """Every update the user saw, in order, message by message: their messages, replies,
    thoughts, tool calls, plans; each as its JSON text.

    ``extra``: content shown at the end of a tool call besides its own (a delegate call's
    subagents); ``host``: the session's host, which names the paths diffs show."""

    def __init__(self, tools: dict[str, Tool], cwd: Path, extra: Mapping[str, list[ToolContent]] | None = None, *, host: object = None):
        self._tools = tools
        self._cwd = cwd
        self._extra = extra or {}
        self._host = host
        # Calls without a result yet, in order (a dict keeps the order and finds one at once).
        self._unanswered: dict[str, None] = {}
        # Where a path a tool names is, by the path (sessions name the same files again and again).
        self._where: dict[str, str] = {}
        # What each kind of message shows: its updates added to the list, the ids of its calls returned.
        self._kinds: dict[str, Callable[[dict[str, Any], list[str]], list[str]]] = {
            "user": self._user,
            "assistant": self._assistant,
            "summary": self._summary,
        }

    def stored(self, contents: list[str]) -> list[str]:
        """The updates for the next stored messages, given as the store holds them (their JSON).

        The store holds only what :func:`~core.messages.dump_message` wrote, so the JSON is read
        as it is, the whole page at once, without the models' checks; a message not read so (not
        the shape that writes) goes through its model, which reads what it always read and
        fails on what it always failed on."""
        try:
            messages = from_json("[" + ",".join(contents) + "]", cache_strings="keys")
        except ValueError:
            messages = None
        if not isinstance(messages, list) or len(messages) != len(contents):
            messages = [None] * len(contents)  # one of them is not one JSON value: each is read alone
        out: list[str] = []
        for message, content in zip(messages, contents, strict=True):
            try:
                out += self._updates(from_json(content, cache_strings="keys") if message is None else message)
            except (LookupError, TypeError, AttributeError, ValueError):
                out += self._updates(load_message(content).model_dump())
        return out

    def updates(self, message: Message) -> list[str]:
        """The updates for the next message."""
        return self._updates(json.loads(dump_message(message)))

    def finish(self) -> list[str]:
        """Calls left without a result, closed as failed: a crash can leave one, and editors spin
        on a call that never ends."""
        out = [f'{{"toolCallId":{_str(call_id)}{_INTERRUPTED}' for call_id in self._unanswered]
        self._unanswered.clear()
        return out

    def _updates(self, message: dict[str, Any]) -> list[str]:
        # Nothing changes until the message is read whole: a message that fails is read again.
        kind = message["kind"]
        if kind == "tool_result":
            return self._result(message)
        out: list[str] = []
        calls = self._kinds[kind](message, out)
        if self._unanswered:
            out = self.finish() + out
        for call_id in calls:
            self._unanswered[call_id] = None
        return out

    def _user(self, message: dict[str, Any], out: list[str]) -> list[str]:
        parts = message["parts"]
        text = "".join(p["text"] for p in parts if p["kind"] == "text")
        if is_background_note(text):
            # The note the model got when a background command ended: the user saw a notice.
            out.append(_value(_dumped(_notice(notice_of_note(text)))))
            return []
        for part in parts:
            if part["kind"] == "text":
                if part["text"]:
                    out.append(_chunk("user_message_chunk", part["text"]))
            elif part["kind"] == "image":
                image = f'{{"data":{_str(part["data"])},"mimeType":{_str(part["media_type"])},"type":"image"}}'
                out.append(f'{{"content":{image},"sessionUpdate":"user_message_chunk"}}')
            else:
                raise ValueError(f"no user message part {part['kind']!r}")
        return []

    def _assistant(self, message: dict[str, Any], out: list[str]) -> list[str]:
        calls = []
        for part in message.get("parts", ()):
            kind = part["kind"]
            if kind == "text":
                if part["text"]:
                    out.append(_chunk("agent_message_chunk", part["text"]))
            elif kind == "thinking":
                if part["text"] and not part.get("redacted", False):
                    out.append(_chunk("agent_thought_chunk", part["text"]))
            elif kind == "tool_call":
                calls.append(part)
            else:
                raise ValueError(f"no assistant message part {kind!r}")
        for call in calls:
            arguments = call.get("arguments", {})
            out.append(self._started(call["id"], call["name"], arguments))
            if call["name"] == "update_plan":
                plan = _plan(arguments)
                if plan is not None:
                    out.append(_value(plan))
        return [call["id"] for call in calls]

    def _summary(self, message: dict[str, Any], out: list[str]) -> list[str]:
        out.append(_chunk("agent_message_chunk", _COMPACTED))
        return []

    def _result(self, message: dict[str, Any]) -> list[str]:
        call_id, output, failed = message["tool_call_id"], message["content"], message.get("is_error", False)
        items: list[ToolContent] = [
            DiffContent(shown_path(self._host, d["path"]), d["old_text"], d["new_text"]) for d in message.get("diffs", ())
        ]
        if not items and failed:
            items = [TextContent(output[:MAX_REPLAYED_OUTPUT])]
        content = [_value(_content(item)) for item in (*items, *self._extra.get(call_id, ()))]
        # Pieces joined once: a diff holds whole files.
        update = ['{"toolCallId":', _str(call_id), ',"status":"failed"' if failed else ',"status":"completed"']
        if content:
            update += [',"content":[', ",".join(content), "]"]
        if output:
            update += [',"rawOutput":{"output":', _str(output[:MAX_REPLAYED_OUTPUT]), "}"]
        update.append(',"sessionUpdate":"tool_call_update"}')
        self._unanswered.pop(call_id, None)
        return ["".join(update)]

    def _located(self, raw: str) -> str:
        where = self._where.get(raw)
        if where is None:
            path = Path(raw).expanduser()
            where = self._where[raw] = str(path if path.is_absolute() else self._cwd / path)
        return where

    def _started(self, call_id: str, name: str, arguments: dict[str, Any]) -> str:
        found = self._tools.get(name)
        title = name
        locations: list[str] = []
        if found is not None:
            try:
                args = found.args_model.model_validate(arguments)
            except Exception:
                args = None
            if args is not None:
                try:
                    title = found.title(args)
                except Exception:
                    pass
                try:
                    locations = [self._located(str(raw)) for raw in found.paths(args)]
                except Exception:
                    locations = []
        kind = _str(found.kind if found else "other")
        where = ',"locations":[' + ",".join(f'{{"path":{_str(path)}}}' for path in locations) + "]" if locations else ""
        return (
            f'{{"toolCallId":{_str(call_id)},"title":{_str(title)},"kind":{kind},"status":"pending"{where}'
            f',"rawInput":{_value(arguments)},"sessionUpdate":"tool_call"}}'
        )


def replay_updates(
    history: list[Message], tools: dict[str, Tool], cwd: Path, extra: Mapping[str, list[ToolContent]] | None = None, *, host: object = None
) -> list[Update]:
    """Every update of ``history`` at once, as dicts (see :class:`Replay`)."""
    replay = Replay(tools, cwd, extra, host=host)
    out = [update for message in history for update in replay.updates(message)]
    return [json.loads(update) for update in out + replay.finish()]


async def send_replay(
    store: SessionStore,
    session_id: str,
    replay: Replay,
    send: Callable[[list[str]], Awaitable[None]],
    *,
    page: int = PAGE,
    page_chars: int = PAGE_CHARS,
) -> int:
    """Read the session's messages from the store a page at a time and ``send`` each page's
    updates, as JSON texts (the next page is read meanwhile); the number of updates sent.

    A page holds at most ``page`` messages, fewer after large ones: the next page is asked for
    about ``page_chars`` characters of stored JSON, reckoned by the size of the last (the first
    holds at most :data:`FIRST_PAGE`)."""
    sent = 0
    limit = min(page, FIRST_PAGE)
    reading = asyncio.ensure_future(store.stored_messages(session_id, limit=limit))
    try:
        while True:
            rows = await reading
            more = len(rows) == limit  # a short page is the last
            if more:
                size = sum(len(content) for _, content in rows)
                limit = max(1, min(page, limit * page_chars // max(size, 1)))
                reading = asyncio.ensure_future(store.stored_messages(session_id, after_seq=rows[-1][0], limit=limit))
            updates = replay.stored([content for _, content in rows])
            if updates:
                await send(updates)
                sent += len(updates)
            if not more:
                break
    finally:
        reading.cancel()  # a failed send leaves no read behind
    closing = replay.finish()
    if closing:
        await send(closing)
    return sent + len(closing)


def _chunk(kind: str, text: str) -> str:
    return f'{{"content":{{"text":{_str(text)},"type":"text"}},"sessionUpdate":"{kind}"}}'


def _content(item: ToolContent) -> Update:
    if isinstance(item, DiffContent):
        if item.old_text is None:  # a new file: the SDK leaves the field out, editors need it null (wire.py)
            return {"path": item.path, "newText": item.new_text, "type": "diff", "oldText": None}
        return {"path": item.path, "oldText": item.old_text, "newText": item.new_text, "type": "diff"}
    if isinstance(item, TextContent):
        return {"content": {"text": item.text, "type": "text"}, "type": "content"}
    if isinstance(item, TerminalContent):
        return {"terminalId": item.terminal_id, "type": "terminal"}
    raise TypeError(f"no replay for {type(item).__name__}")


def _title(found: Tool | None, call: ToolCallPart) -> str:
    if found is None:
        return call.name
    try:
        return found.title(found.args_model.model_validate(call.arguments))
    except Exception:
        return call.name


def _notice(text: str) -> object:
    from hermes_acp.render import update_for

    return update_for(Notice(text, "warning"))


def _dumped(model: Any) -> Update:
    """An SDK model as it goes on the wire (for the few updates made with the SDK's helpers)."""
    from acp.utils import serialize_params

    return serialize_params(model)


def _plan(arguments: dict) -> Update | None:
    import acp

    entries = arguments.get("entries")
    if not isinstance(entries, list):
        return None
    try:
        return _dumped(
            acp.update_plan(
                [
                    acp.plan_entry(str(e["content"]), priority=e.get("priority", "medium"), status=e.get("status", "pending"))
                    for e in entries
                ]
            )
        )
    except (KeyError, TypeError, ValueError):
        return None


def subagent_content(children: list[tuple[int, list[Message]]], tools: dict[str, Tool]) -> list[ToolContent]:
    """What a delegate call showed of its subagents ((number, stored history) each): per subagent,
    its goal, its tool calls as lines and its final report, then the diffs of its file changes."""
    texts: list[ToolContent] = []
    diffs: list[ToolContent] = []
    for number, history in children:
        goal = next((m.text.split("\n\n# Context\n", 1)[0] for m in history if isinstance(m, UserMessage)), "")
        lines = [f"Subagent {number}: {goal}"]
        failed = {m.tool_call_id for m in history if isinstance(m, ToolResultMessage) and m.is_error}
        report = ""
        for message in history:
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    lines.append(f"{'✗' if call.id in failed else '✓'} {_title(tools.get(call.name), call)}")
                if message.text.strip():
                    report = message.text.strip()
            elif isinstance(message, ToolResultMessage):
                diffs += [DiffContent(d.path, d.old_text, d.new_text) for d in message.diffs]
        texts.append(TextContent("\n".join(lines) + (f"\n\n{report[:MAX_REPLAYED_OUTPUT]}" if report else "")))
    return texts + diffs
