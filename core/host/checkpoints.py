"""Checkpoints: before a turn first writes a file, the file goes into a shadow git repository.

The repository is ``checkpoints/shadow.git`` in the state home: never the user's repository,
index or stash, and it works the same outside git projects. Each session has a branch
(``refs/heads/sessions/<id>``) with one commit per turn that changed files; the commit holds
those files as they were before the turn (at ``files/<absolute path>``), and a manifest that
also says which did not exist yet and what the turn last wrote.

Undo restores the newest checkpoint byte for byte (mode included): created files are removed,
deleted ones come back. What it replaces is saved first (``refs/undone/<id>``), so an undo
loses nothing either. A file changed since the turn wrote it is a conflict: undo stops
unless forced. GitPython is imported on first use only.

The repository is kept small: at most once a day (and on ``hermes-editor checkpoints prune``)
sessions whose newest checkpoint is older than ``KEEP_DAYS`` are let go, and objects nothing
points at any more (replaced commits, let-go sessions) are deleted. A file lock serialises
every process's work on the repository, so pruning never races a checkpoint being written.
"""

from __future__ import annotations

import asyncio
import builtins
import fcntl
import functools
import hashlib
import io
import json
import os
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, TypeVarTuple

from core.config import home
from core.host.checkpoint_pruning import PruneReport, prune_repo, prune_when_due
from core.host.text_files import write_atomic

__all__ = ["KEEP_DAYS", "Checkpoint", "CheckpointFile", "Checkpoints", "FileAccess", "UndoReport", "blob_id", "register_files"]

MANIFEST = "manifest.json"
KEEP_DAYS = 30.0  # a session's checkpoints are kept this long after its newest one
MAX_FILE_BYTES = 50_000_000  # larger files are noted but not kept
MAX_LISTED = 200
_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()
_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")
# A file as a preview of undo shows it: (path, its bytes now, the bytes undo restores); None: no file.
_Row = tuple[Path, bytes | None, bytes | None]


class FileAccess(Protocol):
    """Files of another machine, for checkpoints (called from a worker thread)."""

    @property
    def label(self) -> str:
        """Names the machine; recorded with each of its files."""
        ...

    def stat(self, path: Path) -> tuple[int, int] | None:
        """(mode, size) of a regular file; None when there is none."""
        ...

    def exists(self, path: Path) -> bool: ...

    def read_bytes(self, path: Path) -> bytes: ...

    def write_bytes(self, path: Path, data: bytes, mode: int | None) -> None: ...

    def unlink(self, path: Path) -> None: ...


# The machines files can be checkpointed on, by label (a host registers itself when made).
_MACHINES: dict[str, FileAccess] = {}


def register_files(access: FileAccess) -> None:
    """Let checkpoints of files on ``access.label`` be read and undone in this process."""
    _MACHINES[access.label] = access


def _machine(label: str | None) -> FileAccess | None:
    if label is None:
        return None
    found = _MACHINES.get(label)
    if found is None:
        raise RuntimeError(f"the files of that checkpoint are on {label}, which this process is not connected to; undo from its session")
    return found


def _regular(files: FileAccess | None, path: Path) -> tuple[int, int] | None:
    if files is not None:
        return files.stat(path)
    if not path.is_file():
        return None
    stat = path.stat()
    return stat.st_mode & 0o7777, stat.st_size


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (how the manifest records what a turn wrote)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True, slots=True)
class CheckpointFile:
    path: str
    existed: bool  # False: the turn created it
    mode: int | None = None
    after: str | None = None  # blob id of what the turn wrote last; "" deleted; None unknown
    skipped: bool = False  # too large to keep
    host: str | None = None  # the machine it is on (a FileAccess label); None: this one


@dataclass(frozen=True, slots=True)
class Checkpoint:
    id: str  # commit id in the shadow repository
    session_id: str
    turn_id: str
    created: float
    files: tuple[CheckpointFile, ...]


