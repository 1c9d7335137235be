"""Walking a project on another machine (an SSH host's ``remote_files``) over SFTP the way
``walk`` does: sorted by name, .gitignore and .ignore read from the remote, for glob, list_dir
and grep where the remote machine has no ripgrep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolsets.editor.walk import IGNORE_FILES, Ignore, human_size

__all__ = ["remote_list", "remote_walk"]

MAX_WALKED = 200_000  # entries a walk looks at before it stops


class _RemoteIgnore(Ignore):
    """Ignore rules from the remote's .gitignore and .ignore files, read while walking."""

    def __init__(self, top: Path) -> None:
        super().__init__(top)
        self.texts: dict[Path, list[str]] = {}

    def _spec(self, directory: Path) -> Any:
        if directory not in self._specs:
            lines = self.texts.get(directory, [])
            if lines:
                import pathspec

                self._specs[directory] = pathspec.GitIgnoreSpec.from_lines(lines)
            else:
                self._specs[directory] = None
        return self._specs[directory]

    async def learn(self, remote: Any, directory: Path, names: set[str]) -> None:
        if directory in self.texts:
            return
        lines: list[str] = []
        for name in IGNORE_FILES:
            if name in names:
                try:
                    lines += (await remote.read_bytes(directory / name)).decode("utf-8", "replace").splitlines()
                except OSError:
                    pass
        self.texts[directory] = lines

    async def learn_above(self, remote: Any, root: Path) -> None:
        """The rules of the directories from the project's top down to ``root``."""
        chain = [root, *root.parents]
        for directory in reversed(chain[: chain.index(self.top) + 1] if self.top in chain else [root]):
            try:
                names = {name for name, _, _, _ in await remote.listdir(directory)}
            except OSError:
                continue
            await self.learn(remote, directory, names)


async def remote_walk(remote: Any, root: Path, top: Path) -> list[tuple[Path, str, int, str]]:
    """Files (and links) under ``root``: (path, kind, size, link target), in walk's order;
    ignore rules from ``top`` down apply."""
    ignore = _RemoteIgnore(top)
    out: list[tuple[Path, str, int, str]] = []
    seen = 0

    async def visit(directory: Path) -> None:
        nonlocal seen
        try:
            entries = await remote.listdir(directory)
        except (FileNotFoundError, PermissionError):
            return
        await ignore.learn(remote, directory, {name for name, _, _, _ in entries})
        for name, kind, size, target in entries:
            seen += 1
            if seen > MAX_WALKED:
                return
            path = directory / name
            if ignore.ignored(path, kind == "dir"):
                continue
            if kind == "dir":
                await visit(path)
            else:
                out.append((path, kind, size, target))

    await ignore.learn_above(remote, root)
    await visit(root)
    return out


async def remote_list(remote: Any, root: Path, top: Path, depth: int, limit: int) -> tuple[list[str], int, list[str]]:
    """A remote directory listed as list_dir lists a local one: lines, entries left out, ignored ones."""
    ignore = _RemoteIgnore(top)
    await ignore.learn_above(remote, root)
    out: list[str] = []
    skipped: list[str] = []
    more = 0

    async def entries_of(directory: Path) -> list[tuple[str, str, int, str]]:
        try:
            entries: list[tuple[str, str, int, str]] = await remote.listdir(directory)
        except (FileNotFoundError, PermissionError):
            return []
        await ignore.learn(remote, directory, {name for name, _, _, _ in entries})
        return sorted(entries, key=lambda e: (e[1] != "dir", e[0]))

    async def visit(directory: Path, level: int) -> None:
        nonlocal more
        for name, kind, size, target in await entries_of(directory):
            path, is_dir = directory / name, kind == "dir"
            if ignore.ignored(path, is_dir):
                skipped.append(path.relative_to(root).as_posix() + ("/" if is_dir else ""))
                continue
            if len(out) >= limit:
                more += 1
                continue
            indent = "  " * (level - 1)
            if kind == "link":
                out.append(f"{indent}{name} -> {target}")
            elif is_dir:
                count = sum(1 for n, k, _, _ in await entries_of(path) if not ignore.ignored(path / n, k == "dir"))
                out.append(f"{indent}{name}/  ({count} entries)")
                if level < depth:
                    await visit(path, level + 1)
            else:
                out.append(f"{indent}{name}  {human_size(size)}")

    await visit(root, 1)
    return out, more, skipped
