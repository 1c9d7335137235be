"""Noticing changes to what live resources show: memory files and skills on disk, sessions in the store.

Nothing here speaks MCP: ``hermes_mcp.resources`` decides what is watched and when, and is told
which resource URIs may have changed; it compares the stamps made here to tell real changes
from noise, so a change is found whichever process made it (another ``hermes-mcp``,
``hermes-acp``, the gateway, an editor saving the file).

Files: one ``watchfiles.awatch`` (inotify on Linux, debounced) over the memory folder, the
personal skills folder and each project's ``.agents/skills``. The folders are checked again
each time the watcher wakes, at least every ``RECHECK_MS``: a stat per folder, so that a
project a task added, or a project's first skills folder, is watched from then on.

Sessions: SQLite tells no process about another's commits, so the store is polled, but only
while a session resource is subscribed, and each idle poll costs one ``PRAGMA data_version``
on a connection of its own: that number changes when any other connection (another surface,
or this process's own store connection) has committed, and SQLite answers it from the WAL
index in shared memory without reading a table. Only then are the subscribed sessions' rows
read. Once a second keeps a session an MCP client follows about as fresh as the messages a
turn writes, at no cost worth measuring while nothing is written.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import re
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

__all__ = [
    "MEMORY_PREFIX",
    "RECHECK_MS",
    "SESSIONS_INDEX",
    "SESSION_PREFIX",
    "SKILL_PREFIX",
    "STORE_POLL_SECONDS",
    "Folders",
    "StoreProbe",
    "changed_uris",
    "file_stamps",
    "is_file_uri",
    "is_store_uri",
    "poll_store",
    "skills_listing",
    "watch_files",
]

log = logging.getLogger(__name__)

MEMORY_PREFIX = "hermes://memory/"
SKILL_PREFIX = "hermes://skills/"
SESSION_PREFIX = "hermes://sessions/"
SESSIONS_INDEX = "hermes://sessions"
RECHECK_MS = 2_000
STORE_POLL_SECONDS = 1.0
INDEX_ROWS = 50  # what the hermes://sessions resource lists
_SKILL_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")  # a skill folder's name, as core.learning.skills reads them
_SCRATCH = re.compile(r"(^\.|~$|\.sw.$|\.___jb_...___$|\.py[cod]$|^__pycache__$)")  # editors' and Python's leftovers, not content

FileChanged = Callable[[set[str] | None, bool], Awaitable[None]]


def is_file_uri(uri: str) -> bool:
    """Whether the resource lives in a file watched here (a memory file or a skill)."""
    return uri.startswith((MEMORY_PREFIX, SKILL_PREFIX))


def is_store_uri(uri: str) -> bool:
    """Whether the resource is read from the session store."""
    return uri == SESSIONS_INDEX or uri.startswith(SESSION_PREFIX)


# --- files -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Folders:
    """What the file watcher watches, and what tells it to start again."""

    memory: Path
    skills: tuple[Path, ...]  # skill folders that exist: personal first, then projects'
    key: tuple[Hashable, ...]  # changes when a folder appears, goes or is replaced

    @classmethod
    def now(cls, projects: Iterable[Path], *, create: bool = False) -> Folders:
        """The folders as they are; ``create`` makes the state home's own two (memory, skills)."""
        from core.learning import memory, skills

        memory_dir = memory.memory_path("memory").parent
        personal = skills.personal_dir()
        if create:
            for folder in (memory_dir, personal):
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        candidates = list(dict.fromkeys([personal, *(Path(p) / ".agents" / "skills" for p in projects)]))
        identities = [_identity(p) for p in (memory_dir, *candidates)]
        existing = tuple(p for p, ident in zip(candidates, identities[1:], strict=True) if ident[1] is not None)
        return cls(memory_dir, existing, tuple(identities))


def _identity(path: Path) -> tuple[str, int | None, int | None]:
    try:
        stat = path.stat()
    except OSError:
        return (str(path), None, None)
    return (str(path), stat.st_dev, stat.st_ino) if path.is_dir() else (str(path), None, None)


