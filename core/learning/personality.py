"""Personality overlays: a short style laid over the persona, chosen per session with ``/personality``.

SOUL.md stays the persona. An overlay is a Markdown file: ``personalities/NAME.md`` in the state
home (the user's own, which shadow bundled ones of the same name) or one bundled with hermes-editor
(``concise``, ``teacher``). It may open with front matter holding a ``description`` (what
``/personality`` lists); the rest is the overlay. It is capped and screened as SOUL.md and context
files are (:mod:`core.learning.screening`), since it goes into the system prompt.

A session's choice is kept in its meta under :data:`PERSONALITY_KEY`, so a reopened session keeps
it; the prompt takes it from the next turn (``core.agent.session``), never within one.

Names are typed by users in chats and editors: they must match :data:`_NAME` (lowercase letters,
digits, ``-`` and ``_``), and a file is found by listing the folders, never by joining a typed
name to a path. Only regular files count (a symlink is skipped), read up to a cap.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.config import home
from core.learning.screening import Finding, screen

__all__ = [
    "CLEAR",
    "MAX_OVERLAY_CHARS",
    "PERSONALITY_KEY",
    "Overlay",
    "Personality",
    "PersonalityError",
    "available",
    "bundled_dir",
    "find",
    "load_overlay",
    "personal_dir",
    "resolve",
    "watched",
]

# Where a session's meta keeps the chosen overlay's name.
PERSONALITY_KEY = "personality"
# The word that clears the overlay (``/personality none``).
CLEAR = "none"
MAX_OVERLAY_CHARS = 4_000
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

Origin = Literal["personal", "bundled"]


class PersonalityError(ValueError):
    """A personality that cannot be chosen; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class Personality:
    name: str
    origin: Origin
    path: Path
    description: str


@dataclass(frozen=True, slots=True)
class Overlay:
    """An overlay as it enters the prompt: capped and screened."""

    name: str
    path: Path
    text: str
    findings: tuple[Finding, ...] = ()

    def section(self) -> str:
        """The system prompt section."""
        return (
            f"# Personality for this session: {self.name} (chosen by the user; where it differs from the persona above, follow it)\n"
            f"{self.text.strip()}"
        )


def personal_dir() -> Path:
    return home() / "personalities"


def bundled_dir() -> Path:
    """Overlays shipped with hermes-editor: ``personalities/`` in a checkout, ``core/bundled_personalities`` in a wheel."""
    packaged = Path(__file__).parents[1] / "bundled_personalities"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "personalities"


def _sources() -> tuple[tuple[Path, Origin], ...]:
    """Where overlays come from, the first shadowing the second."""
    return ((personal_dir(), "personal"), (bundled_dir(), "bundled"))


def _regular_files(folder: Path) -> dict[str, Path]:
    """name -> path of each ``NAME.md`` in ``folder`` that is a regular file (not a link) with a valid name."""
    found: dict[str, Path] = {}
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for entry in entries:
        name, ext = os.path.splitext(entry.name)
        if ext != ".md" or not _NAME.match(name):
            continue
        try:
            if stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                found[name] = Path(entry.path)
        except OSError:
            continue
    return found


def _read(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with open(fd, encoding="utf-8", errors="replace") as handle:
        return handle.read(MAX_OVERLAY_CHARS * 2)


def _split(text: str) -> tuple[str, str]:
    """(description, overlay body) of an overlay file."""
    from core.learning.skills import parse_front_matter

    meta, body = parse_front_matter(text)
    description = " ".join(str(meta.get("description", "")).split())
    if not description:
        first = next((line.strip("# ").strip() for line in body.splitlines() if line.strip()), "")
        description = first
    return description[:200], body


def available() -> list[Personality]:
    """Every overlay by name (the user's shadow bundled ones), sorted."""
    found: dict[str, Personality] = {}
    for folder, origin in _sources():
        for name, path in sorted(_regular_files(folder).items()):
            if name in found:
                continue
            text = _read(path)
            if text is not None:
                found[name] = Personality(name, origin, path, _split(text)[0])
    return [found[n] for n in sorted(found)]


def find(name: str) -> Personality | None:
    """The overlay called ``name``; None for no such overlay or a name that cannot be one."""
    if not _NAME.match(name):
        return None
    for folder, origin in _sources():
        path = _regular_files(folder).get(name)
        text = _read(path) if path is not None else None
        if path is not None and text is not None:
            return Personality(name, origin, path, _split(text)[0])
    return None


def resolve(name: str) -> Personality | None:
    """The overlay a user asked for by ``name`` (None for :data:`CLEAR`); PersonalityError, naming
    the choices, for anything else."""
    word = name.strip()
    if word.lower() == CLEAR:
        return None
    found = find(word)
    if found is None:
        names = ", ".join(p.name for p in available()) or "none yet"
        shown = word if len(word) <= 64 and word.isprintable() else repr(word[:64])
        raise PersonalityError(
            f"no personality named {shown!r} (available: {names}). Add one as {personal_dir()}/NAME.md "
            "(lowercase letters, digits, - and _), or use 'none' to clear it."
        )
    return found


def load_overlay(name: str) -> Overlay | None:
    """The overlay ``name`` as it enters the prompt (capped, screened); None when it is gone or empty."""
    found = find(name)
    if found is None:
        return None
    text = _read(found.path)
    if text is None:
        return None
    _, body = _split(text)
    if not body.strip():
        return None
    if len(body) > MAX_OVERLAY_CHARS:
        body = body[:MAX_OVERLAY_CHARS] + f"\n[… the rest of {found.path.name} is left out: overlays are kept short …]"
    checked = screen(body, str(found.path))
    return Overlay(found.name, found.path, checked.text, checked.findings)


def watched(name: str) -> tuple[Path, ...]:
    """Files whose change may change the overlay ``name`` (the user's may appear and shadow a bundled one)."""
    if not _NAME.match(name):
        return ()
    return (personal_dir() / f"{name}.md", bundled_dir() / f"{name}.md")
