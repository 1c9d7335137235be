"""The system prompt: short, exact, and byte-stable for the life of a session (and for a turn
whatever happens during it: a personality chosen mid-turn or a model switch apply from the next)."""

from __future__ import annotations

import asyncio
import datetime
import os
import platform
import subprocess
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.agent.session import SessionContext
    from core.learning.personality import Personality
    from core.store import SessionStore

__all__ = ["PROMPT_KEY", "base_prompt", "choose_personality", "git_summary", "personality_listing", "kept_prompt", "system_prompt"]

# Where a session's meta keeps its prompt's opening (``system_prompt``), so a reopened session keeps it too.
PROMPT_KEY = "prompt"

_INTRO = "You are Hermes, a coding agent working in the user's editor."
_ACTS = {
    True: "You read, search and change files and run commands through tools; the user sees every change as a diff \
and approves writes and commands.",
    False: "You read, search and change files through tools; the user sees every change as a diff and approves writes.",
}
_RULES = """- Read before you edit; make the smallest change that does the job; keep the project's style.
- Paths are relative to the working directory unless absolute.
- If the user rejects an action, do not retry it as is; ask what they want instead.
- Be brief. Report what you changed and anything left to do."""
# The tool that makes the prompt's "run commands" true.
_COMMAND_TOOL = "run_command"


def base_prompt(tools: Collection[str] | None = None) -> str:
    """The fixed opening; it speaks of commands only when ``tools`` (names; None: all) can run them."""
    commands = tools is None or _COMMAND_TOOL in tools
    return f"{_INTRO} {_ACTS[commands]}\n{_RULES}"


_AUTO = object()


def git_summary(cwd: Path, *, timeout: float = 2.0) -> str | None:
    """One line on the repository ``cwd`` is in (branch, changed files), or None outside one.

    Runs ``git status`` without optional locks, so the user's index is never written.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    try:
        proc = subprocess.run(
            ["git", "--no-optional-locks", "status", "--porcelain=v1", "--branch", "--untracked-files=normal"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    lines = proc.stdout.splitlines()
    if not lines or not lines[0].startswith("## "):
        return None
    head = lines[0][3:]
    if head.startswith("No commits yet on "):
        branch = head[len("No commits yet on ") :] + " (no commits yet)"
    elif head.startswith("HEAD (no branch)"):
        branch = "detached HEAD"
    else:
        branch = head.split("...")[0].split(" ")[0]
    changed = len(lines) - 1
    state = f"{changed} changed file{'s' if changed != 1 else ''}" if changed else "clean"
    return f"Git: branch {branch}, {state}"


def system_prompt(
    cwd: Path, *, tools: Collection[str] | None = None, today: datetime.date | None = None, git: str | None | object = _AUTO
) -> str:
    """The prompt for a session rooted at ``cwd``. Computed once per session and kept, across
    reopening too (``kept_prompt``): its git line and date are those of the session's start.

    ``tools``: names of the tools the session has, so the prompt promises no other (None: all).
    ``git`` is the repository line (see ``git_summary``); by default it is worked out here.
    """
    today = today or datetime.date.today()
    if git is _AUTO:
        git = git_summary(cwd)
    git_line = f"\n{git}" if git else ""
    return (
        f"{base_prompt(tools)}\n\nWorking directory: {cwd}{git_line}\nPlatform: {platform.system()} {platform.machine()}\n"
        f"Date: {today.isoformat()}"
    )


def kept_prompt(meta: Mapping[str, object], cwd: Path, tools: Collection[str] | None = None) -> str | None:
    """The opening a stored session began with (its ``meta[PROMPT_KEY]``), when it still fits: the
    same working directory, and the same promise about commands for ``tools``. None: make a new one.

    Keeping it keeps the whole conversation a provider cached: a new git line (the files the
    agent changed) or a new date would change the first bytes of every request."""
    kept = meta.get(PROMPT_KEY)
    if not isinstance(kept, str) or not kept.startswith(f"{base_prompt(tools)}\n\nWorking directory: {cwd}\n"):
        return None
    return kept


async def choose_personality(store: SessionStore, session_id: str, context: SessionContext | None, name: str) -> Personality | None:
    """``/personality NAME``: resolve ``name`` (``none`` clears; PersonalityError, naming the choices,
    for an unknown one), keep the choice with the session (a reopened session keeps it) and use it
    from the session's next turn. Returns the overlay chosen (None: cleared)."""
    from core.learning.personality import PERSONALITY_KEY, resolve

    chosen = await asyncio.to_thread(resolve, name)
    label = chosen.name if chosen is not None else None
    await store.update_session(session_id, meta={PERSONALITY_KEY: label})
    if context is not None:
        await asyncio.to_thread(context.choose_personality, label)
    return chosen


def personality_listing(current: str | None) -> str:
    """What ``/personality`` alone shows: the overlays, the current one marked, and how to switch."""
    from core.learning.personality import available, personal_dir

    found = available()
    lines = [f"{'→' if p.name == current else '-'} `{p.name}` ({p.origin}) — {p.description}" for p in found]
    now = f"Personality: `{current}`." if current else "Personality: none (SOUL.md alone)."
    how = f"Switch with /personality NAME (from the next turn), clear with /personality none. Add your own as {personal_dir()}/NAME.md."
    return "\n".join([now, *lines, how])
