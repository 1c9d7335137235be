"""Where skills come from: git repositories, local folders and JSON indexes.

A :class:`Source` is a place plus a sub-path and a ref; :func:`fetch` brings it to a local tree
(a shallow clone in a temporary folder for git, the folder itself for a local source) and
:func:`find_skills` lists the SKILL.md folders in it. Every name and path that came from a
remote is checked before use: a sub-path may not leave its tree, a URL may not be an option or
a command (``-u...``, ``ext::``), and the commit fetched is resolved and recorded.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from core.learning.hub.state import HubError
from core.learning.skills import is_skill_name

if TYPE_CHECKING:
    from core.learning_config import SkillSourceConfig, SkillsSettings

__all__ = [
    "Candidate",
    "Source",
    "Tree",
    "configured",
    "fetch",
    "find_skills",
    "parse_spec",
    "printable",
    "read_index",
    "safe_subpath",
]

Kind = Literal["git", "folder", "index"]
_SHORTHAND = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.-]*)/([A-Za-z0-9_][A-Za-z0-9_.-]*)((?:/[^@\s]+)?)(?:@([^@\s]+))?$")
_SCP_LIKE = re.compile(r"^(?:[A-Za-z0-9_.-]+@)?[A-Za-z0-9.-]+:(?!//)[^\s:]")
_GIT_SCHEMES = ("https://", "http://", "git://", "ssh://", "file://")
_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
MAX_INDEX_BYTES = 5_000_000
SKILL_SEARCH_DEPTH = 3


@dataclass(frozen=True, slots=True)
class Source:
    """A place skills live: a git repository (``location`` is its URL), a local folder, or an index URL."""

    kind: Kind
    location: str
    subpath: str = ""
    ref: str | None = None
    name: str | None = None  # the [skills.sources.NAME] it was configured as

    def label(self) -> str:
        """How the source is shown: its configured name, else where it is."""
        where = redact_url(self.location) + (f"/{self.subpath}" if self.subpath and self.kind == "git" else "")
        where += f"@{self.ref}" if self.ref else ""
        return f"{self.name} ({where})" if self.name else where

    def to_record(self) -> dict[str, Any]:
        return {"kind": self.kind, "location": self.location, "subpath": self.subpath, "ref": self.ref, "name": self.name}

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Source:
        return cls(data["kind"], data["location"], data.get("subpath") or "", data.get("ref"), data.get("name"))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A skill a source offers: its name, description, and the exact place to fetch it from."""

    name: str
    description: str
    origin: Source  # the folder of this one skill (git: repository + sub-path + ref)
    via: Source  # the configured or given source it was found through (an index, a repository)


@dataclass(slots=True)
class Tree:
    """A fetched source on disk: ``base`` is the clone or folder, ``root`` its sub-path."""

    base: Path
    root: Path
    commit: str | None = None
    candidates: list[Candidate] = field(default_factory=list)


def redact_url(url: str) -> str:
    """``url`` without a user:password part, for messages and listings."""
    return re.sub(r"^([a-z+]+://)[^/@]*@", r"\1", url)


def printable(text: str) -> str:
    """``text`` on one line without control or format characters (a terminal escape in a remote
    description must not reach the user's terminal)."""
    import unicodedata

    return " ".join("".join(c for c in text if unicodedata.category(c) not in ("Cc", "Cf")).split())


