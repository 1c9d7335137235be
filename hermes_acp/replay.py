"""A stored conversation as ACP session updates, for ``session/load``.

Built only from what was persisted, so what replays is exactly what was saved. The store is
read a page at a time and each page's updates are sent before the next is read, so a long
session replays in bounded memory. Updates are made as the JSON the SDK would send for its
models (``serialize_params``: aliases, no None or default fields, ``oldText: null`` for a new
file), without building the models: a replay sends tens of thousands of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.events import DiffContent, Notice, TerminalContent, TextContent, ToolContent
from core.host.processes import is_background_note, notice_of_note
from core.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SummaryMessage,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from core.tools.dispatch import shown_path
from core.tools.registry import Tool

if TYPE_CHECKING:
    from core.store import SessionStore

__all__ = ["PAGE", "Replay", "replay_updates", "send_replay", "subagent_content"]

MAX_REPLAYED_OUTPUT = 4000
# Messages read from the store at a time.
PAGE = 500

Update = dict[str, Any]


class Replay:
    """Every update the user saw, in order, message by message: their messages, replies,
    thoughts, tool calls, plans.

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

    def updates(self, message: Message) -> list[Update]:
        """The updates for the next stored message."""
        out = [] if isinstance(message, ToolResultMessage) else self.finish()
        if isinstance(message, UserMessage):
            if is_background_note(message.text):
                # The note the model got when a background command ended: the user saw a notice.
                out.append(_dumped(_notice(notice_of_note(message.text))))
            else:
                for part in message.parts:
                    if isinstance(part, TextPart) and part.text:
                        out.append(_chunk("user_message_chunk", part.text))
                    elif isinstance(part, ImagePart):
                        image = {"data": part.data, "mimeType": part.media_type, "type": "image"}
                        out.append({"content": image, "sessionUpdate": "user_message_chunk"})
        elif isinstance(message, AssistantMessage):
            for reply in message.parts:
                if isinstance(reply, ThinkingPart) and reply.text and not reply.redacted:
                    out.append(_chunk("agent_thought_chunk", reply.text))
                elif isinstance(reply, TextPart) and reply.text:
                    out.append(_chunk("agent_message_chunk", reply.text))
            for call in message.tool_calls:
                self._unanswered[call.id] = None
                out.append(self._started(call))
                if call.name == "update_plan":
                    plan = _plan(call.arguments)
                    if plan is not None:
                        out.append(plan)
        elif isinstance(message, SummaryMessage):
            out.append(_chunk("agent_message_chunk", "\n\n*Earlier conversation compacted into a summary.*\n\n"))
        elif isinstance(message, ToolResultMessage):
            self._unanswered.pop(message.tool_call_id, None)
            content = [_content(DiffContent(shown_path(self._host, d.path), d.old_text, d.new_text)) for d in message.diffs]
            if not content and message.is_error:
                content = [_content(TextContent(message.content[:MAX_REPLAYED_OUTPUT]))]
            content += [_content(item) for item in self._extra.get(message.tool_call_id, [])]
            update: Update = {"toolCallId": message.tool_call_id, "status": "failed" if message.is_error else "completed"}
            if content:
                update["content"] = content
            if message.content:
                update["rawOutput"] = {"output": message.content[:MAX_REPLAYED_OUTPUT]}
            update["sessionUpdate"] = "tool_call_update"
            out.append(update)
        return out

    def finish(self) -> list[Update]:
        """Calls left without a result, closed as failed: a crash can leave one, and editors spin
        on a call that never ends."""
        out = [
            {
                "toolCallId": call_id,
                "status": "failed",
                "rawOutput": {"output": "Interrupted before a result."},
                "sessionUpdate": "tool_call_update",
            }
            for call_id in self._unanswered
        ]
        self._unanswered.clear()
        return out

    def _located(self, raw: str) -> str:
        where = self._where.get(raw)
        if where is None:
            path = Path(raw).expanduser()
            where = self._where[raw] = str(path if path.is_absolute() else self._cwd / path)
        return where

    def _started(self, call: ToolCallPart) -> Update:
        found = self._tools.get(call.name)
        title = call.name
        locations: list[str] = []
        if found is not None:
            try:
                args = found.args_model.model_validate(call.arguments)
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
        update: Update = {"toolCallId": call.id, "title": title, "kind": found.kind if found else "other", "status": "pending"}
        if locations:
            update["locations"] = [{"path": path} for path in locations]
        update["rawInput"] = call.arguments
        update["sessionUpdate"] = "tool_call"
        return update


def replay_updates(
    history: list[Message], tools: dict[str, Tool], cwd: Path, extra: Mapping[str, list[ToolContent]] | None = None, *, host: object = None
) -> list[Update]:
    """Every update of ``history`` at once (see :class:`Replay`)."""
    replay = Replay(tools, cwd, extra, host=host)
    out = [update for message in history for update in replay.updates(message)]
    return out + replay.finish()


async def send_replay(
    store: SessionStore, session_id: str, replay: Replay, send: Callable[[list[Update]], Awaitable[None]], *, page: int = PAGE
) -> int:
    """Read the session's messages from the store a page at a time and ``send`` each page's
    updates (the next page is read meanwhile); the number of updates sent."""
    sent = 0
    reading = asyncio.ensure_future(store.messages(session_id, limit=page))
    try:
        while True:
            rows = await reading
            if len(rows) == page:
                reading = asyncio.ensure_future(store.messages(session_id, after_seq=rows[-1].seq, limit=page))
            updates = [update for row in rows for update in replay.updates(row.message)]
            if updates:
                await send(updates)
                sent += len(updates)
            if len(rows) < page:
                break
    finally:
        reading.cancel()  # a failed send leaves no read behind
    closing = replay.finish()
    if closing:
        await send(closing)
    return sent + len(closing)


def _chunk(kind: str, text: str) -> Update:
    return {"content": {"text": text, "type": "text"}, "sessionUpdate": kind}


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
