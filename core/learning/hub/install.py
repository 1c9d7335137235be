"""Install, update and remove skills from sources, with a provenance record for each.

Nothing is written before the whole skill passed screening, and a skill is written into a
temporary folder beside its final place and renamed into it under the hub file's lock, so
another process sees either no skill or all of it. What an update or a removal replaces moves
to ``skills/.archive/`` (as the curator's archives do): nothing is lost.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.learning.hub import sources as hub_sources
from core.learning.hub.screen import SkillFile, read_skill, tree_hash
from core.learning.hub.sources import Candidate, Source
from core.learning.hub.state import HubError, is_pinned, locked, record
from core.learning.skills import is_skill_name

if TYPE_CHECKING:
    from core.learning_config import SkillsSettings

__all__ = ["Installed", "UpdatePlan", "apply_update", "edited_message", "install", "plan_update", "remove", "search", "source_summary"]

_BARE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True, slots=True)
class Installed:
    name: str
    folder: Path
    source: str
    version: str  # the commit or content hash


@dataclass(slots=True)
class UpdatePlan:
    """What ``update`` would change in one installed skill: shown first, applied on a yes."""

    name: str
    record: dict[str, Any]
    origin: Source
    version: str
    files: list[SkillFile]
    diff: str
    local_hash: str
    edited: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.diff)


# --- search -----------------------------------------------------------------------------------


def search(settings: SkillsSettings, query: str, only: str | None = None) -> tuple[list[Candidate], list[str]]:
    """Skills of the configured sources whose name or description holds every word of ``query``,
    and one line per source that could not be read (the others are still searched)."""
    words = query.lower().split()
    sources = hub_sources.configured(settings, only)
    if not sources:
        raise HubError('no skill sources are configured: add [skills.sources.NAME] to config.toml (git = "owner/repo", folder or index)')
    found: list[Candidate] = []
    problems: list[str] = []
    for source in sources:
        try:
            with hub_sources.fetch(source, settings) as tree:
                found += [c for c in tree.candidates if all(w in f"{c.name} {c.description}".lower() for w in words)]
        except HubError as exc:
            problems.append(f"{source.name}: {exc}")
    return found, problems


# --- install ----------------------------------------------------------------------------------


def _is_name(target: str) -> bool:
    """A bare skill name (looked up in the configured sources) rather than a URL, owner/repo or path
    (a folder here named like a skill is given as ./NAME)."""
    return bool(_BARE_NAME.match(target)) and target not in (".", "..")


def install(
    settings: SkillsSettings,
    target: str,
    *,
    only: str | None = None,
    ref: str | None = None,
    subpath: str | None = None,
    pick: tuple[str, ...] = (),
    every: bool = False,
    as_name: str | None = None,
    projects: tuple[Path, ...] = (),
) -> list[Installed]:
    """Install ``target``: a skill name offered by a configured source, or a source given directly
    (its one skill, the ``pick`` ones, or ``every`` one). Refuses before writing anything when a
    skill fails screening or its name clashes."""
    if _is_name(target):
        if ref or subpath:
            raise HubError("--ref and --subpath apply to a source given directly (a URL, owner/repo or folder), not to a skill name")
        candidate = _named(settings, target, only)
        origin, via, pick = candidate.origin, candidate.via, (candidate.name,)
    else:
        if only:
            raise HubError("--source picks among configured sources; a URL, owner/repo or folder is a source itself")
        origin = via = hub_sources.parse_spec(target, settings.forge, ref=ref, subpath=subpath)
    if as_name and (every or len(pick) > 1):
        raise HubError("--as renames one skill; install the others separately")
    staged: list[tuple[str, Path, dict[str, Any]]] = []
    try:
        with hub_sources.fetch(origin, settings) as tree:
            for candidate in _choose(tree.candidates, origin, pick, every):
                staged.append(_stage(settings, candidate, tree.base, tree.commit, via, as_name, projects))
    except BaseException:
        for _, folder, _ in staged:  # one refused skill of several: none is installed
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return [_commit_install(*stage) for stage in staged]


def _named(settings: SkillsSettings, name: str, only: str | None) -> Candidate:
    found, problems = search(settings, "", only)
    matches = [c for c in found if c.name == name]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        unread = f" (could not read: {'; '.join(problems)})" if problems else ""
        raise HubError(
            f"no configured source offers a skill named {name!r}{unread}. Look with hermes-editor skills search WORDS, "
            "or give its source: hermes-editor skills install owner/repo[/path][@ref] (or a URL or folder)"
        )
    where = ", ".join(c.via.name or c.via.label() for c in matches)
    raise HubError(f"{len(matches)} sources offer {name!r} ({where}); choose one with --source NAME")


def _choose(candidates: list[Candidate], source: Source, pick: tuple[str, ...], every: bool) -> list[Candidate]:
    if not candidates:
        raise HubError(f"{source.label()} holds no skill (no SKILL.md at its root, in skills/ or in a folder below)")
    if every:
        return candidates
    if pick:
        missing = [p for p in pick if p not in {c.name for c in candidates}]
        if missing:
            raise HubError(
                f"{source.label()} has no skill {', '.join(map(repr, missing))}; it has: {', '.join(c.name for c in candidates)}"
            )
        return [c for c in candidates if c.name in pick]
    if len(candidates) > 1:
        names = ", ".join(c.name for c in candidates)
        raise HubError(f"{source.label()} holds {len(candidates)} skills ({names}); choose with --skill NAME (repeatable) or --all")
    return candidates


def _stage(
    settings: SkillsSettings,
    candidate: Candidate,
    base: Path,
    commit: str | None,
    via: Source,
    as_name: str | None,
    projects: tuple[Path, ...],
) -> tuple[str, Path, dict[str, Any]]:
    """Screen one fetched skill and write it to a temporary folder beside its final place:
    (name, staged folder, record). Raises before anything is written when it must."""
    name = as_name or candidate.name
    if not is_skill_name(name):
        raise HubError(
            f"the source names a skill {candidate.name!r}, which is not a skill name (lowercase letters, digits and hyphens, "
            "at most 64); install it under another with --as NAME"
        )
    _check_clash(name, projects)
    folder = base / candidate.origin.subpath if candidate.origin.subpath else base
    files = read_skill(folder, name, max_file_bytes=settings.max_file_bytes, max_skill_bytes=settings.max_skill_bytes)
    _check_front_matter(name, files)
    digests = {f.path: f.digest for f in files}
    now = time.time()
    rec: dict[str, Any] = {
        "source": candidate.origin.to_record(),
        "via": via.to_record() if via != candidate.origin else None,
        "upstream_name": candidate.name,
        "commit": commit,
        "content_hash": None if commit else tree_hash(digests),
        "installed_at": now,
        "updated_at": now,
        "files": digests,
        "tree_hash": tree_hash(digests),
    }
    return name, _write_staged(files), rec


def _check_front_matter(name: str, files: list[SkillFile]) -> None:
    from core.learning.skills import parse_front_matter

    text = next(f.data for f in files if f.path == "SKILL.md").decode("utf-8", errors="replace")
    meta, body = parse_front_matter(text)
    if not str(meta.get("description", "")).strip():
        raise HubError(f"refused {name!r}: its SKILL.md has no front matter with a description (---\\nname: ...\\ndescription: ...\\n---)")


def _check_clash(name: str, projects: tuple[Path, ...]) -> None:
    from core.learning.skills import bundled_skills_dir, personal_dir

    if (bundled_skills_dir() / name / "SKILL.md").is_file():
        raise HubError(f"{name!r} is the name of a skill bundled with hermes-editor; install it under another name with --as NAME")
    for project in projects:
        if (project / ".agents" / "skills" / name / "SKILL.md").is_file():
            raise HubError(
                f"{name!r} is a project skill of {project} (which would shadow it there); install it under another name with --as NAME"
            )
    if (personal_dir() / name).exists():
        if record(name):
            raise HubError(f"{name!r} is installed already; update it with hermes-editor skills update {name}")
        raise HubError(
            f"a personal skill named {name!r} exists already; install this one under another name with --as NAME, "
            f"or archive that one first with hermes-editor skills remove {name}"
        )


def _write_staged(files: list[SkillFile]) -> Path:
    """The files in a new private folder inside the skills folder (renamed into place later)."""
    from core.learning.skills import personal_dir

    personal_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
    staged = Path(tempfile.mkdtemp(prefix=".hub-", dir=personal_dir()))
    for file in files:
        target = staged / file.path
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700 if file.executable else 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(file.data)
    return staged


def _commit_install(name: str, staged: Path, rec: dict[str, Any]) -> Installed:
    from core.learning.skills import personal_dir

    target = personal_dir() / name
    try:
        with locked() as data:
            if target.exists():
                raise HubError(f"{name!r} appeared while installing (another install?); nothing was changed")
            os.rename(staged, target)
            data["installed"][name] = rec
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return Installed(name, target, Source.from_record(rec["source"]).label(), rec["commit"] or rec["content_hash"])


# --- update -----------------------------------------------------------------------------------


def plan_update(settings: SkillsSettings, name: str) -> UpdatePlan:
    """Fetch ``name``'s source again and work out what would change (screened, not applied)."""
    from core.learning.skills import personal_dir

    rec = record(name)
    if rec is None:
        raise HubError(f"{name!r} was not installed from a source (hermes-editor skills list shows where skills come from)")
    if is_pinned(name):
        raise HubError(f"{name!r} is pinned at {_short(rec)}; unpin it first with hermes-editor skills unpin {name}")
    origin = _current_origin(settings, rec)
    with hub_sources.fetch(origin, settings) as tree:
        folder = tree.base / origin.subpath if origin.subpath else tree.base
        if not (folder / "SKILL.md").is_file():
            raise HubError(f"{origin.label()} no longer holds the skill {rec.get('upstream_name') or name!r}")
        files = read_skill(folder, name, max_file_bytes=settings.max_file_bytes, max_skill_bytes=settings.max_skill_bytes)
        _check_front_matter(name, files)
        version = tree.commit or tree_hash({f.path: f.digest for f in files})
    local = _read_local(personal_dir() / name)
    local_digests = {path: _sha(data) for path, data in local.items()}
    recorded: dict[str, str] = rec.get("files") or {}
    edited = sorted(p for p in set(recorded) | set(local_digests) if recorded.get(p) != local_digests.get(p))
    diff = unified_diff(local, {f.path: f.data for f in files})
    plan = UpdatePlan(name, rec, origin, version, files, diff, tree_hash(local_digests), edited)
    return plan


