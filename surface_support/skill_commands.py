"""Skills as commands, as every surface offers them: ``/NAME`` in the editor, ``/skill NAME`` in a chat.

The turn runs with the skill's body (as ``skill_view`` returns it: screened, its files listed)
inside the user's message, so the model reads it once, in the history, and the cached prefix of
the session stays as it was. Only skills offered to the session (its active toolsets, see
:func:`core.learning.skills.offered`) run or are listed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["skill_prompt", "skills_listing"]


def skill_prompt(name: str, args: str, cwd: Path, toolsets: Iterable[str] | None = None) -> str | None:
    """The user message ``/NAME args`` stands for; None when no skill of that name is offered.
    Counts as a use of the skill."""
    from core.learning.skills import find, record_use, view

    skill = find(name, [cwd], toolsets=toolsets)
    if skill is None:
        return None
    try:
        body = view(skill)
    except OSError:
        return None
    record_use(skill.name)
    intro = f"Use the skill '{skill.name}' below" + (f" for this: {args}" if args else "") + "."
    return f'{intro}\n\n<skill name="{skill.name}" path="{skill.path}">\n{body}\n</skill>'


def skills_listing(cwd: Path, toolsets: Iterable[str] | None = None, *, run_hint: str = "") -> str:
    """Project, personal and bundled skills offered to the session, with their descriptions;
    ``run_hint`` says how to run one on this surface."""
    from core.config import home
    from core.learning.skills import discover

    found = discover([cwd], toolsets=toolsets)
    lines = [f"- `{s.name}` ({s.origin}) — {s.description}" for s in found]
    where = f"Personal skills live in {home() / 'skills'}; project skills in .agents/skills/."
    if not any(s.origin != "bundled" for s in found):
        head = f"No skills of your own yet. {where}"
        text = head + ("\n\nBundled skills:\n" + "\n".join(lines) if lines else "")
    else:
        text = "Skills:\n" + "\n".join(lines)
    return text + (f"\n\n{run_hint}" if run_hint and lines else "")
