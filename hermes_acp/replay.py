"""A stored conversation as ACP session updates, for ``session/load``.

Built only from what was persisted, so what replays is exactly what was saved.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from core.events import DiffContent, Location, Notice, TextContent, ToolContent
from core.host.processes import is_background_note, notice_of_note
from core.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SummaryMessage,
    TextPart,
    ThinkingPart,
    ToolResultMessage,
    UserMessage,
)
from core.tools.registry import Tool
from hermes_acp.render import acp_content, acp_locations, update_for

__all__ = ["replay_updates", "subagent_content"]

MAX_REPLAYED_OUTPUT = 4000


def replay_updates(
    history: list[Message], tools: dict[str, Tool], cwd: Path, extra: Mapping[str, list[ToolContent]] | None = None, *, host: object = None
) -> list:
    """Every update the user saw, in order: their messages, replies, thoughts, tool calls, plans.

    ``extra``: content shown at the end of a tool call besides its own (a delegate call's subagents);
    ``host``: the session's host, which names the paths diffs show."""
    import acp
    from acp.schema import ImageContentBlock, ToolCallProgress, ToolCallStart, UserMessageChunk

    from core.tools.dispatch import shown_path

    updates: list = []
    unanswered: list[str] = []

    def close_unanswered() -> None:
        # A crash can leave a call without a result; editors spin on a call that never ends.
        for call_id in unanswered:
            updates.append(
                ToolCallProgress(
                    session_update="tool_call_update",
                    tool_call_id=call_id,
                    status="failed",
                    raw_output={"output": "Interrupted before a result."},
                )
            )
        unanswered.clear()

    for message in history:
        if not isinstance(message, ToolResultMessage):
            close_unanswered()
        if isinstance(message, UserMessage) and is_background_note(message.text):
            # The note the model got when a background command ended: the user saw a notice.
            updates.append(update_for(Notice(notice_of_note(message.text), "warning")))
        elif isinstance(message, UserMessage):
            for part in message.parts:
                if isinstance(part, TextPart) and part.text:
                    updates.append(acp.update_user_message_text(part.text))
                elif isinstance(part, ImagePart):
                    block = ImageContentBlock(type="image", mime_type=part.media_type, data=part.data)
                    updates.append(UserMessageChunk(session_update="user_message_chunk", content=block))
        elif isinstance(message, AssistantMessage):
            for reply in message.parts:
                if isinstance(reply, ThinkingPart) and reply.text and not reply.redacted:
                    updates.append(acp.update_agent_thought_text(reply.text))
                elif isinstance(reply, TextPart) and reply.text:
                    updates.append(acp.update_agent_message_text(reply.text))
            for call in message.tool_calls:
                unanswered.append(call.id)
                found = tools.get(call.name)
                updates.append(
                    ToolCallStart(
                        session_update="tool_call",
                        tool_call_id=call.id,
                        title=_title(found, call),
                        kind=found.kind if found else "other",
                        status="pending",
                        locations=acp_locations(_locations(found, call.arguments, cwd)) or None,
                        raw_input=call.arguments,
                    )
                )
                if call.name == "update_plan":
                    plan = _plan(call.arguments)
                    if plan is not None:
                        updates.append(plan)
        elif isinstance(message, SummaryMessage):
            updates.append(acp.update_agent_message_text("\n\n*Earlier conversation compacted into a summary.*\n\n"))
        elif isinstance(message, ToolResultMessage):
            if message.tool_call_id in unanswered:
                unanswered.remove(message.tool_call_id)
            content: list[ToolContent] = [DiffContent(shown_path(host, d.path), d.old_text, d.new_text) for d in message.diffs]
            if not content and message.is_error:
                content = [TextContent(message.content[:MAX_REPLAYED_OUTPUT])]
            content += (extra or {}).get(message.tool_call_id, [])
            updates.append(
                ToolCallProgress(
                    session_update="tool_call_update",
                    tool_call_id=message.tool_call_id,
                    status="failed" if message.is_error else "completed",
                    content=acp_content(content) or None,
                    raw_output={"output": message.content[:MAX_REPLAYED_OUTPUT]} if message.content else None,
                )
            )
    close_unanswered()
    return updates


def _title(found: Tool | None, call) -> str:
    if found is None:
        return call.name
    try:
        return found.title(found.args_model.model_validate(call.arguments))
    except Exception:
        return call.name


def _locations(found: Tool | None, arguments: dict, cwd: Path) -> list[Location]:
    if found is None:
        return []
    try:
        paths = found.paths(found.args_model.model_validate(arguments))
    except Exception:
        return []
    out = []
    for raw in paths:
        path = Path(raw).expanduser()
        out.append(Location(str(path if path.is_absolute() else cwd / path)))
    return out


def _plan(arguments: dict):
    import acp

    entries = arguments.get("entries")
    if not isinstance(entries, list):
        return None
    try:
        return acp.update_plan(
            [acp.plan_entry(str(e["content"]), priority=e.get("priority", "medium"), status=e.get("status", "pending")) for e in entries]
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
