"""Memory: two budgeted Markdown files, edited entry by entry, every change journalled.

``memories/MEMORY.md`` holds the agent's notes (environments, conventions, lessons) and
``memories/USER.md`` the user's preferences. An entry is a Markdown list item. Each file has a
character budget; when an addition would pass it, nothing is dropped: the caller is told to
consolidate (merge entries, remove stale ones) and try again.

Every change is appended to ``memories/journal.jsonl`` (who, when, before, after) and can be
reverted (``hermes-editor memory revert ID``). Writers lock the memory file itself with
``flock``, so the three surfaces can write at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.config import home
from core.learning.context import LearningSettings, truncate_middle
from core.learning.screening import Finding, Flagged, looks_secret, review_learned, screen_learned

__all__ = [
    "MEMORY_TOOL_NOTE",
    "JournalEntry",
    "MemoryChange",
    "MemoryError",
    "MemoryFlagged",
    "MemoryFull",
    "MemorySnapshot",
    "change_memory",
    "journal",
    "journal_change",
    "parse_entries",
    "revert",
    "snapshot",
]

Kind = Literal["memory", "user"]
Action = Literal["add", "replace", "remove"]
FILES: dict[str, str] = {"memory": "MEMORY.md", "user": "USER.md"}
LABELS: dict[str, str] = {"memory": "Your notes (MEMORY.md)", "user": "About the user (USER.md)"}


class MemoryError(ValueError):
    """A change that cannot be made; the message says what to do instead."""


class MemoryFull(MemoryError):
    """The file would pass its budget: consolidate first."""


class MemoryFlagged(MemoryError):
    """Screening flagged the entry: a person must approve it (see :mod:`core.learning.gate`)."""

    def __init__(self, flags: tuple[Flagged, ...]) -> None:
        from core.learning.gate import describe

        self.flags = flags
        super().__init__(
            f"Nothing was saved: screening flagged the entry ({describe(flags)}). Memory reaches every later session, "
            "so such an entry needs the user's approval; leave it out unless the user asked for it."
        )


@dataclass(frozen=True, slots=True)
class MemoryChange:
    kind: str
    action: str
    before: str | None
    after: str | None
    used: int
    budget: int


@dataclass(frozen=True, slots=True)
class JournalEntry:
    id: str
    at: float
    who: str
    kind: str
    action: str
    before: str | None
    after: str | None


# Said in the memory heading only to a session that has the memory tool.
MEMORY_TOOL_NOTE = "; the memory tool edits the files"


def memory_path(kind: str) -> Path:
    return home() / "memories" / FILES[kind]


def journal_path() -> Path:
    return home() / "memories" / "journal.jsonl"


def budget_for(kind: str, settings: LearningSettings) -> int:
    return settings.user_chars if kind == "user" else settings.memory_chars


def parse_entries(text: str) -> list[str]:
    """The entries of a memory file (list items, continuation lines joined back with newlines)."""
    entries: list[str] = []
    for line in text.splitlines():
        if line.startswith("- "):
            entries.append(line[2:].rstrip())
        elif line.strip() and entries and line.startswith((" ", "\t")):
            entries[-1] += "\n" + line.strip()
        elif line.strip():
            entries.append(line.strip())  # hand-written text outside a list is kept as an entry
    return entries


def render_entries(entries: list[str]) -> str:
    return "".join("- " + e.replace("\n", "\n  ") + "\n" for e in entries)


def _normalise(text: str) -> str:
    body = "\n".join(line.rstrip() for line in text.strip().splitlines())
    if not body:
        raise MemoryError("the entry is empty")
    if looks_secret(body):
        raise MemoryError("that entry looks like it holds a credential; memory never stores secrets")
    return body


def _screened(body: str, kind: str, allow: frozenset[str], trusted: bool) -> tuple[Flagged, ...]:
    """The entry's flagged passages that are allowed to be written (raises for the rest)."""
    from core.learning.gate import approved

    base, flags = review_learned(body, f"{FILES[kind]} entry", approved())
    if base:
        raise MemoryError("that entry was refused by screening (" + "; ".join(f.describe() for f in base) + "); memory never stores it")
    if flags and not trusted and not {f.digest for f in flags} <= allow:
        raise MemoryFlagged(flags)
    return flags


