"""The system prompt: short, exact, and byte-stable for the life of a session."""

from __future__ import annotations

import datetime
import platform
from pathlib import Path

__all__ = ["system_prompt"]

_BASE = """You are Hermes, a coding agent working in the user's editor. You read, search and change \
files and run commands through tools; the user sees every change as a diff and approves writes \
and commands.
- Read before you edit; make the smallest change that does the job; keep the project's style.
- Paths are relative to the working directory unless absolute.
- If the user rejects an action, do not retry it as is; ask what they want instead.
- Be brief. Report what you changed and anything left to do."""


def system_prompt(cwd: Path, *, today: datetime.date | None = None) -> str:
    """The prompt for a session rooted at ``cwd``. Computed once per session and kept."""
    today = today or datetime.date.today()
    return (
        f"{_BASE}\n\nWorking directory: {cwd}\nPlatform: {platform.system()} {platform.machine()}\n"
        f"Date: {today.isoformat()}"
    )
