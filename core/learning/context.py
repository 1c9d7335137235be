"""Project and personal context: the AGENTS.md chain, compatible rule files, and SOUL.md.

What enters the prompt from a file is capped (head and tail kept, with a marker saying how to
read the rest) and screened for injection (:mod:`core.learning.screening`). A session keeps a
fingerprint of the files it read; when it changes, the prompt is rebuilt before the next turn
(never within one, so the prompt prefix stays byte-identical for every step of a turn).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from core.config import home
from core.learning.screening import Finding, screen
from core.learning_config import LearningSettings

__all__ = [
    "COMPAT_FILES",
    "ContextFile",
    "LearningSettings",
    "NestedContext",
    "ProjectContext",
    "current_settings",
    "fingerprint",
    "load_project_context",
    "load_soul",
    "project_root",
    "settings_from",
    "truncate_middle",
]

AGENTS = "AGENTS.md"
# Files other agents read, used when a project has no AGENTS.md (see LearningSettings.compat_files).
COMPAT_FILES = ("CLAUDE.md", "GEMINI.md", ".cursorrules", ".github/copilot-instructions.md")


def settings_from(config: object | None) -> LearningSettings:
    """The learning settings of a loaded Config (defaults when it has none)."""
    found = getattr(config, "learning", None)
    return found if isinstance(found, LearningSettings) else LearningSettings()


@dataclass(frozen=True, slots=True)
class ContextFile:
    """One file as it enters the prompt: capped and screened."""

    path: Path
    text: str
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True, slots=True)
class ProjectContext:
    files: tuple[ContextFile, ...]
    watched: tuple[Path, ...]

    @property
    def findings(self) -> list[Finding]:
        return [f for item in self.files for f in item.findings]

    def render(self) -> str:
        """The prompt section, or '' when the project has no context files."""
        if not self.files:
            return ""
        parts = ["# Project instructions (from files in the repository; the user's messages take precedence)"]
        for item in self.files:
            parts.append(f"## {item.path}\n{item.text.strip()}")
        return "\n\n".join(parts)


def project_root(cwd: Path) -> Path:
    """The repository root containing ``cwd`` (a ``.git`` entry), or ``cwd`` outside one."""
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return cwd


def _chain(cwd: Path) -> list[Path]:
    root = project_root(cwd)
    folders = [cwd]
    while folders[-1] != root and folders[-1].parent != folders[-1]:
        folders.append(folders[-1].parent)
    return list(reversed(folders))


def truncate_middle(text: str, limit: int, path: Path | str) -> str:
    """``text`` cut to about ``limit`` characters, head and tail kept, with a marker in between
    telling the model which lines were left out and how to read them."""
    if len(text) <= limit:
        return text
    head = text[: int(limit * 0.7)]
    tail = text[len(text) - int(limit * 0.2) :]
    first = head.count("\n") + 1
    last = text.count("\n") + 1 - tail.count("\n")
    marker = (
        f"\n[… {len(text) - len(head) - len(tail)} characters omitted (about lines {first}-{last}); "
        f"read {path} with read_file for the rest …]\n"
    )
    return head + marker + tail


def _read(path: Path, limit: int) -> ContextFile | None:
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if not raw.strip():
        return None
    checked = screen(raw, str(path))
    return ContextFile(path, truncate_middle(checked.text, limit, path), checked.findings)


def _candidates(cwd: Path, compat: str) -> tuple[list[Path], list[Path]]:
    """(AGENTS.md paths, compatible-file paths) that may exist for ``cwd``, root first."""
    chain = _chain(cwd)
    agents = [folder / AGENTS for folder in chain]
    others = [folder / name for folder in chain for name in COMPAT_FILES] if compat != "never" else []
    return agents, others


def load_project_context(cwd: Path, settings: LearningSettings | None = None) -> ProjectContext:
    """The AGENTS.md chain from the repository root down to ``cwd`` (and compatible files)."""
    settings = settings or LearningSettings()
    agents, others = _candidates(cwd, settings.compat_files)
    files = [f for f in (_read(p, settings.context_file_chars) for p in agents if p.is_file()) if f]
    if settings.compat_files == "always" or (settings.compat_files == "auto" and not files):
        files += [f for f in (_read(p, settings.context_file_chars) for p in others if p.is_file()) if f]
    return ProjectContext(tuple(files), tuple(agents + others))


def soul_path() -> Path:
    return home() / "SOUL.md"


def load_soul(settings: LearningSettings | None = None) -> ContextFile | None:
    """SOUL.md from the state home: the user's persona for the agent, injected verbatim (screened)."""
    settings = settings or LearningSettings()
    return _read(soul_path(), settings.soul_chars)


def fingerprint(paths: Iterable[Path]) -> tuple[tuple[str, int, int], ...]:
    """(path, mtime, size) of each path that exists: a cheap check that none changed."""
    out = []
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            continue
        out.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(out)


@dataclass(slots=True)
class NestedContext:
    """AGENTS.md files below the session cwd, surfaced once each when the agent first touches
    a file under them (appended to that tool's result, not to the prompt: the prefix stays)."""

    cwd: Path
    limit: int = 16_000
    seen: set[Path] = field(default_factory=set)

    def for_paths(self, paths: Iterable[Path]) -> list[ContextFile]:
        found: list[ContextFile] = []
        for path in paths:
            try:
                relative = path.relative_to(self.cwd)
            except ValueError:
                continue
            folder = self.cwd
            # Every folder between cwd (excluded: already in the prompt) and the file's folder.
            parts = relative.parts[:-1] if not path.is_dir() else relative.parts
            for part in parts:
                folder = folder / part
                candidate = folder / AGENTS
                if candidate in self.seen:
                    continue
                self.seen.add(candidate)
                if candidate.is_file() and (item := _read(candidate, self.limit)):
                    found.append(item)
        return found


def current_settings() -> LearningSettings:
    """The learning settings of the config on disk (defaults when it has none or is invalid)."""
    from core.config import ConfigError, load_config

    try:
        return settings_from(load_config())
    except ConfigError:
        return LearningSettings()
