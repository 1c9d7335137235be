"""Core events -> ACP session updates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Union

from core.events import (
    DiffContent,
    Location,
    Notice,
    PlanUpdated,
    TerminalContent,
    TextContent,
    TextDelta,
    ThoughtDelta,
    ToolContent,
    ToolFinished,
    ToolStarted,
    ToolUpdated,
)

if TYPE_CHECKING:
    from acp.schema import ContentToolCallContent, FileEditToolCallContent, TerminalToolCallContent, ToolCallLocation

    AcpToolContent = Union[ContentToolCallContent, FileEditToolCallContent, TerminalToolCallContent]

__all__ = ["acp_content", "acp_locations", "update_for"]


def acp_content(items: Sequence[ToolContent]) -> list[AcpToolContent]:
    from acp.schema import ContentToolCallContent, FileEditToolCallContent, TerminalToolCallContent, TextContentBlock

    out: list[AcpToolContent] = []
    for item in items:
        if isinstance(item, DiffContent):
            out.append(FileEditToolCallContent(type="diff", path=item.path, old_text=item.old_text, new_text=item.new_text))
        elif isinstance(item, TerminalContent):
            out.append(TerminalToolCallContent(type="terminal", terminal_id=item.terminal_id))
        elif isinstance(item, TextContent):
            out.append(ContentToolCallContent(type="content", content=TextContentBlock(type="text", text=item.text)))
    return out


def acp_locations(items: Sequence[Location]) -> list[ToolCallLocation]:
    from acp.schema import ToolCallLocation

    return [ToolCallLocation(path=loc.path, line=loc.line) for loc in items]


def update_for(event) -> object | None:
    """The ACP update for an event, or None when the event has none."""
    import acp
    from acp.schema import ToolCallProgress, ToolCallStart

    if isinstance(event, TextDelta):
        return acp.update_agent_message_text(event.text)
    if isinstance(event, ThoughtDelta):
        return acp.update_agent_thought_text(event.text)
    if isinstance(event, Notice):
        marker = {"error": "**Error:** ", "warning": "**Note:** ", "info": ""}[event.level]
        return acp.update_agent_message_text(f"\n\n{marker}{event.text}\n\n")
    if isinstance(event, ToolStarted):
        return ToolCallStart(
            session_update="tool_call",
            tool_call_id=event.call_id,
            title=event.title,
            kind=event.tool_kind,
            status="pending",
            locations=acp_locations(event.locations) or None,
            raw_input=event.raw_input,
        )
    if isinstance(event, ToolUpdated):
        return ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=event.call_id,
            status="in_progress",
            title=event.title,
            content=acp_content(event.content) if event.content is not None else None,
            locations=acp_locations(event.locations) if event.locations is not None else None,
        )
    if isinstance(event, ToolFinished):
        content = acp_content(event.content)
        if not content and event.status == "failed" and event.raw_output:
            content = acp_content([TextContent(event.raw_output)])
        return ToolCallProgress(
            session_update="tool_call_update",
            tool_call_id=event.call_id,
            status=event.status,
            content=content or None,
            raw_output={"output": event.raw_output} if event.raw_output else None,
        )
    if isinstance(event, PlanUpdated):
        return acp.update_plan([acp.plan_entry(e.content, priority=e.priority, status=e.status) for e in event.entries])
    return None
