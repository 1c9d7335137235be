"""The plan tool: the model keeps a short todo list that the editor shows as a plan."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from core.events import PlanEntry, PlanUpdated
from core.tools.context import ToolContext
from core.tools.registry import ToolOutput, tool

__all__ = ["update_plan"]


class PlanItem(BaseModel):
    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


class UpdatePlanArgs(BaseModel):
    entries: list[PlanItem] = Field(description="the whole plan, in order (replaces the previous one)")


@tool(kind="think", read_only=True, title=lambda a: "Update plan")
async def update_plan(ctx: ToolContext, args: UpdatePlanArgs) -> ToolOutput:
    """Keep a todo list for multi-step work; mark items in_progress and completed as you go."""
    entries = [PlanEntry(e.content, e.status, e.priority) for e in args.entries]
    await ctx.emit(PlanUpdated(entries))
    done = sum(1 for e in entries if e.status == "completed")
    return ToolOutput(f"Plan updated: {done}/{len(entries)} done.")
