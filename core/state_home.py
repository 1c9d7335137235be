"""The state home is private: the directory 0700, every file in it readable by its owner only.

Every entry point calls :func:`ensure_private_home` first. It sets the process umask to 0o077,
so everything the process writes for itself (the store and SQLite's WAL and SHM files, which
take the store's mode, logs, checkpoints, memories, skills, locks) is private however it is
written. Files the process writes for the user, in the user's project, and the commands it
runs there must get the user's own umask back: :func:`user_umask`, :func:`user_file_mode`,
:func:`make_user_dirs`. :func:`repair_modes` tightens a home made by an older version.

Only the standard library is imported: this runs before an editor's ``initialize`` is answered.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "home_path",
    "PRIVATE_UMASK",
    "ModeRepair",
    "ensure_private_home",
    "make_user_dirs",
    "repair_modes",
    "user_file_mode",
    "user_umask",
]

PRIVATE_UMASK = 0o077
_user_umask: int | None = None  # the umask the process started with, once ensure_private_home ran


def home_path() -> str:
    """The state home: ``$HERMES_EDITOR_HOME`` or ``~/.hermes-editor`` (a string: nothing heavier loads)."""
    env = os.environ.get("HERMES_EDITOR_HOME")
    return os.path.expanduser(env) if env else os.path.join(os.path.expanduser("~"), ".hermes-editor")


def ensure_private_home() -> None:
    """Set the umask to 0o077 (remembering the user's) and create the state home 0700, or tighten it.

    Call it first in ``main()``, before any thread starts: the umask belongs to the whole process.
    """
    global _user_umask
    previous = os.umask(PRIVATE_UMASK)
    if _user_umask is None:
        _user_umask = previous
    path = home_path()
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.stat(path)
        if stat.S_IMODE(info.st_mode) & 0o077 and info.st_uid == os.geteuid():
            os.chmod(path, 0o700)
            print(
                f"hermes-editor: the state home {path} was open to other users "
                f"({stat.S_IMODE(info.st_mode):04o}); it is now 0700. "
                "'hermes-editor doctor' makes the files in it private too.",
                file=sys.stderr,
            )
    except OSError:
        pass  # whatever uses the home first reports that it cannot, naming the path


def user_umask() -> int:
    """The umask the user started this process with (files in their project are made with it)."""
    if _user_umask is not None:
        return _user_umask
    return _current_umask()


def user_file_mode() -> int:
    """The mode a new file in the user's project gets: 0o666 less the user's umask."""
    return 0o666 & ~user_umask()


def make_user_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents with the modes the user's umask gives directories."""
    missing: list[str] = []
    current = os.path.abspath(path)
    while not os.path.lexists(current) and current != os.path.dirname(current):
        missing.append(current)
        current = os.path.dirname(current)
    mode = 0o777 & ~user_umask()
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            continue  # made meanwhile by someone else: not ours to change
        # Through a descriptor opened without following links: the name may have been swapped.
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    if not os.path.isdir(path):
        raise FileExistsError(f"{path} exists and is not a directory")


def _current_umask() -> int:
    # /proc reads it without changing it; os.umask() would, for a moment, for every thread.
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    current = os.umask(PRIVATE_UMASK)
    os.umask(current)
    return current


class ModeRepair:
    """What :func:`repair_modes` changed (paths relative to the home) and what it could not."""

    def __init__(self) -> None:
        self.fixed: list[tuple[str, int, int, bool]] = []  # path, old mode, new mode, is a directory
        self.failed: list[tuple[str, str]] = []  # path, why

    def describe_fixed(self, limit: int = 5) -> str:
        files = sum(not is_dir for *_, is_dir in self.fixed)
        counts = f"{files} file(s) and {len(self.fixed) - files} folder(s)"
        ordered = sorted(self.fixed, key=lambda f: f[3])  # files first: they hold the contents
        shown = ", ".join(f"{p} {old:04o}→{new:04o}" for p, old, new, _ in ordered[:limit])
        more = len(self.fixed) - limit
        return f"{counts}: {shown}" + (f" and {more} more" if more > 0 else "")

    def describe_failed(self, limit: int = 5) -> str:
        shown = ", ".join(f"{p} ({why})" for p, why in self.failed[:limit])
        more = len(self.failed) - limit
        return shown + (f" and {more} more" if more > 0 else "")


def repair_modes(root: Path | None = None) -> ModeRepair:
    """Take every group and other bit off the home and what is in it: directories 0700, files
    keep only their owner's bits (0600, 0400 for git objects, 0700 for an executable script).

    Symbolic links are neither followed nor changed; what another user owns is reported, not touched.
    """
    from pathlib import Path

    root = Path(root if root is not None else home_path())
    report = ModeRepair()
    uid = os.geteuid()

    def tighten(path: Path, info: os.stat_result, is_dir: bool) -> None:
        mode = stat.S_IMODE(info.st_mode)
        if not mode & 0o7077:
            return
        name = "." if path == root else str(path.relative_to(root))
        if info.st_uid != uid:
            report.failed.append((name, f"owned by uid {info.st_uid}, mode {mode:04o}"))
            return
        new = 0o700 if is_dir else mode & 0o700
        try:
            os.chmod(path, new)
        except OSError as exc:
            report.failed.append((name, exc.strerror or str(exc)))
            return
        report.fixed.append((name, mode, new, is_dir))

    try:
        info = root.stat()  # the home itself may be a link to where the user keeps it
    except FileNotFoundError:
        return report
    tighten(root, info, True)

    def unreadable(exc: OSError) -> None:
        where = Path(exc.filename) if exc.filename else root
        report.failed.append((str(where.relative_to(root)) if where != root else ".", exc.strerror or str(exc)))

    for folder, dirs, files in os.walk(root, onerror=unreadable):
        base = Path(folder)
        for name in (*dirs, *files):
            path = base / name
            try:
                info = os.lstat(path)
            except OSError as exc:
                report.failed.append((str(path.relative_to(root)), exc.strerror or str(exc)))
                continue
            if stat.S_ISLNK(info.st_mode):
                continue
            tighten(path, info, stat.S_ISDIR(info.st_mode))
    return report