@dataclass(slots=True)
class UndoReport:
    """What an undo did (or, with conflicts, why it did nothing)."""

    checkpoint: Checkpoint | None
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # files the turn had created
    conflicts: list[str] = field(default_factory=list)  # changed since the turn wrote them
    skipped: list[str] = field(default_factory=list)  # too large to have been kept
    saved_as: str | None = None  # commit keeping the state from before the undo

    @property
    def done(self) -> bool:
        return self.checkpoint is not None and not (self.conflicts and not self.restored and not self.removed)

    def summary(self) -> str:
        if self.checkpoint is None:
            return "Nothing to undo: no file changes are recorded for this session."
        if self.conflicts and not (self.restored or self.removed):
            return (
                "Nothing was undone: these files changed after the turn wrote them, and undo would "
                f"overwrite that: {', '.join(self.conflicts)}. Undo with force to restore them anyway."
            )
        lines = [f"Undid the changes of turn {self.checkpoint.turn_id[:8]}."]
        if self.restored:
            lines.append("Restored: " + ", ".join(self.restored))
        if self.removed:
            lines.append("Removed (created by that turn): " + ", ".join(self.removed))
        if self.skipped:
            lines.append("Not restored (too large to keep): " + ", ".join(self.skipped))
        if self.saved_as:
            lines.append(f"The replaced content is kept in checkpoint {self.saved_as[:12]}.")
        return "\n".join(lines)