def safe_subpath(subpath: str, what: str) -> str:
    """``subpath`` normalised ("a/b"), or HubError when it is absolute or climbs out with '..'."""
    cleaned = subpath.replace("\\", "/").strip()
    if cleaned.startswith("/") or re.match(r"^[A-Za-z]:", cleaned):
        raise HubError(f"{what} {subpath!r} is an absolute path; it must be relative to its source")
    parts = [p for p in cleaned.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise HubError(f"{what} {subpath!r} climbs out of its source with '..'")
    if any(ord(c) < 32 for c in cleaned):
        raise HubError(f"{what} {subpath!r} holds control characters")
    return "/".join(parts)


def _check_git_url(url: str) -> str:
    """A git URL git will fetch without running anything: a known scheme or user@host:path."""
    if url.startswith("-") or "::" in url.split("/", 1)[0] or any(c.isspace() or ord(c) < 32 for c in url):
        raise HubError(f"{redact_url(url)!r} is not a git URL (https://, git://, ssh://, file:// or user@host:path)")
    if url.lower().startswith(_GIT_SCHEMES) or _SCP_LIKE.match(url):
        return url
    raise HubError(f"{redact_url(url)!r} is not a git URL (https://, git://, ssh://, file:// or user@host:path)")


def _check_ref(ref: str | None) -> str | None:
    if ref is None or ref == "":
        return None
    if ref.startswith("-") or any(c.isspace() or ord(c) < 32 for c in ref) or ".." in ref or ref.endswith((".lock", "/")):
        raise HubError(f"{ref!r} is not a branch, tag or commit name")
    return ref


def expand_forge(owner_repo: str, forge: str) -> str:
    """``owner/repo`` as a clone URL on ``forge`` (https://github.com/ by default)."""
    return forge.rstrip("/") + "/" + owner_repo.removesuffix(".git") + ".git"


def parse_spec(spec: str, forge: str, *, ref: str | None = None, subpath: str | None = None) -> Source:
    """A source given on the command line: a URL (``URL@ref`` allowed), ``owner/repo[/sub/path][@ref]``,
    or a local path (starting with ``/``, ``./``, ``../`` or ``~``: ``owner/repo`` is never a folder here)."""
    text = spec.strip()
    if not text:
        raise HubError("no source given: a URL, owner/repo[/sub/path][@ref] or a folder")
    if text.startswith(("/", "./", "../", "~")) or text in (".", ".."):
        folder = Path(text).expanduser().resolve()
        if not folder.is_dir():
            raise HubError(f"{spec!r} is not a folder")
        return Source("folder", str(folder), safe_subpath(subpath or "", "subpath"))
    match = _SHORTHAND.match(text)
    if match and "://" not in text:
        owner, repo, sub, at = match.groups()
        inner = safe_subpath((sub or "")[1:], "sub-path")
        if subpath:
            inner = "/".join(p for p in (inner, safe_subpath(subpath, "subpath")) if p)
        return Source("git", _check_git_url(expand_forge(f"{owner}/{repo}", forge)), inner, _check_ref(ref or at))
    url, at = text, None
    head, sep, tail = text.rpartition("@")
    if sep and tail and "/" not in tail and ":" not in tail and ("://" in head or _SCP_LIKE.match(head)):
        url, at = head, tail
    return Source("git", _check_git_url(url), safe_subpath(subpath or "", "subpath"), _check_ref(ref or at))


def from_config(name: str, config: SkillSourceConfig, forge: str) -> Source:
    """A ``[skills.sources.NAME]`` entry as a Source."""
    if config.git:
        url = config.git if ("://" in config.git or _SCP_LIKE.match(config.git)) else expand_forge(config.git, forge)
        return Source("git", _check_git_url(url), safe_subpath(config.subpath or "", "subpath"), _check_ref(config.ref), name)
    if config.folder:
        return Source("folder", str(Path(config.folder).expanduser()), name=name)
    return Source("index", config.index or "", name=name)


def configured(settings: SkillsSettings, only: str | None = None) -> list[Source]:
    """The configured sources in file order (``only``: just that one, or HubError naming the choices)."""
    sources = [from_config(name, entry, settings.forge) for name, entry in settings.sources.items()]
    if only is None:
        return sources
    chosen = [s for s in sources if s.name == only]
    if not chosen:
        names = ", ".join(s.name or "" for s in sources) or "none configured: add [skills.sources.NAME] to config.toml"
        raise HubError(f"no skill source named {only!r} (sources: {names})")
    return chosen


# --- fetching -------------------------------------------------------------------------------


@contextmanager
def fetch(source: Source, settings: SkillsSettings) -> Iterator[Tree]:
    """The source on disk for the length of the block, with its candidates listed. An index
    yields an empty tree whose candidates point at their own git sources."""
    if source.kind == "index":
        with tempfile.TemporaryDirectory(prefix="hermes-skills-") as scratch:
            yield Tree(Path(scratch), Path(scratch), None, read_index(source, settings))
        return
    if source.kind == "folder":
        base = Path(source.location).expanduser()
        if not base.is_dir():
            raise HubError(f"skill source {source.label()}: {base} is not a folder")
        yield _tree(source, base, None)
        return
    with tempfile.TemporaryDirectory(prefix="hermes-skills-") as scratch:
        commit = _clone(source.location, source.ref, Path(scratch) / "repo")
        yield _tree(source, Path(scratch) / "repo", commit)


def _tree(source: Source, base: Path, commit: str | None) -> Tree:
    root = (base / source.subpath) if source.subpath else base
    if not root.resolve().is_relative_to(base.resolve()):
        raise HubError(f"skill source {source.label()}: {source.subpath!r} leads outside the source (a symlink)")
    if not root.is_dir():
        raise HubError(f"skill source {source.label()}: there is no folder {source.subpath!r}")
    tree = Tree(base, root, commit)
    for name, folder, description in find_skills(root):
        rel = folder.relative_to(base).as_posix()
        origin = Source(source.kind, source.location, "" if rel == "." else rel, source.ref, source.name)
        tree.candidates.append(Candidate(name, description, origin, source))
    return tree


def _clone(url: str, ref: str | None, dest: Path) -> str:
    """Fetch one commit of ``url`` (``ref`` or HEAD) into ``dest`` with depth 1; its full sha."""
    import git

    dest.mkdir(parents=True)
    repo = git.Repo.init(dest)
    shown = redact_url(url)
    try:
        with repo.git.custom_environment(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="", SSH_ASKPASS=""):
            repo.git.fetch("--depth=1", "--no-tags", "--", url, ref or "HEAD", kill_after_timeout=300)
            repo.git.checkout("--quiet", "--detach", "FETCH_HEAD")
    except git.GitCommandError as exc:
        raise HubError(_git_problem(shown, ref, str(exc.stderr or exc))) from None
    commit = repo.head.commit.hexsha
    if ref and _FULL_SHA.match(ref.lower()) and commit != ref.lower():
        raise HubError(f"{shown}: fetched {commit[:12]} for commit {ref}; the server did not give that commit")
    shutil.rmtree(dest / ".git", ignore_errors=True)
    return commit


def _git_problem(url: str, ref: str | None, stderr: str) -> str:
    lines = [line.strip().removeprefix("stderr: ").strip("' ") for line in stderr.splitlines() if line.strip()]
    detail = next((line for line in reversed(lines) if line.lower().startswith(("fatal", "error"))), lines[-1] if lines else "")
    detail = re.sub(r"([a-z+]+://)[^/@\s']*@", r"\1", detail)  # never a password from the URL
    lowered = stderr.lower()
    if ref and ("couldn't find remote ref" in lowered or "not our ref" in lowered or "no such ref" in lowered):
        return f"{url} has no branch, tag or commit {ref!r} (give another with @REF, or a full 40-character commit)"
    if "couldn't find remote ref head" in lowered:
        return f"{url} has no commits (or no default branch); give a ref with @REF"
    return f"could not fetch {url}: {detail or 'git failed'}. Check the URL and the network, then try again"


def find_skills(root: Path) -> list[tuple[str, Path, str]]:
    """(name, folder, description) of each SKILL.md folder under ``root`` (itself, or up to
    SKILL_SEARCH_DEPTH levels down), without following symlinks or entering dot folders."""
    from core.learning.skills import MAX_DESCRIPTION, parse_front_matter

    found: list[tuple[str, Path, str]] = []
    for folder in _skill_folders(root):
        try:
            with open(folder / "SKILL.md", encoding="utf-8", errors="replace") as handle:
                head = handle.read(8192)
        except OSError:
            continue
        meta, _ = parse_front_matter(head)
        name = str(meta.get("name") or folder.name).strip()
        found.append((printable(name), folder, printable(str(meta.get("description", "")))[:MAX_DESCRIPTION]))
    return sorted(found, key=lambda item: (item[0], str(item[1])))


def _skill_folders(root: Path) -> list[Path]:
    if (root / "SKILL.md").is_file() and not (root / "SKILL.md").is_symlink():
        return [root]
    out: list[Path] = []
    for current, dirs, files in os.walk(root, followlinks=False):
        depth = len(Path(current).relative_to(root).parts)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and depth < SKILL_SEARCH_DEPTH)
        if "SKILL.md" in files and current != str(root) and not (Path(current) / "SKILL.md").is_symlink():
            out.append(Path(current))
            dirs[:] = []  # a skill's own folders hold no further skills
    return out


