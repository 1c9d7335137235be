"""Tools grouped into named toolsets. Imports core only."""

from __future__ import annotations

from core.tools import Tool

__all__ = ["ALL_TOOLS", "toolset"]


def _all_tools() -> list[Tool]:
    from toolsets import editor

    return [getattr(editor, name) for name in editor.__all__]


def toolset(name: str) -> list[Tool]:
    """The tools of one toolset, in a stable order (the prompt prefix depends on it)."""
    tools = [t for t in _all_tools() if name in t.toolsets]
    if not tools:
        raise KeyError(f"no toolset named {name!r}")
    return tools


ALL_TOOLS = _all_tools
