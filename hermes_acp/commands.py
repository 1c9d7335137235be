"""Slash commands offered to the editor (``available_commands_update``) and their texts.

Besides the built-in commands, every skill offered to the session (its active toolsets: see
:func:`core.learning.skills.offered`) is ``/skill-name`` (the turn runs with the skill's body,
as ``skill_view`` returns it; :mod:`surface_support.skill_commands`) and every ``.agents/commands/NAME.md`` in the session's folder is
``/NAME`` (its body, screened like other project text, with ``$ARGUMENTS`` replaced by what
follows the command). A built-in name wins over a skill, a project command over a skill.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.config import home

__all__ = [
    "COMMANDS",
    "INIT_PROMPT",
    "ExtraCommand",
    "available_commands",
    "command_prompt",
    "commands_stamp",
    "extra_commands",
    "list_skills",
    "parse_command",
    "read_memory",
    "session_toolsets",
]

log = logging.getLogger(__name__)

PROJECT_COMMANDS = Path(".agents") / "commands"
MAX_COMMAND_CHARS = 50_000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")

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
    "personality": ("Switch the personality overlay from the next turn, or list them; none clears it", "name"),
    "init": ("Write an AGENTS.md describing this project", None),
}

INIT_PROMPT = (
    "Create or update AGENTS.md at the root of this project: a concise guide for coding agents. "
    "Look at the project first (layout, languages, build and test commands, conventions you can "
    "see in the code and config). Cover: what the project is, how to build, test and lint it, "
    "the layout, code style, and anything surprising. Keep it under 80 lines. If AGENTS.md "
    "exists, improve it rather than replacing what is still true."
)


@dataclass(frozen=True, slots=True)
class ExtraCommand:
    """A skill or project command offered as a slash command."""

    name: str
    description: str
    kind: str  # "skill" or "project"
    path: Path


def _project_commands(cwd: Path) -> list[ExtraCommand]:
    from core.learning.skills import parse_front_matter

    folder = cwd / PROJECT_COMMANDS
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.md")):
        if not _NAME.match(path.stem) or not path.is_file():
            continue
        try:
            meta, _ = parse_front_matter(path.read_text(encoding="utf-8", errors="replace")[:MAX_COMMAND_CHARS])
        except OSError:
            continue
        description = meta.get("description")
        text = description if isinstance(description, str) and description else f"Project command from {path.name}"
        found.append(ExtraCommand(path.stem, text, "project", path))
    return found


def session_toolsets(session: Any) -> frozenset[str] | None:
    """The toolsets active in a core session (which skills it is offered); None: not known."""
    context = getattr(session, "context", None)
    return context.toolsets if context is not None else None


def extra_commands(cwd: Path, toolsets: Iterable[str] | None = None) -> list[ExtraCommand]:
    """Project commands, then the skills offered with ``toolsets``, without names a built-in (or an
    earlier entry) already has."""
    from core.learning.skills import discover

    found = discover([cwd], toolsets=toolsets)
    skills = [ExtraCommand(s.name, s.description or f"Use the {s.name} skill", "skill", s.path) for s in found]
    taken = set(COMMANDS)
    out = []
    for command in [*_project_commands(cwd), *skills]:
        if command.name in taken:
            log.info("slash command /%s from %s skipped: the name is taken", command.name, command.path)
            continue
        if not _NAME.match(command.name):
            continue
        taken.add(command.name)
        out.append(command)
    return out


def commands_stamp(cwd: Path) -> tuple[tuple[str, int, int], ...]:
    """A cheap value that changes when a skill or project command is added, removed or edited."""
    from core.learning.skills import file_stamps, fingerprint

    return (*fingerprint([cwd]), *file_stamps(cwd / PROJECT_COMMANDS, "*.md"))


def available_commands(cwd: Path | None = None, toolsets: Iterable[str] | None = None):
    """The built-in commands, then (for a session folder) its project commands and the skills offered with ``toolsets``."""
    from acp.schema import AvailableCommand, AvailableCommandInput, UnstructuredCommandInput

    builtin = [
        AvailableCommand(
            name=name,
            description=description,
            input=AvailableCommandInput(root=UnstructuredCommandInput(hint=hint)) if hint else None,
        )
        for name, (description, hint) in COMMANDS.items()
    ]
    extras = [
        AvailableCommand(
            name=command.name,
            description=command.description,
            input=AvailableCommandInput(
                root=UnstructuredCommandInput(hint="what to apply the skill to" if command.kind == "skill" else "arguments")
            ),
        )
        for command in (extra_commands(cwd, toolsets) if cwd is not None else [])
    ]
    return builtin + extras


def parse_command(text: str, cwd: Path | None = None, toolsets: Iterable[str] | None = None) -> tuple[str, str] | None:
    """``/name args`` for a known command (built-in, or a skill or project command of ``cwd``, skills
    as offered with ``toolsets``); None for anything else (it goes to the model)."""
    match = re.match(r"^\s*/([A-Za-z0-9_-]+)(?:\s+(.*))?$", text, re.DOTALL)
    if not match:
        return None
    name = match.group(1)
    if name not in COMMANDS and (cwd is None or not any(c.name == name for c in extra_commands(cwd, toolsets))):
        return None
    return name, (match.group(2) or "").strip()


def command_prompt(name: str, args: str, cwd: Path, toolsets: Iterable[str] | None = None) -> str | None:
    """The user message a skill or project command stands for; None for a built-in or unknown name."""
    if name in COMMANDS:
        return None
    command = next((c for c in extra_commands(cwd, toolsets) if c.name == name), None)
    if command is None:
        return None
    if command.kind == "project":
        from core.learning.screening import screen
        from core.learning.skills import parse_front_matter

        try:
            raw = command.path.read_text(encoding="utf-8", errors="replace")[:MAX_COMMAND_CHARS]
        except OSError:
            return None
        _, body = parse_front_matter(raw)
        checked = screen(body, str(command.path))
        for finding in checked.findings:
            log.warning("project command screened: %s", finding.describe())
        text = checked.text.strip()
        return text.replace("$ARGUMENTS", args) if "$ARGUMENTS" in text else text + (f"\n\n{args}" if args else "")
    from surface_support.skill_commands import skill_prompt

    return skill_prompt(name, args, cwd, toolsets)


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


def list_skills(cwd: Path, toolsets: Iterable[str] | None = None) -> str:
    """Project, personal and bundled skills offered with ``toolsets``, with their descriptions."""
    from surface_support.skill_commands import skills_listing

    return skills_listing(cwd, toolsets)