@contextmanager
def _locked(kind: str) -> Iterator[int]:
    path = memory_path(kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def _read_fd(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _write_fd(fd: int, text: str) -> None:
    # Rewritten in place (not replaced) so that the lock other writers wait on is this inode's.
    data = text.encode("utf-8")
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, data)
    os.fsync(fd)


def _find(entries: list[str], old: str, kind: str) -> int:
    matches = [i for i, e in enumerate(entries) if old.strip() and old.strip() in e]
    if not matches:
        raise MemoryError(f"no entry of {FILES[kind]} contains {old!r}; quote part of the entry exactly")
    if len(matches) > 1:
        raise MemoryError(f"{len(matches)} entries of {FILES[kind]} contain {old!r}; quote more of the one you mean")
    return matches[0]


def change_memory(
    action: Action,
    kind: Kind,
    *,
    text: str = "",
    old: str = "",
    who: str = "agent",
    settings: LearningSettings | None = None,
    force: bool = False,
    allow: frozenset[str] = frozenset(),
    trusted: bool = False,
) -> MemoryChange:
    """Add, replace or remove one entry; journalled. ``force`` skips the budget (reverts only).

    An entry screening flags raises :class:`MemoryFlagged` unless the digests of its flagged
    passages are in ``allow`` (a person approved them) or ``trusted`` (a person typed it); either
    way the approval is remembered, so that the entry is kept when read back into a prompt."""
    settings = settings or LearningSettings()
    if kind not in FILES:
        raise MemoryError(f"file must be 'memory' or 'user', not {kind!r}")
    budget = budget_for(kind, settings)
    flags: tuple[Flagged, ...] = ()
    if action in ("add", "replace"):
        flags = _screened(_normalise(text), kind, allow, trusted)
    with _locked(kind) as fd:
        entries = parse_entries(_read_fd(fd))
        before: str | None = None
        after: str | None = None
        if action == "add":
            after = _normalise(text)
            if after in entries:
                raise MemoryError("that entry is already saved")
            entries.append(after)
        elif action == "replace":
            index = _find(entries, old, kind)
            before, after = entries[index], _normalise(text)
            entries[index] = after
        elif action == "remove":
            index = _find(entries, old, kind)
            before = entries.pop(index)
        else:
            raise MemoryError(f"action must be add, replace or remove, not {action!r}")
        rendered = render_entries(entries)
        if len(rendered) > budget and not force and action != "remove":
            raise MemoryFull(
                f"{FILES[kind]} is full ({len(rendered) - len(render_entries([after or '']))}/{budget} characters used; "
                f"this entry needs {len(after or '')}). Consolidate first: merge related entries with 'replace', "
                "remove stale ones with 'remove', then add again. Nothing was changed."
            )
        _write_fd(fd, rendered)
        if flags:
            from core.learning.gate import remember

            remember(flags, who)
    journal_change(who, kind, action, before, after)
    return MemoryChange(kind, action, before, after, len(rendered), budget)


def journal_change(who: str, kind: str, action: str, before: str | None, after: str | None) -> str:
    """Append one change to the journal; returns its id."""
    entry_id = uuid.uuid4().hex[:10]
    line = json.dumps(
        {"id": entry_id, "at": time.time(), "who": who, "kind": kind, "action": action, "before": before, "after": after},
        ensure_ascii=False,
    )
    path = journal_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)
    return entry_id


def journal() -> list[JournalEntry]:
    """Every recorded change, oldest first."""
    try:
        lines = journal_path().read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            raw = json.loads(line)
            out.append(JournalEntry(raw["id"], raw["at"], raw["who"], raw["kind"], raw["action"], raw["before"], raw["after"]))
        except (ValueError, KeyError, TypeError):
            continue  # a torn line from a crash is skipped, not fatal
    return out


def revert(entry_id: str, *, who: str = "cli") -> MemoryChange:
    """Undo one journalled change by applying its inverse (itself journalled)."""
    found = [e for e in journal() if e.id == entry_id or e.id.startswith(entry_id)]
    if len(found) != 1:
        raise MemoryError(f"no single journal entry matches {entry_id!r}")
    (entry,) = found
    kind: Kind = "user" if entry.kind == "user" else "memory"
    if entry.action == "add" and entry.after is not None:
        return change_memory("remove", kind, old=entry.after, who=who)
    if entry.action == "remove" and entry.before is not None:
        return change_memory("add", kind, text=entry.before, who=who, force=True, trusted=True)
    if entry.action == "replace" and entry.before is not None and entry.after is not None:
        return change_memory("replace", kind, old=entry.after, text=entry.before, who=who, force=True, trusted=True)
    raise MemoryError(f"journal entry {entry_id} cannot be reverted")


@dataclass(frozen=True, slots=True)
class MemorySnapshot:
    """Both files as they were when a session started: the prompt carries this, frozen."""

    text: str
    findings: tuple[Finding, ...]
    full: tuple[str, ...]  # kinds at or past 90% of their budget


def snapshot(settings: LearningSettings | None = None) -> MemorySnapshot:
    from core.learning.gate import approved

    settings = settings or LearningSettings()
    sections: list[str] = []
    findings: list[Finding] = []
    full: list[str] = []
    accepted = approved()
    for kind in FILES:
        path = memory_path(kind)
        try:
            raw = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raw = ""
        budget = budget_for(kind, settings)
        if len(raw) >= budget * 0.9:
            full.append(kind)
        if not raw.strip():
            continue
        checked = screen_learned(raw, str(path), accepted)
        findings.extend(checked.findings)
        body = truncate_middle(checked.text.strip(), budget, path)
        sections.append(f"## {LABELS[kind]} [{len(raw)}/{budget} chars]\n{body}")
    if not sections:
        return MemorySnapshot("", tuple(findings), tuple(full))
    head = f"# Memory (a snapshot from the start of this session{MEMORY_TOOL_NOTE})"
    return MemorySnapshot("\n\n".join([head, *sections]), tuple(findings), tuple(full))
