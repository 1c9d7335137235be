"""Walking a project the way ripgrep does: sorted by name, .gitignore and .ignore respected."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ALWAYS_SKIP", "Ignore", "human_size", "walk"]

# Never worth walking into, ignored or not (a search path inside one is still searched).
ALWAYS_SKIP = {".git", "node_modules", "__pycache__", ".venv", ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
IGNORE_FILES = (".gitignore", ".ignore")


class Ignore:
    """The ignore rules below ``top``: each directory's .gitignore and .ignore, deepest first."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self._specs: dict[Path, object | None] = {}

    def _spec(self, directory: Path):
        if directory not in self._specs:
            lines: list[str] = []
            for name in IGNORE_FILES:
                try:
                    lines += (directory / name).read_text(encoding="utf-8", errors="replace").splitlines()
                except OSError:
                    pass
            if lines:
                import pathspec

                self._specs[directory] = pathspec.GitIgnoreSpec.from_lines(lines)
            else:
                self._specs[directory] = None
        return self._specs[directory]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        if path.name in ALWAYS_SKIP and is_dir:
            return True
        directory = path.parent
        while True:
            spec = self._spec(directory)
            if spec is not None:
                rel = path.relative_to(directory).as_posix() + ("/" if is_dir else "")
                result = spec.check_file(rel)
                if result.include is not None:
                    return bool(result.include)
            if directory == self.top or self.top not in directory.parents:
                return False
            directory = directory.parent


def walk(root: Path, ignore: Ignore, *, dirs: bool = False) -> Iterator[Path]:
    """Files under ``root`` (and directories when ``dirs``), sorted by name at each level, not ignored."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        is_dir = entry.is_dir(follow_symlinks=False)
        if ignore.ignored(path, is_dir):
            continue
        if is_dir:
            if dirs:
                yield path
            yield from walk(path, ignore, dirs=dirs)
        else:
            yield path


def human_size(size: float) -> str:
    for unit in ("B", "K", "M", "G"):
        if size < 1024 or unit == "G":
            return f"{size}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{size}B"
