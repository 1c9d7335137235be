"""The memory tool: edit the agent's notes and the user's profile, entry by entry."""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, Field

from core.context import current_settings
from core.memory import MemoryError, change_memory
from core.tools import ToolContext, ToolError, tool

__all__ = ["memory"]


class MemoryArgs(BaseModel):
    action: Literal["add", "replace", "remove"]
    file: Literal["memory", "user"] = Field("memory", description="memory: your notes; user: the user's preferences")
    text: str = Field("", description="new entry (add, replace)")
    old: str = Field("", description="unique part of the entry to change")


@tool(kind="edit", read_only=False, toolsets={"editor", "gateway"}, title=lambda a: f"Memory: {a.action} ({a.file})")
async def memory(ctx: ToolContext, args: MemoryArgs) -> str:
    """Keep durable facts across sessions: short entries, no secrets. When full, merge or remove entries."""
    if ctx.policy.mode == "read-only":
        raise ToolError("The session is in read-only mode: nothing was saved.")
    try:
        change = await asyncio.to_thread(
            change_memory, args.action, args.file, text=args.text, old=args.old,
            who=f"agent:{ctx.session_id[:8]}", settings=current_settings(),
        )
    except MemoryError as exc:
        raise ToolError(str(exc)) from None
    return f"Saved ({args.action}); {change.used}/{change.budget} characters used. Later sessions see it."