def changed_uris(paths: Iterable[str], folders: Folders) -> tuple[set[str], bool]:
    """The memory and skill URIs these changed paths may concern, and whether any was in a skill."""
    from core.learning.memory import FILES

    uris: set[str] = set()
    skill_touched = False
    for raw in paths:
        path = Path(raw)
        if path.parent == folders.memory and path.name in FILES.values():
            uris.add(MEMORY_PREFIX + path.name)
            continue
        for root in folders.skills:
            if path.is_relative_to(root):
                parts = path.relative_to(root).parts
                if parts and _SKILL_NAME.match(parts[0]) and not any(_SCRATCH.search(p) for p in parts[1:]):
                    uris.add(SKILL_PREFIX + parts[0])
                    skill_touched = True
                break
    return uris, skill_touched


def file_stamps(uris: Iterable[str], projects: Iterable[Path]) -> dict[str, Hashable]:
    """A value per memory or skill URI that changes when what the resource shows changes.

    Content, not modification times: two saves within the file system's clock tick differ too.
    """
    from core.learning import memory, skills

    files = {name: kind for kind, name in memory.FILES.items()}
    found: dict[str, Any] | None = None
    out: dict[str, Hashable] = {}
    for uri in uris:
        if uri.startswith(MEMORY_PREFIX):
            kind = files.get(uri.removeprefix(MEMORY_PREFIX))
            out[uri] = _digest(memory.memory_path(kind), shared_lock=True) if kind else None
        elif uri.startswith(SKILL_PREFIX):
            if found is None:
                found = {s.name: s for s in skills.discover(projects)}
            skill = found.get(uri.removeprefix(SKILL_PREFIX))
            out[uri] = _skill_stamp(skill.path) if skill is not None else None
    return out


def _digest(path: Path, *, shared_lock: bool = False) -> bytes:
    """A digest of the file's bytes; an absent file reads as empty, as the resources read it.

    ``shared_lock``: wait for a writer holding the file's ``flock`` (memory files are rewritten
    in place under it), so a half-written file is never what is remembered.
    """
    try:
        with open(path, "rb") as handle:
            if shared_lock:
                fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
            content = handle.read()
    except FileNotFoundError:
        content = b""
    except OSError:
        return b""
    return hashlib.blake2b(content, digest_size=16).digest()


def _skill_stamp(skill_md: Path) -> Hashable:
    """SKILL.md's content, and the size and time of the skill's other files (references, scripts)."""
    others = []
    folder = skill_md.parent
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path == skill_md or any(_SCRATCH.search(p) for p in relative.parts):
            continue
        with contextlib.suppress(OSError):
            if path.is_file():
                stat = path.stat()
                others.append((str(relative), stat.st_size, stat.st_mtime_ns))
    return (str(skill_md), _digest(skill_md), tuple(others))


def skills_listing(projects: Iterable[Path]) -> tuple[tuple[str, str, str], ...]:
    """What the resource and prompt lists say of skills: names, descriptions, origins."""
    from core.learning import skills

    return tuple((s.name, s.description, s.origin) for s in skills.discover(projects))


