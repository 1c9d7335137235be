"""The memory tool: edit the agent's notes and the user's profile, entry by entry."""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, Field

from core.learning import gate as learning_gate
from core.learning.memory import FILES, MemoryError, MemoryFlagged, change_memory
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.registry import tool

__all__ = ["memory"]


class MemoryArgs(BaseModel):
    action: Literal["add", "replace", "remove"]
    file: Literal["memory", "user"] = Field("memory", description="memory: your notes; user: the user's preferences")
    text: str = Field("", description="new entry (add, replace)")
    old: str = Field("", description="unique part of the entry to change")


def _title(args: MemoryArgs) -> str:
    return f"Memory: {args.action} ({args.file})"


@tool(kind="edit", read_only=False, title=_title)
async def memory(ctx: ToolContext, args: MemoryArgs) -> str:
    """Keep durable facts across sessions: short entries, no secrets. When full, merge or remove entries."""
    await ctx.require_write(_title(args))

    def change(allow: frozenset[str] = frozenset()):
        return change_memory(
            args.action,
            args.file,
            text=args.text,
            old=args.old,
            who=f"agent:{ctx.session_id[:8]}",
            settings=ctx.settings.learning,
            allow=allow,
        )

    try:
        try:
            done = await asyncio.to_thread(change)
        except MemoryFlagged as flagged:
            snippet = " ".join(args.text.split())
            snippet = snippet if len(snippet) <= 120 else snippet[:117] + "…"
            await ctx.require_write(
                f"Save this {FILES[args.file]} entry, flagged by screening: “{snippet}”", flagged=learning_gate.describe(flagged.flags)
            )
            done = await asyncio.to_thread(change, frozenset(f.digest for f in flagged.flags))
    except MemoryError as exc:
        raise ToolError(str(exc)) from None
    return f"Saved ({args.action}); {done.used}/{done.budget} characters used. Later sessions see it."