def _current_origin(settings: SkillsSettings, rec: dict[str, Any]) -> Source:
    """Where to fetch an installed skill now: its index entry as the index says today, else its recorded source."""
    via = rec.get("via")
    if via and via.get("kind") == "index":
        index = Source.from_record(via)
        wanted = rec.get("upstream_name")
        entry = next((c for c in hub_sources.read_index(index, settings) if c.name == wanted), None)
        if entry is None:
            raise HubError(f"the index {index.label()} no longer lists {wanted!r}")
        return entry.origin
    return Source.from_record(rec["source"])


def apply_update(plan: UpdatePlan, *, force: bool = False) -> Path | None:
    """Replace the installed skill with the planned version; the old one moves to the archive
    (its path is returned; None when the installed folder was gone)."""
    from core.learning.skills import personal_dir

    if plan.edited and not force:
        raise HubError(edited_message(plan))
    staged = _write_staged(plan.files)
    target = personal_dir() / plan.name
    try:
        with locked() as data:
            if plan.name in data["pins"]:
                raise HubError(f"{plan.name!r} was pinned meanwhile; nothing was changed")
            now_local = tree_hash({p: _sha(d) for p, d in _read_local(target).items()})
            if now_local != plan.local_hash:
                raise HubError(f"{plan.name!r} changed on disk while updating; nothing was changed. Run the update again")
            archived = _archive(target) if target.exists() else None
            os.rename(staged, target)
            digests = {f.path: f.digest for f in plan.files}
            data["installed"][plan.name] = {
                **plan.record,
                "source": plan.origin.to_record(),
                "commit": plan.version if not plan.version.startswith("sha256:") else None,
                "content_hash": plan.version if plan.version.startswith("sha256:") else None,
                "updated_at": time.time(),
                "files": digests,
                "tree_hash": tree_hash(digests),
            }
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return archived