async def watch_files(projects: Callable[[], list[Path]], changed: FileChanged, *, ready: anyio.Event, stop: anyio.Event) -> None:
    """Until ``stop`` is set: tell ``changed`` which memory and skill URIs may have changed.

    ``changed(uris, skill_touched)``; ``uris`` is None once the watches stand after each
    (re)start, meaning anything may have changed meanwhile. ``ready`` is set as soon as the
    first watches stand. A folder that appears or goes, or a new project, restarts the watcher.
    """
    import asyncio

    from watchfiles import awatch

    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # it logs every batch at info
    polling = False
    failures = 0
    while not stop.is_set():
        folders = Folders.now(projects(), create=True)

        def relevant(change: Any, path: str, folders: Folders = folders) -> bool:
            return bool(changed_uris([path], folders)[0])

        try:
            # awatch sets its watches up the first time it is iterated, before it first waits,
            # so this callback runs once they stand.
            asyncio.get_running_loop().call_soon(ready.set)
            watcher = awatch(
                folders.memory,
                *folders.skills,
                watch_filter=relevant,
                stop_event=stop,
                rust_timeout=RECHECK_MS,
                yield_on_timeout=True,
                force_polling=polling or None,
            )
            log.debug("watching %s", ", ".join(str(p) for p in (folders.memory, *folders.skills)))
            fresh = True
            async with contextlib.aclosing(watcher):
                async for changes in watcher:
                    if fresh:
                        fresh, failures = False, 0
                        await changed(None, True)
                    if changes:
                        uris, skill_touched = changed_uris((path for _, path in changes), folders)
                        await changed(uris, skill_touched)
                    if Folders.now(projects()).key != folders.key:
                        log.debug("the watched folders changed; watching again")
                        break
        except OSError as exc:
            failures += 1
            if failures > 3:
                raise
            # Most often the system's limit on inotify watches (fs.inotify.max_user_watches):
            # polling the few folders watched here costs little.
            polling = polling or "limit" in str(exc).lower()
            how = "by polling" if polling else "again"
            log.warning("cannot watch %s for changes (%s); trying %s", folders.memory.parent, exc, how)
            await anyio.sleep(1)


# --- the store -------------------------------------------------------------------------------


class StoreProbe:
    """A connection of its own to the session store: who committed, and what the sessions look like."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # called from worker threads, one statement at a time

    def open(self) -> None:
        with self._lock:
            self._conn = sqlite3.connect(self._path, timeout=5.0, isolation_level=None, check_same_thread=False)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def data_version(self) -> int:
        with self._lock:
            if self._conn is None:
                return 0
            return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def stamps(self, uris: Iterable[str]) -> dict[str, Hashable]:
        """A value per session URI (and the index) that changes when the resource's text would."""
        wanted = list(dict.fromkeys(uris))
        ids = [u.removeprefix(SESSION_PREFIX) for u in wanted if u.startswith(SESSION_PREFIX)]
        with self._lock:
            if self._conn is None:
                return {}
            rows: dict[str, Hashable] = {}
            for start in range(0, len(ids), 500):  # SQLite's limit on bound parameters
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                # Messages are only ever appended (a deleted session takes its own with it), so the
                # last seq stands for them all; the index on (session_id, seq) answers it at once.
                for row in self._conn.execute(
                    "SELECT s.id, s.title, s.cwd, s.surface, s.model, s.updated_at,"
                    " (SELECT MAX(m.seq) FROM messages m WHERE m.session_id = s.id)"
                    f" FROM sessions s WHERE s.id IN ({marks})",
                    chunk,
                ):
                    rows[SESSION_PREFIX + row[0]] = tuple(row[1:])
            if SESSIONS_INDEX in wanted:
                rows[SESSIONS_INDEX] = tuple(
                    tuple(r)
                    for r in self._conn.execute(
                        "SELECT id, title, cwd, surface, updated_at FROM sessions ORDER BY updated_at DESC, id DESC LIMIT ?",
                        (INDEX_ROWS,),
                    )
                )
        return {u: rows.get(u) for u in wanted}


async def poll_store(probe: StoreProbe, committed: Callable[[], Awaitable[None]], *, ready: anyio.Event, interval: float) -> None:
    """Until cancelled: call ``committed`` after any connection has committed to the store."""
    await anyio.to_thread.run_sync(probe.open)
    try:
        last = await anyio.to_thread.run_sync(probe.data_version)
        ready.set()
        while True:
            await anyio.sleep(interval)
            try:
                now = await anyio.to_thread.run_sync(probe.data_version)
            except sqlite3.Error as exc:
                log.warning("cannot read the session store to follow subscribed sessions (%s); trying again", exc)
                continue
            if now != last:
                last = now
                await committed()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(probe.close)
