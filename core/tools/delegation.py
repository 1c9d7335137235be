"""What the delegate tool hands to the agent and gets back: subagent tasks and their outcomes.

The agent (``core.agent.subagents``) runs them; tools see only these values and the
``ToolContext.delegate`` callable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["Delegate", "SubagentOutcome", "SubagentTask", "SubagentToolset"]

# "editor": the editing agent's tools without delegate (unless nesting is allowed) and undo;
# "read-only": only the tools that read and search.
SubagentToolset = Literal["editor", "read-only"]


@dataclass(frozen=True, slots=True)
class SubagentTask:
    """One subagent's job: its goal and the context it is given (it sees nothing else)."""

    goal: str
    context: str = ""
    toolset: SubagentToolset = "editor"


@dataclass(frozen=True, slots=True)
class SubagentOutcome:
    """How one subagent ended: its final report (bounded) and the session it ran in."""

    task: SubagentTask
    status: Literal["completed", "incomplete", "failed", "cancelled"]
    report: str
    session_id: str | None = None


# Run the tasks (at most ``max_tasks``) for the tool call ``call_id``; one outcome per task, in order.
Delegate = Callable[[Sequence[SubagentTask], str], Awaitable[list[SubagentOutcome]]]
