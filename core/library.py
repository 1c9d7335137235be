"""Skills and memory as files: simple readers, and one writer for memory entries.

Skills live in ``home()/skills/<name>/SKILL.md`` (personal) and ``<project>/.agents/skills/
<name>/SKILL.md`` (project; a project skill shadows a personal one of the same name). A skill
file may open with front matter (``---`` lines holding ``key: value`` pairs); ``name`` and
``description`` are read, other keys are kept for later readers. Memory is two Markdown files,
``home()/memories/MEMORY.md`` (notes) and ``USER.md`` (about the user); ``add_memory``
appends one entry under an exclusive file lock so that two processes never interleave.

Every surface uses these; a later issue may deepen both (ranking, limits, a memory tool in
the loop) without changing what is on disk.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from core.config import home

__all__ = [
    "MEMORY_FILES",
    "MemoryFile",
    "MemoryFull",
    "Skill",
    "add_memory",
    "find_skill",
    "list_skills",
    "memory_dir",
    "personal_skills_dir",
    "project_skills_dir",
    "read_memory_files",
    "skill_name_ok",
    "skills_fingerprint",
]

MemoryKind = Literal["memory", "user"]
# kind -> (file name, label)
MEMORY_FILES: dict[str, tuple[str, str]] = {"user": ("USER.md", "About the user"), "memory": ("MEMORY.md", "Notes")}
MAX_ENTRY_CHARS = 2_000
# Memory ends up in prompts; a file past this size is a sign something went wrong.
MAX_MEMORY_FILE_BYTES = 64_000
MAX_SKILL_BYTES = 512_000
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class MemoryFull(ValueError):
    """The memory file would grow past its limit; the message says what to do."""


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill file: where it is, what it says about itself, and (when read) its text."""

    name: str
    origin: Literal["personal", "project"]
    path: Path
    description: str = ""
    meta: dict[str, str] = field(default_factory=dict)
    text: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryFile:
    kind: str
    label: str
    path: Path
    text: str


def personal_skills_dir() -> Path:
    return home() / "skills"


def project_skills_dir(project: Path) -> Path:
    return project / ".agents" / "skills"


def memory_dir() -> Path:
    return home() / "memories"


def skill_name_ok(name: str) -> bool:
    """Whether ``name`` can be a skill's name (a directory name without path tricks)."""
    return bool(_NAME.match(name)) and ".." not in name


def _skill_roots(projects: Iterable[Path]) -> list[tuple[Path, Literal["personal", "project"]]]:
    roots: list[tuple[Path, Literal["personal", "project"]]] = [(personal_skills_dir(), "personal")]
    seen: set[Path] = set()
    for project in projects:
        folder = project_skills_dir(Path(project))
        if folder not in seen:
            seen.add(folder)
            roots.append((folder, "project"))
    return roots


def list_skills(projects: Iterable[Path] = ()) -> list[Skill]:
    """Personal skills and those of ``projects``, by name; a project's skill shadows a personal one."""
    found: dict[str, Skill] = {}
    for root, origin in _skill_roots(projects):
        if not root.is_dir():
            continue
        for path in sorted(root.glob("*/SKILL.md")):
            name = path.parent.name
            if not skill_name_ok(name) or (name in found and found[name].origin == "project"):
                continue
            meta = _front_matter(_read_head(path))
            found[name] = Skill(name, origin, path, meta.get("description", ""), meta)
    return [found[name] for name in sorted(found)]


def find_skill(name: str, projects: Iterable[Path] = ()) -> Skill | None:
    """The named skill with its text, or None."""
    if not skill_name_ok(name):
        return None
    for skill in list_skills(projects):
        if skill.name == name:
            try:
                with open(skill.path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read(MAX_SKILL_BYTES)
            except OSError:
                return None
            return Skill(skill.name, skill.origin, skill.path, skill.description, skill.meta, text)
    return None


def skills_fingerprint(projects: Iterable[Path] = ()) -> tuple[tuple[str, int, int], ...]:
    """A cheap value that changes when a skill is added, removed or edited (for change notices)."""
    entries = []
    for root, _ in _skill_roots(projects):
        if not root.is_dir():
            continue
        for path in sorted(root.glob("*/SKILL.md")):
            try:
                stat = path.stat()
            except OSError:
                continue
            entries.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(entries)


def read_memory_files() -> list[MemoryFile]:
    """Both memory files (empty text when a file does not exist yet)."""
    out = []
    for kind, (name, label) in MEMORY_FILES.items():
        path = memory_dir() / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            text = ""
        out.append(MemoryFile(kind, label, path, text))
    return out


def add_memory(text: str, kind: MemoryKind = "memory") -> tuple[Path, str]:
    """Append one entry (a Markdown list item) to a memory file; returns the path and the entry.

    An exclusive ``flock`` on the file serialises writers across processes; the entry is
    written with one ``write`` and synced.
    """
    if kind not in MEMORY_FILES:
        raise ValueError(f"memory file must be one of {', '.join(MEMORY_FILES)}, not {kind!r}")
    body = "\n".join(line.rstrip() for line in text.strip().splitlines())
    if not body:
        raise ValueError("the entry is empty")
    if len(body) > MAX_ENTRY_CHARS:
        raise ValueError(f"the entry has {len(body)} characters; keep it under {MAX_ENTRY_CHARS}")
    entry = "- " + body.replace("\n", "\n  ") + "\n"
    path = memory_dir() / MEMORY_FILES[kind][0]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size + len(entry.encode()) > MAX_MEMORY_FILE_BYTES:
            raise MemoryFull(
                f"{path} would grow past {MAX_MEMORY_FILE_BYTES} bytes; tidy it (merge or drop old entries) first"
            )
        prefix = ""
        if size:
            os.lseek(fd, -1, os.SEEK_END)
            if os.read(fd, 1) != b"\n":
                prefix = "\n"
        os.write(fd, (prefix + entry).encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock
    from core.memory import journal_change  # memory builds on this module's files

    journal_change("library", kind, "add", None, body)
    return path, entry


def _read_head(path: Path, limit: int = 8192) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return ""


def _front_matter(text: str) -> dict[str, str]:
    """``key: value`` pairs between a leading ``---`` line and the next one (no full YAML)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}
    meta: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            return meta
        key, sep, value = line.partition(":")
        if sep and key.strip() and not key.startswith((" ", "\t")):
            meta[key.strip()] = value.strip().strip("\"'")
    return {}  # never closed: not front matter