# --- indexes --------------------------------------------------------------------------------


def read_index(source: Source, settings: SkillsSettings) -> list[Candidate]:
    """The skills an agentskills.io-style index lists: ``{"skills": [{"name", "description",
    "repo" (URL or owner/repo), "path", "ref"}]}`` (or those three under ``"source"``)."""
    import json

    import httpx

    try:
        with httpx.stream("GET", source.location, timeout=30, follow_redirects=True) as response:
            if response.status_code != 200:
                raise HubError(f"skill index {source.label()} answered HTTP {response.status_code}; check the URL")
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_INDEX_BYTES:
                    raise HubError(f"skill index {source.label()} is larger than {MAX_INDEX_BYTES} bytes")
    except httpx.HTTPError as exc:
        raise HubError(f"could not read skill index {source.label()}: {exc.__class__.__name__}. Check the URL and the network") from None
    try:
        data = json.loads(body)
    except ValueError:
        raise HubError(f"skill index {source.label()} is not JSON") from None
    entries = data.get("skills") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise HubError(f'skill index {source.label()} holds no "skills" list')
    return [c for entry in entries if (c := _index_entry(entry, source, settings)) is not None]


def _index_entry(entry: Any, index: Source, settings: SkillsSettings) -> Candidate | None:
    """One index entry as a Candidate; None for an entry that is not usable (no name, a bad repo)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not is_skill_name(entry["name"]):
        return None  # a name no skill may have (a path, escapes, capitals) is not offered
    where: dict[str, Any] = entry["source"] if isinstance(entry.get("source"), dict) else entry
    repo = where.get("repo") or where.get("git") or where.get("url")
    if not isinstance(repo, str):
        return None
    if repo.lower().startswith("file:"):
        return None  # an index on the network does not get to read this machine's repositories
    try:
        url = repo if ("://" in repo or _SCP_LIKE.match(repo)) else expand_forge(repo, settings.forge)
        ref = where.get("ref") if isinstance(where.get("ref"), str) else None
        path = where.get("path")
        origin = Source(
            "git", _check_git_url(url), safe_subpath(path if isinstance(path, str) else "", "path"), _check_ref(ref), index.name
        )
    except HubError:
        return None
    return Candidate(entry["name"], printable(str(entry.get("description", "")))[:1024], origin, index)
