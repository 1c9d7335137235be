"""Tools grouped into named toolsets. Imports core only."""

from __future__ import annotations

from core.tools import Tool

__all__ = ["all_tools", "toolset"]


def all_tools() -> list[Tool]:
    """Every tool of every toolset."""
    from toolsets import editor, plan

    return [getattr(editor, name) for name in editor.__all__] + [plan.update_plan]


def toolset(name: str) -> list[Tool]:
    """The tools of one toolset, in a stable order (the prompt prefix depends on it)."""
    tools = [t for t in all_tools() if name in t.toolsets]
    if not tools:
        raise KeyError(f"no toolset named {name!r}")
    return tools

