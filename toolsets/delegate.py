"""delegate: hand tasks to subagents that work in parallel, each with a fresh context; the model reads their reports."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from core.events import TextContent
from core.tools.context import ToolContext
from core.tools.delegation import SubagentOutcome, SubagentTask
from core.tools.errors import ToolError
from core.tools.registry import ToolOutput, tool

__all__ = ["delegate", "report_text"]


class Task(BaseModel):
    goal: str = Field(min_length=1, description="the task and what to report back")
    context: str = Field("", description="what it needs to know (it sees nothing else)")
    toolset: Literal["editor", "read-only"] = "editor"


class DelegateArgs(BaseModel):
    tasks: list[Task] = Field(min_length=1)


def _title(args: DelegateArgs) -> str:
    if len(args.tasks) == 1:
        return f"Delegate: {args.tasks[0].goal.splitlines()[0][:60]}"
    return f"Delegate {len(args.tasks)} tasks"


@tool(kind="think", read_only=False, title=_title)
async def delegate(ctx: ToolContext, args: DelegateArgs) -> ToolOutput:
    """Run independent tasks in parallel subagents, each starting fresh; returns each one's final report."""
    if ctx.delegate is None:
        raise ToolError("delegate is not available here: a subagent cannot start subagents of its own ([delegate] max_depth).")
    tasks = [SubagentTask(t.goal, t.context, t.toolset) for t in args.tasks]
    outcomes = await ctx.delegate(tasks, ctx.call_id)
    summary = "\n".join(f"Subagent {n} ({o.status}): {o.task.goal.splitlines()[0][:80]}" for n, o in enumerate(outcomes, 1))
    return ToolOutput(report_text(outcomes), content=[TextContent(summary)])


def report_text(outcomes: list[SubagentOutcome]) -> str:
    """What the model reads: each subagent's status and final report, in task order."""
    parts = [f"## Subagent {n} ({o.status}): {o.task.goal.splitlines()[0][:120]}\n{o.report}" for n, o in enumerate(outcomes, 1)]
    return "\n\n".join(parts)