def edited_message(plan: UpdatePlan) -> str:
    shown = ", ".join(plan.edited[:8]) + (" …" if len(plan.edited) > 8 else "")
    return (
        f"{plan.name!r} was edited here since it was installed ({shown}); the update would replace those edits "
        f"(the edited copy would move to the archive). Re-run with --force to update anyway"
    )


def record_version(name: str, version: str) -> None:
    """Note that upstream moved to ``version`` without changing this skill's files."""
    with locked() as data:
        if name in data["installed"]:
            key = "content_hash" if version.startswith("sha256:") else "commit"
            data["installed"][name][key] = version
            data["installed"][name]["updated_at"] = time.time()


def unified_diff(old: dict[str, bytes], new: dict[str, bytes]) -> str:
    """Per-file unified diffs from ``old`` to ``new`` (path -> bytes); "" when they are the same."""
    chunks: list[str] = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        try:
            a = before.decode("utf-8").splitlines(keepends=True) if before is not None else []
            b = after.decode("utf-8").splitlines(keepends=True) if after is not None else []
        except UnicodeDecodeError:
            chunks.append(f"Binary file {path} {'added' if before is None else 'removed' if after is None else 'differs'}\n")
            continue
        lines = difflib.unified_diff(
            a, b, fromfile=f"a/{path}" if before is not None else "/dev/null", tofile=f"b/{path}" if after is not None else "/dev/null"
        )
        chunks.append("".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines))
    return "".join(chunks)


