"""File changes: what the model last saw of each file (the ledger), changed regions and display diffs."""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from core.host.text_files import TextFile
from core.messages import FileDiff

__all__ = ["DIFF_FULL_LIMIT", "FileChange", "FileLedger", "changed_region", "display_diff", "ledger_for"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class FileChange:
    """One file a tool is about to change: ``after`` None deletes it, ``move_to`` renames it."""

    path: Path
    before: TextFile | None  # None: the file does not exist yet
    after: str | None
    encoding: str = "utf-8"
    move_to: Path | None = None


class FileLedger:
    """What the agent last saw of each file, so that a write never lands on content it has not seen."""

    def __init__(self) -> None:
        self._seen: dict[Path, str] = {}

    def saw(self, path: Path, text: str) -> None:
        self._seen[path] = _digest(text)

    def forget(self, path: Path) -> None:
        self._seen.pop(path, None)

    def stale(self, path: Path, text: str) -> bool:
        """True when the agent read ``path`` and it holds something else now."""
        seen = self._seen.get(path)
        return seen is not None and seen != _digest(text)


_LEDGERS: OrderedDict[str, FileLedger] = OrderedDict()


def ledger_for(session_id: str) -> FileLedger:
    """The session's ledger (kept for the most recent sessions of this process)."""
    ledger = _LEDGERS.pop(session_id, None) or FileLedger()
    _LEDGERS[session_id] = ledger
    while len(_LEDGERS) > 256:
        _LEDGERS.popitem(last=False)
    return ledger


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


DIFF_FULL_LIMIT = 256_000
_CHUNK = 65536


def changed_region(old: str, new: str, context: int = 3) -> tuple[int, int, int, int]:
    """Where two texts differ, in whole lines plus ``context`` lines around:
    (start, old_end, new_end) as offsets, and the 1-based line number of ``start``.

    Found by comparing slices (memcmp speed), so a one-line change in a 10 MB file costs
    milliseconds, not a line-by-line walk.
    """
    limit = min(len(old), len(new))
    prefix = 0
    while prefix < limit and old[prefix : prefix + _CHUNK] == new[prefix : prefix + _CHUNK]:
        prefix += _CHUNK
    prefix = min(prefix, limit)
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix, room = 0, limit - prefix
    while (
        suffix + _CHUNK <= room
        and old[len(old) - suffix - _CHUNK : len(old) - suffix] == new[len(new) - suffix - _CHUNK : len(new) - suffix]
    ):
        suffix += _CHUNK
    while suffix < room and old[len(old) - suffix - 1] == new[len(new) - suffix - 1]:
        suffix += 1
    start = old.rfind("\n", 0, prefix) + 1
    for _ in range(context):
        if start == 0:
            break
        start = old.rfind("\n", 0, start - 1) + 1
    ends = []
    for text in (old, new):
        end = len(text) - suffix
        if end > start and text[end - 1] == "\n" and suffix:
            end -= 1  # the change ends with a whole line: its newline is part of it
        for _ in range(context + 1):
            found = text.find("\n", end)
            end = len(text) if found == -1 else found + 1
            if end == len(text):
                break
        ends.append(end)
    return start, ends[0], ends[1], old.count("\n", 0, start) + 1


def display_diff(path: Path, old: str | None, new: str) -> FileDiff:
    """The diff the user sees. Past DIFF_FULL_LIMIT only the changed lines (and some context)
    travel, so that a one-line edit of a huge file does not send it twice."""
    if old is None or len(old) + len(new) <= DIFF_FULL_LIMIT:
        return FileDiff(path=str(path), old_text=old, new_text=new)
    start, old_end, new_end, _ = changed_region(old, new)
    return FileDiff(path=str(path), old_text=old[start:old_end], new_text=new[start:new_end])
