"""Keeping the checkpoint repository small: sessions whose newest checkpoint is older than the
keep period are let go, and objects nothing points at any more (replaced commits, let-go sessions)
are deleted. An automatic prune runs at most once a day, stamped by a file beside the repository.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PRUNE_EVERY", "PruneReport", "prune_repo", "prune_when_due"]

PRUNE_EVERY = 86_400.0  # seconds between automatic prunes
_PRUNE_TASKS: set[asyncio.Task[None]] = set()


@dataclass(frozen=True, slots=True)
class PruneReport:
    sessions_dropped: int
    objects_removed: int
    bytes_freed: int
    objects_kept: int

    def summary(self) -> str:
        return (
            f"Let go of {self.sessions_dropped} old session(s); removed {self.objects_removed} unused objects "
            f"({self.bytes_freed / 1_000_000:.1f} MB); kept {self.objects_kept}."
        )


def prune_when_due(directory: Path, prune: Callable[[], Awaitable[PruneReport]]) -> None:
    """Start a prune in the background when the last one is a day old (checked by a stamp file)."""
    stamp = directory / "pruned-at"
    try:
        if time.time() - stamp.stat().st_mtime < PRUNE_EVERY:
            return
    except FileNotFoundError:
        with contextlib.suppress(OSError):
            stamp.touch(mode=0o600)  # a new repository: the first prune is due in a day
        return
    try:
        stamp.touch()  # first, so that other processes and turns do not start one too
    except OSError:
        return

    async def run() -> None:
        try:
            report = await prune()
            if report.objects_removed or report.sessions_dropped:
                logging.getLogger(__name__).info("checkpoints pruned: %s", report.summary())
        except Exception:
            logging.getLogger(__name__).warning("could not prune checkpoints", exc_info=True)

    task = asyncio.get_running_loop().create_task(run())
    _PRUNE_TASKS.add(task)
    task.add_done_callback(_PRUNE_TASKS.discard)


def prune_repo(repo: Any, keep_days: float, grace: float) -> PruneReport:
    """Let go of sessions older than ``keep_days`` (0: keep all), then delete unreachable objects older than ``grace`` s."""
    import git

    cutoff = time.time() - keep_days * 86_400
    tips, dropped = [], 0
    for ref in list(git.Reference.iter_items(repo, common_path="refs")):
        try:
            commit = ref.commit
        except ValueError:  # a ref to nothing: nothing to keep
            continue
        if keep_days > 0 and commit.committed_date < cutoff:
            git.Reference.delete(repo, ref.path)
            dropped += ref.path.startswith("refs/heads/")
            continue
        tips.append(commit)
    reachable = _reachable(tips)
    removed = freed = 0
    objects = Path(repo.git_dir) / "objects"
    now = time.time()
    for folder in objects.iterdir():
        if len(folder.name) != 2 or not folder.is_dir():
            continue  # info/, pack/
        for item in folder.iterdir():
            if folder.name + item.name in reachable:
                continue
            try:
                stat = item.stat()
                if now - stat.st_mtime < grace:
                    continue  # maybe a checkpoint being written by a process without our lock
                item.unlink()
            except OSError:
                continue
            removed += 1
            freed += stat.st_size
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty
    return PruneReport(dropped, removed, freed, len(reachable))


def _reachable(tips: list[Any]) -> set[str]:
    """Hex ids of every commit, tree and blob reachable from ``tips``."""
    seen: set[str] = set()
    commits = list(tips)
    while commits:
        commit = commits.pop()
        if commit.hexsha in seen:
            continue
        seen.add(commit.hexsha)
        commits.extend(commit.parents)
        trees = [commit.tree]
        while trees:
            tree = trees.pop()
            if tree.hexsha in seen:
                continue
            seen.add(tree.hexsha)
            for item in tree:
                if item.type == "tree":
                    trees.append(item)
                else:
                    seen.add(item.hexsha)
    return seen
