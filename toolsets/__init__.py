"""Tools grouped into named toolsets: each toolset is one ordered list, stated here once. Imports core only."""

from __future__ import annotations

import dataclasses

from core.tools.registry import Tool
from toolsets.code import execute_code
from toolsets.cron import cron
from toolsets.delegate import delegate
from toolsets.editor import (
    apply_patch,
    command_output,
    delete_file,
    edit_file,
    glob,
    grep,
    list_dir,
    move_file,
    read_file,
    run_command,
    stop_command,
    undo,
    write_file,
)
from toolsets.history import session_search
from toolsets.memory import memory
from toolsets.plan import update_plan
from toolsets.skills import skill_manage, skill_view
from toolsets.vision import inspect_image
from toolsets.web import web_fetch, web_search

__all__ = ["GROUPS", "TOOLSETS", "all_tools", "toolset"]

# The order is the order of the tool schemas in every request (part of the cached prompt prefix): keep it stable.
_FILES = [read_file, edit_file, write_file, apply_patch, delete_file, move_file, grep, glob, list_dir]
_COMMANDS = [run_command, command_output, stop_command]
_LEARNING = [memory, skill_view, skill_manage, session_search]
# The whole agent: what a person can watch and answer questions for, in an editor, an MCP client or a chat.
_EDITOR = [*_FILES, *_COMMANDS, undo, update_plan, *_LEARNING, cron, inspect_image, execute_code, delegate, web_fetch, web_search]

TOOLSETS: dict[str, list[Tool]] = {
    # ACP sessions in the editor.
    "editor": _EDITOR,
    # hermes-mcp (Claude Desktop, Cursor): the same agent as in the editor.
    "mcp": _EDITOR,
    # Telegram chats: the same agent again (cron included, once).
    "gateway": _EDITOR,
    # Scheduled runs: reading, commands and the plan; nobody is there to approve edits.
    "cron": [read_file, grep, glob, list_dir, *_COMMANDS, update_plan, inspect_image, web_fetch, web_search],
}


# Capability groups, named as skills name them in ``requires_toolsets`` and ``fallback_for_toolsets``
# (Hermes Agent's toolset names, where a tool here does that job): a session has a group while it has
# any of its tools, so a skill written as a fallback for web tools is not offered beside them.
GROUPS: dict[str, list[Tool]] = {
    "file": _FILES,
    "terminal": _COMMANDS,
    "web": [web_fetch, web_search],
    "search": [web_search],
    "vision": [inspect_image],
    "memory": [memory],
    "skills": [skill_view, skill_manage],
    "session_search": [session_search],
    "todo": [update_plan],
    "cronjob": [cron],
    "code_execution": [execute_code],
    "delegation": [delegate],
}


def _listed(tools: dict[str, list[Tool]]) -> dict[str, list[Tool]]:
    """Each toolset's tools, each knowing every toolset that lists it and the groups it is in."""
    member = {t.name: frozenset(name for name, listed in tools.items() if t in listed) for ts in tools.values() for t in ts}
    groups = {t.name: frozenset(name for name, listed in GROUPS.items() if t in listed) for ts in tools.values() for t in ts}
    return {
        name: [dataclasses.replace(t, toolsets=member[t.name], groups=groups[t.name]) for t in listed] for name, listed in tools.items()
    }


_TOOLS = _listed(TOOLSETS)


def all_tools() -> list[Tool]:
    """Every tool of every toolset, each once, in toolset order."""
    return list({t.name: t for listed in _TOOLS.values() for t in listed}.values())


def toolset(name: str) -> list[Tool]:
    """The tools of one toolset, in a stable order (the prompt prefix depends on it)."""
    if name not in _TOOLS:
        raise KeyError(f"no toolset named {name!r}")
    return list(_TOOLS[name])