def _read_local(folder: Path) -> dict[str, bytes]:
    """The files of an installed skill as they are now (symlinks and oversized files shown as such)."""
    out: dict[str, bytes] = {}
    if not folder.is_dir():
        return out
    for current, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = [d for d in dirs if not (Path(current) / d).is_symlink()]
        for entry in names:
            path = Path(current) / entry
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink() or not path.is_file():
                out[rel] = f"(not a regular file: {rel})".encode()
                continue
            with open(path, "rb") as handle:
                out[rel] = handle.read(50_000_000)
    return out


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _archive(folder: Path) -> Path:
    """Move ``folder`` to ``skills/.archive/NAME-TIMESTAMP`` (a new name if that one is taken)."""
    from core.learning.skills import personal_dir

    archive = personal_dir() / ".archive"
    archive.mkdir(parents=True, exist_ok=True, mode=0o700)
    stem = f"{folder.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    target, n = archive / stem, 1
    while target.exists():
        n += 1
        target = archive / f"{stem}-{n}"
    os.rename(folder, target)
    return target


# --- remove -----------------------------------------------------------------------------------


def remove(name: str, projects: tuple[Path, ...] = ()) -> Path:
    """Archive a personal skill (installed or written by the agent or you) and forget its record and pin."""
    from core.learning.skills import find, personal_dir

    folder = personal_dir() / name
    if is_skill_name(name) and not folder.exists() and record(name) is not None:
        with locked() as data:
            data["installed"].pop(name, None)
            data["pins"].pop(name, None)
        raise HubError(f"{name!r} was installed but its folder {folder} is gone; its record is forgotten now")
    if not is_skill_name(name) or not (folder / "SKILL.md").is_file():
        found = find(name, projects) if is_skill_name(name) else None
        if found is None:
            raise HubError(f"no skill named {name!r} (hermes-editor skills list shows them)")
        if found.origin == "bundled":
            raise HubError(f"{name!r} is bundled with hermes-editor and cannot be removed (a personal skill of that name would shadow it)")
        raise HubError(f"{name!r} is a project skill ({found.folder}); it belongs to the repository: remove it there if you mean to")
    with locked() as data:
        archived = _archive(folder)
        data["installed"].pop(name, None)
        data["pins"].pop(name, None)
    return archived


# --- listing ------------------------------------------------------------------------------------


def _short(rec: dict[str, Any]) -> str:
    version = rec.get("commit") or rec.get("content_hash") or "?"
    return version.removeprefix("sha256:")[:12]


def source_summary(rec: dict[str, Any]) -> dict[str, Any]:
    """What ``skills list`` shows of an install: the source, its ref and the pinned version."""
    source = Source.from_record(rec["source"])
    via = Source.from_record(rec["via"]) if rec.get("via") else None
    return {
        "source": (via or source).label() if (via and via.kind == "index") else source.label(),
        "kind": source.kind,
        "location": hub_sources.redact_url(source.location),
        "subpath": source.subpath,
        "ref": source.ref,
        "commit": rec.get("commit"),
        "content_hash": rec.get("content_hash"),
        "version": _short(rec),
        "installed_at": rec.get("installed_at"),
        "updated_at": rec.get("updated_at"),
    }
