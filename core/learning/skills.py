"""Skills in the agentskills.io format, with progressive disclosure and agent-written skills.

A skill is a folder holding ``SKILL.md`` (YAML front matter with ``name`` and ``description``,
optionally ``requires_toolsets``, ``fallback_for_toolsets`` and ``platforms``) and optional
``scripts/``, ``references/`` and ``assets/``. Sources, highest precedence first: the project's ``.agents/skills/``, the
state home's ``skills/``, and the skills bundled with hermes-editor. The system prompt lists
names and one-line descriptions only; ``skill_view`` loads a body or a file on demand.

Conditions, checked wherever skills are offered to a session (the prompt's index, slash
commands in the editor and on the gateway): ``requires_toolsets`` (a list) offers the skill only
when every one of them is active; ``fallback_for_toolsets`` offers it only when none of them is
active, as in Hermes Agent: a fallback for ``[web, browser]`` stands in for both and goes away as
soon as either is there, since the session then has the better way; ``platforms`` (``linux``,
``macos``, ``windows``) only on those systems.

Usage (views, last use) and authorship live in ``skills/.usage.json`` in the state home,
locked with ``flock`` so the surfaces can record at once.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from core.config import home
from core.learning.screening import Finding, Flagged, Screened, looks_secret, review_learned, screen, screen_learned
from core.locked_json import locked_json

__all__ = [
    "Skill",
    "SkillError",
    "SkillFlagged",
    "archive_skill",
    "bundled_skills_dir",
    "create_skill",
    "file_stamps",
    "discover",
    "find",
    "fingerprint",
    "index_screened",
    "index_text",
    "is_skill_name",
    "offered",
    "parse_front_matter",
    "patch_skill",
    "read_text",
    "record_use",
    "usage",
    "view",
]

Origin = Literal["project", "personal", "bundled"]
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MAX_DESCRIPTION = 1024
MAX_SKILL_CHARS = 100_000


def is_skill_name(name: str) -> bool:
    """Whether ``name`` may name a skill: lowercase letters, digits and hyphens, at most 64 (its folder's name)."""
    return bool(_NAME.match(name))


VIEW_CHARS = 40_000


class SkillError(ValueError):
    """A skill operation that cannot be done; the message says why."""


class SkillFlagged(SkillError):
    """Screening flagged the skill: a person must approve it (see :mod:`core.learning.gate`)."""

    def __init__(self, flags: tuple[Flagged, ...]) -> None:
        from core.learning.gate import describe

        self.flags = flags
        super().__init__(
            f"Nothing was saved: screening flagged the skill ({describe(flags)}). Skills reach every later session, "
            "so such steps need the user's approval; leave them out unless the user asked for them."
        )


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    origin: Origin
    path: Path  # the SKILL.md file
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.path.parent


def bundled_skills_dir() -> Path:
    """Skills shipped with hermes-editor: ``skills/`` in a checkout, ``core/bundled_skills`` in a wheel."""
    packaged = Path(__file__).parents[1] / "bundled_skills"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "skills"


def personal_dir() -> Path:
    return home() / "skills"


def _sources(projects: Iterable[Path]) -> list[tuple[Path, Origin]]:
    out: list[tuple[Path, Origin]] = [(Path(p) / ".agents" / "skills", "project") for p in projects]
    return out + [(personal_dir(), "personal"), (bundled_skills_dir(), "bundled")]


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter, body) for the YAML subset skills use: scalars, ``[a, b]`` and ``- item`` lists,
    nested mappings flattened into the top level (``metadata: hermes: requires_toolsets: [...]``, as
    Hermes Agent's skills write their conditions, reads as ``requires_toolsets``); a ``- item`` belongs
    to the nearest key above it with nothing after its colon."""
    kept = text.splitlines(keepends=True)
    lines = [line.rstrip("\r\n") for line in kept]
    if not lines or lines[0].strip() != "---":
        return {}, text
    meta: dict[str, Any] = {}
    last: str | None = None
    for number, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return meta, "".join(kept[number + 1 :]).lstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        stripped = line.strip()
        if line[0] in " \t" and stripped.startswith("- ") and last is not None:
            existing = meta.get(last)
            meta[last] = [*(existing if isinstance(existing, list) else []), _scalar(stripped[2:])]
            continue
        key, sep, value = stripped.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if value.startswith("[") and value.endswith("]"):
            meta[key] = [_scalar(v) for v in value[1:-1].split(",") if v.strip()]
        elif value:
            meta[key] = _scalar(value)
        else:
            meta[key] = []  # a list or mapping follows
            last = key
            continue
        if line[0] not in " \t":
            last = None
    return {}, text  # never closed: not front matter


def _scalar(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _as_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [v.strip() for v in str(value).split(",") if v.strip()] if value else []


def _load(path: Path, origin: Origin) -> Skill | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = handle.read(8192)
    except OSError:
        return None
    meta, _ = parse_front_matter(head)
    name = path.parent.name
    if not _NAME.match(name):
        return None
    description = " ".join(str(meta.get("description", "")).split())[:MAX_DESCRIPTION]
    return Skill(name, description, origin, path, meta)


def discover(projects: Iterable[Path] = (), *, toolsets: Iterable[str] | None = None) -> list[Skill]:
    """Every skill by name (a higher source shadows a lower one), sorted; with ``toolsets`` (the
    session's active toolsets), only those offered to it (see :func:`offered`)."""
    found: dict[str, Skill] = {}
    for root, origin in _sources(projects):
        if not root.is_dir():
            continue
        for path in sorted(root.glob("*/SKILL.md")):
            if path.parent.name not in found and (skill := _load(path, origin)):
                found[skill.name] = skill
    skills = [found[n] for n in sorted(found)]
    if toolsets is None:
        return skills
    active = frozenset(toolsets)
    return [s for s in skills if offered(s, active)]


def offered(skill: Skill, toolsets: frozenset[str]) -> bool:
    """Whether a session with these active toolsets is offered ``skill``: all of its
    ``requires_toolsets`` are active, none of its ``fallback_for_toolsets`` is, and its
    ``platforms`` (if any) include this one."""
    required = set(_as_list(skill.meta.get("requires_toolsets")))
    replaced = set(_as_list(skill.meta.get("fallback_for_toolsets")))
    return required <= toolsets and not replaced & toolsets and _platform_ok(skill)


def _platform_ok(skill: Skill) -> bool:
    platforms = _as_list(skill.meta.get("platforms"))
    current = {"darwin": "macos", "win32": "windows"}.get(sys.platform, "linux")
    return not platforms or current in platforms or sys.platform in platforms


def find(name: str, projects: Iterable[Path] = (), *, toolsets: Iterable[str] | None = None) -> Skill | None:
    """The skill named ``name`` (with ``toolsets``: only if offered to such a session)."""
    return next((s for s in discover(projects, toolsets=toolsets) if s.name == name), None)


def fingerprint(projects: Iterable[Path] = ()) -> tuple[tuple[str, int, int], ...]:
    """A cheap value that changes when a skill is added, removed or edited (for change notices)."""
    return tuple(entry for root, _ in _sources(projects) for entry in file_stamps(root, "*/SKILL.md"))


def file_stamps(folder: Path, pattern: str) -> list[tuple[str, int, int]]:
    """(path, mtime in ns, size) of each file in ``folder`` matching ``pattern``, sorted; none when it is no folder."""
    if not folder.is_dir():
        return []
    entries = []
    for path in sorted(folder.glob(pattern)):
        try:
            stat = path.stat()
        except OSError:
            continue
        entries.append((str(path), stat.st_mtime_ns, stat.st_size))
    return entries


def read_text(skill: Skill) -> str:
    """The whole SKILL.md (front matter included), up to MAX_SKILL_CHARS."""
    with open(skill.path, encoding="utf-8", errors="replace") as handle:
        return handle.read(MAX_SKILL_CHARS)


def _screen(skill: Skill, text: str, source: Path, approved: frozenset[str] | None = None) -> Screened:
    """Personal skills are what the agent learned: screened as memory is. Project and bundled
    skills come with their repository, like its AGENTS.md."""
    if skill.origin != "personal":
        return screen(text, str(source))
    if approved is None:
        from core.learning.gate import approved as load

        approved = load()
    return screen_learned(text, str(source), approved)


def index_screened(skills: list[Skill]) -> tuple[str, list[Finding]]:
    """The prompt section (names and one-line descriptions; bodies load on demand) and what
    screening neutralised in it."""
    if not skills:
        return "", []
    from core.learning.gate import approved

    accepted = approved()
    lines = ["# Skills (before a task one of these covers, load it with skill_view)"]
    findings: list[Finding] = []
    for skill in skills:
        checked = _screen(skill, skill.description, skill.path, accepted)
        findings.extend(checked.findings)
        lines.append(f"- {skill.name}: {checked.text}")
    return "\n".join(lines), findings


def index_text(skills: list[Skill]) -> str:
    """The prompt section: names and one-line descriptions (bodies load on demand)."""
    return index_screened(skills)[0]


def view(skill: Skill, file: str | None = None) -> str:
    """The skill's body (front matter dropped) and a list of its files, or one of its files."""
    if file:
        target = (skill.folder / file).resolve()
        if not target.is_relative_to(skill.folder.resolve()) or not target.is_file():
            raise SkillError(f"{skill.name} has no file {file!r}")
        text = target.read_text(encoding="utf-8", errors="replace")
        return _screen(skill, text[:VIEW_CHARS], target).text
    _, body = parse_front_matter(skill.path.read_text(encoding="utf-8", errors="replace"))
    checked = _screen(skill, body[:VIEW_CHARS], skill.path)
    extras = sorted(
        str(p.relative_to(skill.folder))
        for sub in ("scripts", "references", "assets")
        for p in (skill.folder / sub).rglob("*")
        if p.is_file()
    )
    listing = "\n\nFiles (skill_view with file=...): " + ", ".join(extras) if extras else ""
    return f"# Skill: {skill.name} ({skill.origin}, {skill.folder})\n\n{checked.text.strip()}{listing}"


# --- usage and authorship --------------------------------------------------------------


def _usage_path() -> Path:
    return personal_dir() / ".usage.json"


def _usage_locked() -> AbstractContextManager[dict[str, Any]]:
    return locked_json(_usage_path())


def usage() -> dict[str, dict[str, Any]]:
    """name -> {uses, last_used, created_by, created_at} for every skill with a record."""
    try:
        records: dict[str, dict[str, Any]] = json.loads(_usage_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return records


def record_use(name: str) -> None:
    with _usage_locked() as data:
        entry = data.setdefault(name, {})
        entry["uses"] = int(entry.get("uses", 0)) + 1
        entry["last_used"] = time.time()


# --- writing ---------------------------------------------------------------------------


def _validate(name: str, content: str, allow: frozenset[str] = frozenset(), trusted: bool = False) -> tuple[Flagged, ...]:
    """Check a SKILL.md about to be written; returns its flagged passages that may be written
    (approved in ``allow``, or ``trusted``: a person wrote it) and raises for anything else."""
    if not _NAME.match(name):
        raise SkillError("a skill name is lowercase letters, digits and hyphens (at most 64), e.g. 'release-checklist'")
    if len(content) > MAX_SKILL_CHARS:
        raise SkillError(f"SKILL.md may hold at most {MAX_SKILL_CHARS} characters")
    meta, body = parse_front_matter(content)
    if meta.get("name") != name:
        raise SkillError(f"SKILL.md must open with front matter: ---\\nname: {name}\\ndescription: ...\\n---")
    description = str(meta.get("description", "")).strip()
    if not description or len(description) > MAX_DESCRIPTION:
        raise SkillError(f"the front matter needs a description of 1-{MAX_DESCRIPTION} characters (when to use it)")
    if not body.strip():
        raise SkillError("the skill has no body: write the steps after the front matter")
    if looks_secret(content):
        raise SkillError("the skill seems to hold a credential; skills never store secrets")
    from core.learning.gate import approved

    findings, flags = review_learned(content, f"{name}/SKILL.md", approved())
    if findings:
        raise SkillError("the skill was refused by screening: " + "; ".join(f.describe() for f in findings))
    if flags and not trusted and not {f.digest for f in flags} <= allow:
        raise SkillFlagged(flags)
    return flags


def _remember(flags: tuple[Flagged, ...], who: str) -> None:
    if flags:
        from core.learning.gate import remember

        remember(flags, who)


def _writable(name: str) -> Path:
    folder = personal_dir() / name
    if not (folder / "SKILL.md").is_file():
        shadowed = find(name)
        where = f" (it is a {shadowed.origin} skill, read-only here)" if shadowed else ""
        raise SkillError(f"no personal skill named {name!r}{where}")
    return folder


def create_skill(name: str, content: str, *, who: str = "agent", allow: frozenset[str] = frozenset(), trusted: bool = False) -> Path:
    """Write a new personal skill (validated); refuses to overwrite one. Flagged passages raise
    :class:`SkillFlagged` unless approved (``allow``) or ``trusted``."""
    flags = _validate(name, content, allow, trusted)
    folder = personal_dir() / name
    if folder.exists():
        raise SkillError(f"a personal skill named {name!r} exists; patch it instead")
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(content if content.endswith("\n") else content + "\n", encoding="utf-8")
    _remember(flags, who)
    with _usage_locked() as data:
        data.setdefault(name, {}).update(created_by=who, created_at=time.time())
    return folder / "SKILL.md"


def patch_skill(name: str, old: str, new: str, *, who: str = "agent", allow: frozenset[str] = frozenset(), trusted: bool = False) -> Path:
    """Replace one exact, unique passage of a personal skill's SKILL.md (validated after, the
    whole file: a patch may complete a passage that only flags once joined)."""
    path = _writable(name) / "SKILL.md"
    text = path.read_text(encoding="utf-8")
    count = text.count(old) if old else 0
    if count != 1:
        raise SkillError(f"old text occurs {count} times in {name}/SKILL.md; quote one exact passage")
    updated = text.replace(old, new, 1)
    flags = _validate(name, updated, allow, trusted)
    path.write_text(updated, encoding="utf-8")
    _remember(flags, who)
    return path


def archive_skill(name: str, *, agent_only: bool = True) -> Path:
    """Move a personal skill to ``skills/.archive/`` (reversible by moving it back)."""
    folder = _writable(name)
    if agent_only and usage().get(name, {}).get("created_by") != "agent":
        raise SkillError(f"{name!r} was not written by the agent; only the user removes it")
    target = personal_dir() / ".archive" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(folder), str(target))
    return target
