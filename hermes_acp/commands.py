"""Slash commands offered to the editor (``available_commands_update``) and their texts."""

from __future__ import annotations

import re
from pathlib import Path

from core.config import home

__all__ = ["COMMANDS", "INIT_PROMPT", "available_commands", "parse_command", "list_skills", "read_memory"]

# name -> (description, input hint or None)
COMMANDS: dict[str, tuple[str, str | None]] = {
    "help": ("Show what the commands do", None),
    "model": ("Switch the model for this session", "provider:model"),
    "mode": ("Switch the approval mode: read-only, ask, accept-edits, auto", "mode"),
    "undo": ("Restore the files the last turn changed", None),
    "compact": ("Summarise the conversation so far to free context", None),
    "search": ("Search every past conversation", "query"),
    "cost": ("Tokens and cost of this session", None),
    "memory": ("Show what the agent remembers about you and your projects", None),
    "skills": ("List the skills the agent can use", None),
    "init": ("Write an AGENTS.md describing this project", None),
}

INIT_PROMPT = (
    "Create or update AGENTS.md at the root of this project: a concise guide for coding agents. "
    "Look at the project first (layout, languages, build and test commands, conventions you can "
    "see in the code and config). Cover: what the project is, how to build, test and lint it, "
    "the layout, code style, and anything surprising. Keep it under 80 lines. If AGENTS.md "
    "exists, improve it rather than replacing what is still true."
)


def available_commands():
    from acp.schema import AvailableCommand, AvailableCommandInput, UnstructuredCommandInput

    return [
        AvailableCommand(
            name=name,
            description=description,
            input=AvailableCommandInput(root=UnstructuredCommandInput(hint=hint)) if hint else None,
        )
        for name, (description, hint) in COMMANDS.items()
    ]


def parse_command(text: str) -> tuple[str, str] | None:
    """``/name args`` for a known command; None for anything else (it goes to the model)."""
    match = re.match(r"^\s*/([a-z_-]+)(?:\s+(.*))?$", text, re.DOTALL)
    if not match or match.group(1) not in COMMANDS:
        return None
    return match.group(1), (match.group(2) or "").strip()


def help_text() -> str:
    lines = ["Commands:"]
    for name, (description, hint) in COMMANDS.items():
        lines.append(f"- `/{name}{' <' + hint + '>' if hint else ''}` — {description}")
    return "\n".join(lines)


def read_memory() -> str:
    """The memory files with their budgets (what new sessions start with)."""
    from core.learning.context import current_settings
    from core.learning.memory import FILES, LABELS, budget_for, memory_path

    settings = current_settings()
    parts = []
    for kind in FILES:
        path = memory_path(kind)
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if text.strip():
            parts.append(f"**{LABELS[kind]}** ({len(text)}/{budget_for(kind, settings)} characters, {path}):\n\n{text.strip()}")
    if not parts:
        return f"Nothing remembered yet. Memories are kept in {home() / 'memories'}."
    return "\n\n".join(parts) + "\n\nHistory and undo: `hermes-editor memory log` / `hermes-editor memory revert ID`."


def list_skills(cwd: Path) -> str:
    """Project, personal and bundled skills, with their descriptions."""
    from core.learning.skills import discover

    found = discover([cwd])
    lines = [f"- `{s.name}` ({s.origin}) — {s.description}" for s in found]
    where = f"Personal skills live in {home() / 'skills'}; project skills in .agents/skills/."
    if not any(s.origin != "bundled" for s in found):
        head = f"No skills of your own yet. {where}"
        return head + ("\n\nBundled skills:\n" + "\n".join(lines) if lines else "")
    return "Skills:\n" + "\n".join(lines)