class Checkpoints:
    """The shadow repository of one state home (``home()/checkpoints`` unless given)."""

    def __init__(self, directory: Path | None = None) -> None:
        self._directory = directory

    @property
    def directory(self) -> Path:
        return self._directory or home() / "checkpoints"

    @property
    def repo_path(self) -> Path:
        return self.directory / "shadow.git"

    async def snapshot(self, session_id: str, turn_id: str, paths: Iterable[Path], files: FileAccess | None = None) -> None:
        """Keep each path as it is now, unless this turn's checkpoint already holds it.

        ``files``: the machine the paths are on (None: this one)."""
        paths = [Path(p) for p in paths]
        await asyncio.to_thread(self._locked, self._snapshot, session_id, turn_id, paths, files)
        prune_when_due(self.directory, self.prune)

    async def prune(self, *, keep_days: float = KEEP_DAYS, grace: float = 3600.0) -> PruneReport:
        """Let go of sessions whose newest checkpoint is older than ``keep_days`` (0: keep all),
        then delete objects that nothing points at and that are older than ``grace`` seconds."""
        return await asyncio.to_thread(self._locked, prune_repo, keep_days, grace)

    async def record_written(self, session_id: str, turn_id: str, paths: Iterable[Path], files: FileAccess | None = None) -> None:
        """Note what the turn wrote, so that a later undo can tell if someone changed it since."""
        paths = [Path(p) for p in paths]
        await asyncio.to_thread(self._locked, self._record_written, session_id, turn_id, paths, files)

    async def list(self, session_id: str) -> list[Checkpoint]:
        """The session's checkpoints, newest first."""
        return await asyncio.to_thread(self._locked, self._list, session_id)

    async def preview_undo(self, session_id: str) -> tuple[Checkpoint | None, builtins.list[_Row], builtins.list[str]]:
        """The newest checkpoint, each file's (path, current bytes, restored bytes), and conflicts."""
        return await asyncio.to_thread(self._locked, self._preview, session_id)

    async def undo_last(self, session_id: str, *, force: bool = False, expect: str | None = None) -> UndoReport:
        """Restore the newest checkpoint's files and drop it from the session's list.

        ``expect``: the checkpoint id the caller showed the user; a different newest one is an error.
        """
        return await asyncio.to_thread(self._locked, self._undo, session_id, force, expect)

    async def drop_session(self, session_id: str) -> bool:
        """Forget the session's checkpoints (its branch and its undone chain); the next prune
        deletes the objects nothing else points at. False when it had none."""
        if not (self.repo_path / "HEAD").exists():
            return False
        return await asyncio.to_thread(self._locked, self._drop, session_id)

    # --- the work, in a thread -------------------------------------------------------

    def _drop(self, repo: Any, session_id: str) -> bool:
        import git

        dropped = False
        for ref in (_ref(session_id), f"refs/undone/{_safe(session_id)}"):
            if (Path(repo.git_dir) / ref).exists() or git.Reference(repo, ref).is_valid():
                git.Reference.delete(repo, ref)
                dropped = True
        return dropped

    def _locked(self, func: Callable[[Any, *_Ts], _T], *args: *_Ts) -> _T:
        with _LOCKS_GUARD:
            lock = _LOCKS.setdefault(self.repo_path, threading.Lock())
        with lock:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Other processes (editor windows, hermes-mcp, the gateway) use the same repository.
            fd = os.open(self.directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                repo = self._open()
                try:
                    return func(repo, *args)
                finally:
                    repo.close()
            finally:
                os.close(fd)  # releases the lock

    def _open(self) -> Any:
        os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")  # no git binary is needed
        import git

        path = self.repo_path
        if not (path / "HEAD").exists():
            _init_bare(path)
        with warnings.catch_warnings():
            # The pure-Python object database spawns no `git cat-file` processes.
            warnings.simplefilter("ignore", DeprecationWarning)
            return git.Repo(path, odbt=_private_odb())

    def _head(self, repo: Any, session_id: str) -> Any | None:
        import git

        ref = git.Reference(repo, _ref(session_id))
        return ref.commit if ref.is_valid() else None

    def _snapshot(self, repo: Any, session_id: str, turn_id: str, paths: builtins.list[Path], machine: FileAccess | None) -> None:
        head = self._head(repo, session_id)
        manifest = _manifest(head) if head is not None else None
        if head is not None and manifest is not None and manifest["turn"] == turn_id:
            parents, entries, files = list(head.parents), _file_entries(head), manifest["files"]
        else:
            parents, entries, files = [head] if head is not None else [], [], []
            manifest = {"session": session_id, "turn": turn_id, "created": time.time()}
        known = {f["path"] for f in files}
        added = False
        label = machine.label if machine is not None else None
        on = {"host": label} if label is not None else {}
        for path in paths:
            if str(path) in known:
                continue
            regular = _regular(machine, path)
            exists = regular is not None or (machine.exists(path) if machine is not None else path.exists())
            if regular is None and exists:
                continue  # a directory or a device: not kept
            known.add(str(path))
            added = True
            if regular is None:
                files.append({"path": str(path), "existed": False, **on})
                continue
            mode, size = regular
            entry: dict[str, Any] = {"path": str(path), "existed": True, "mode": mode, **on}
            if size > MAX_FILE_BYTES:
                entry["skipped"] = True
            else:
                data = machine.read_bytes(path) if machine is not None else path.read_bytes()
                entries.append(_entry(repo, _tree_path(path, label), data, bool(mode & 0o111)))
            files.append(entry)
        if added:
            manifest["files"] = files
            self._commit(repo, session_id, manifest, entries, parents, f"turn {turn_id}")

    def _record_written(self, repo: Any, session_id: str, turn_id: str, paths: builtins.list[Path], machine: FileAccess | None) -> None:
        head = self._head(repo, session_id)
        manifest = _manifest(head) if head is not None else None
        if head is None or manifest is None or manifest["turn"] != turn_id:
            return
        wanted = {str(p) for p in paths}
        for entry in manifest["files"]:
            if entry["path"] in wanted and entry.get("host") == (machine.label if machine is not None else None):
                path = Path(entry["path"])
                if machine is not None:
                    entry["after"] = blob_id(machine.read_bytes(path)) if machine.stat(path) is not None else ""
                else:
                    entry["after"] = blob_id(path.read_bytes()) if path.is_file() else ""
        self._commit(repo, session_id, manifest, _file_entries(head), list(head.parents), f"turn {turn_id}")

    def _commit(
        self,
        repo: Any,
        session_id: str,
        manifest: dict[str, Any],
        entries: builtins.list[Any],
        parents: builtins.list[Any],
        message: str,
        ref: str | None = None,
    ) -> Any:
        import git
        from git.index.fun import write_tree_from_cache

        data = json.dumps(manifest, indent=1, sort_keys=True).encode()
        entries = [e for e in entries if e.path != MANIFEST] + [_entry(repo, MANIFEST, data, False)]
        entries.sort(key=lambda e: e.path)
        binsha, _ = write_tree_from_cache(entries, repo.odb, slice(0, len(entries)))
        actor = git.Actor("hermes-editor", "checkpoints@hermes-editor.invalid")
        commit = git.Commit.create_from_tree(
            repo, git.Tree(repo, binsha), message, parent_commits=parents, head=False, author=actor, committer=actor
        )
        _set_ref(repo, ref or _ref(session_id), commit)
        return commit

    def _list(self, repo: Any, session_id: str) -> builtins.list[Checkpoint]:
        out: builtins.list[Checkpoint] = []
        commit = self._head(repo, session_id)
        while commit is not None and len(out) < MAX_LISTED:
            out.append(_checkpoint(commit))
            commit = commit.parents[0] if commit.parents else None
        return out

    def _preview(self, repo: Any, session_id: str) -> tuple[Checkpoint | None, builtins.list[_Row], builtins.list[str]]:
        head = self._head(repo, session_id)
        if head is None:
            return None, [], []
        checkpoint = _checkpoint(head)
        rows, conflicts = [], []
        for f in checkpoint.files:
            path = Path(f.path)
            machine = _machine(f.host)
            if machine is not None:
                current = machine.read_bytes(path) if machine.stat(path) is not None else None
            else:
                current = path.read_bytes() if path.is_file() else None
            restored = None
            if f.existed and not f.skipped:
                restored = (head.tree / _tree_path(path, f.host)).data_stream.read()
            if f.after is not None and (blob_id(current) if current is not None else "") != f.after:
                conflicts.append(f.path)
            rows.append((path, current, restored))
        return checkpoint, rows, conflicts

    def _undo(self, repo: Any, session_id: str, force: bool, expect: str | None) -> UndoReport:
        checkpoint, rows, conflicts = self._preview(repo, session_id)
        if checkpoint is None:
            return UndoReport(None)
        if expect is not None and checkpoint.id != expect:
            raise RuntimeError("the newest checkpoint changed while undo was being approved; try again")
        report = UndoReport(checkpoint, conflicts=conflicts)
        if conflicts and not force:
            return report
        # Keep what is about to be replaced, on the session's "undone" chain.
        undone_ref = f"refs/undone/{_safe(session_id)}"
        import git

        previous = git.Reference(repo, undone_ref)
        entries, files = [], []
        by_path = {f.path: f for f in checkpoint.files}
        for path, current, _ in rows:
            label = by_path[str(path)].host
            files.append({"path": str(path), "existed": current is not None, **({"host": label} if label else {})})
            if current is not None:
                machine = _machine(label)
                regular = machine.stat(path) if machine is not None else None
                executable = bool(regular[0] & 0o111) if regular is not None else os.access(path, os.X_OK)
                entries.append(_entry(repo, _tree_path(path, label), current, executable))
        saved = self._commit(
            repo,
            session_id,
            {"session": session_id, "turn": checkpoint.turn_id, "undo_of": checkpoint.id, "created": time.time(), "files": files},
            entries,
            [repo.commit(checkpoint.id)] + ([previous.commit] if previous.is_valid() else []),
            f"undo of turn {checkpoint.turn_id}",
            ref=undone_ref,
        )
        report.saved_as = saved.hexsha
        for path, current, restored in rows:
            entry = by_path[str(path)]
            machine = _machine(entry.host)
            if entry.skipped:
                report.skipped.append(str(path))
            elif restored is not None:
                if machine is not None:
                    machine.write_bytes(path, restored, entry.mode)
                else:
                    write_atomic(path, restored, mode=entry.mode)
                report.restored.append(str(path))
            elif current is not None:
                if machine is not None:
                    machine.unlink(path)
                else:
                    path.unlink()
                report.removed.append(str(path))
        head = repo.commit(checkpoint.id)
        if head.parents:
            _set_ref(repo, _ref(session_id), head.parents[0])
        else:
            git.Reference.delete(repo, _ref(session_id))
        return report


@functools.cache
def _private_odb() -> Any:
    """GitPython's pure-Python object database, writing objects 0400 instead of gitdb's 0444."""
    import git
    from gitdb.db.loose import LooseObjectDB

    class PrivateLooseObjectDB(LooseObjectDB):
        new_objects_mode = 0o400  # objects are copies of the user's files

    class PrivateGitDB(git.GitDB):
        LooseDBCls = PrivateLooseObjectDB

    return PrivateGitDB


def _set_ref(repo: Any, ref: str, commit: Any) -> None:
    """Point ``ref`` at ``commit``, readable by the owner only (GitPython makes ref files 0644).

    Every writer holds the repository's lock (``Checkpoints._locked``), so a ``.lock`` file
    beside the ref is stale, left by a process killed while writing it: it would block this
    session's checkpoints and undo for good, and is removed."""
    import git

    (Path(repo.git_dir) / f"{ref}.lock").unlink(missing_ok=True)
    git.Reference.create(repo, ref, commit, force=True)
    os.chmod(Path(repo.git_dir) / ref, 0o600)


def _init_bare(path: Path) -> None:
    """A bare repository made by hand (no git binary, no environment that could redirect it)."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.{threading.get_ident()}"
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
    (tmp / "HEAD").write_text("ref: refs/heads/main\n")
    # sharedRepository = 0600: git itself, if ever run on it, keeps it private too (objects 0400).
    (tmp / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n\tsharedRepository = 0600\n")
    (tmp / "description").write_text("hermes-editor checkpoints: files as they were before each turn\n")
    try:
        os.rename(tmp, path)
    except OSError:  # another process made it first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def _ref(session_id: str) -> str:
    return f"refs/heads/sessions/{_safe(session_id)}"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".") or "_"


def _tree_path(path: Path, host: str | None = None) -> str:
    where = f"hosts/{_safe(host)}/" if host else ""
    return "files/" + where + str(path).replace("\\", "/").replace(":", "").lstrip("/")


def _entry(repo: Any, path: str, data: bytes, executable: bool) -> Any:
    from git.index.typ import BaseIndexEntry
    from gitdb import IStream

    stream = repo.odb.store(IStream(b"blob", len(data), io.BytesIO(data)))
    return BaseIndexEntry((0o100755 if executable else 0o100644, stream.binsha, 0, path))


def _file_entries(commit: Any) -> list[Any]:
    from git.index.typ import BaseIndexEntry

    return [
        BaseIndexEntry((item.mode, item.binsha, 0, item.path))
        for item in commit.tree.traverse()
        if item.type == "blob" and item.path != MANIFEST
    ]


def _manifest(commit: Any) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((commit.tree / MANIFEST).data_stream.read())
    return manifest


def _checkpoint(commit: Any) -> Checkpoint:
    manifest = _manifest(commit)
    files = tuple(
        CheckpointFile(f["path"], f["existed"], f.get("mode"), f.get("after"), f.get("skipped", False), f.get("host"))
        for f in manifest.get("files", [])
    )
    return Checkpoint(commit.hexsha, manifest["session"], manifest["turn"], manifest["created"], files)
