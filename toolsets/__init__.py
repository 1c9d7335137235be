"""Tools grouped into named toolsets. Imports core only."""

from __future__ import annotations

from core.tools.registry import Tool

__all__ = ["all_tools", "toolset"]


def all_tools() -> list[Tool]:
    """Every tool of every toolset."""
    from toolsets import editor, history, memory, plan, skills

    # Appended after the editor tools: the order is part of the cached prompt prefix.
    learning = [memory.memory, skills.skill_view, skills.skill_manage, history.session_search]
    from toolsets import cron

    # The gateway's cron tool comes last, after the learning tools (prompt-prefix order).
    return [getattr(editor, name) for name in editor.__all__] + [plan.update_plan] + learning + [cron.cron]


def toolset(name: str) -> list[Tool]:
    """The tools of one toolset, in a stable order (the prompt prefix depends on it)."""
    tools = [t for t in all_tools() if name in t.toolsets]
    if not tools:
        raise KeyError(f"no toolset named {name!r}")
    return tools
