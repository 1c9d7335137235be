"""The state home is private: the directory 0700, every file in it readable by its owner only.

Every entry point calls :func:`ensure_private_home` first. It sets the process umask to 0o077,
so everything the process writes for itself (the store and SQLite's WAL and SHM files, which
take the store's mode, logs, checkpoints, memories, skills, locks) is private however it is
written. Files the process writes for the user, in the user's project, and the commands it
runs there must get the user's own umask back: :func:`user_umask`, :func:`user_file_mode`,
:func:`make_user_dirs`. :func:`repair_modes` tightens a home made by an older version.

Profiles: ``--profile NAME`` on every program (or ``HERMES_EDITOR_PROFILE``; the flag wins) puts
the whole state home one level down, in ``$HERMES_EDITOR_HOME/profiles/NAME/``, so that work and
personal agents, or two bots, share nothing. :func:`select_profile` checks the name and exports
it, so that every child process (the editor's terminal, the demo, ``chat``) follows;
:func:`home_path` resolves it; every process holds a shared lock on its home's ``in-use.lock``
for its life, which ``hermes-editor profiles remove`` takes exclusively to know nothing uses it.

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
    "DEFAULT_PROFILE",
    "HOME_ENV",
    "IN_USE_LOCK",
    "PROFILE_ENV",
    "PROFILE_HELP",
    "PROFILE_NAME_MAX",
    "PROFILES_DIR",
    "ProfileError",
    "check_profile_name",
    "enter_home",
    "home_path",
    "main_home_path",
    "profile_name",
    "profile_path",
    "profile_names",
    "select_profile",
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


HOME_ENV = "HERMES_EDITOR_HOME"
PROFILE_ENV = "HERMES_EDITOR_PROFILE"
PROFILES_DIR = "profiles"  # under the main home
DEFAULT_PROFILE = "default"  # the main home itself: --profile default undoes an inherited HERMES_EDITOR_PROFILE
PROFILE_NAME_MAX = 64
IN_USE_LOCK = "in-use.lock"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
PROFILE_HELP = (
    "use the profile NAME: a separate state home, $HERMES_EDITOR_HOME/profiles/NAME (config, sessions, memory, "
    f"skills, logs), so that two agents share nothing; 'default' is the main home. Overrides {PROFILE_ENV}; "
    "given twice, the last one counts"
)
_held: tuple[str, int] | None = None  # the home this process holds in-use.lock of, and the descriptor


class ProfileError(ValueError):
    """A profile name that is not allowed, or a profile that does not exist where one must."""


def main_home_path() -> str:
    """The main state home: ``$HERMES_EDITOR_HOME`` or ``~/.hermes-editor``, whatever the profile."""
    env = os.environ.get(HOME_ENV)
    return os.path.expanduser(env) if env else os.path.join(os.path.expanduser("~"), ".hermes-editor")


def check_profile_name(name: str, source: str = "--profile") -> str:
    """``name`` if it may name a profile (ASCII letters, digits, ``-`` and ``_``, starting with a letter
    or digit, at most 64 characters), else :class:`ProfileError` naming ``source`` and the rule.

    Names become one directory's name: no ``/``, no ``..``, nothing a shell or a case-folding file
    system reads otherwise (``Work`` and ``work`` are refused as two profiles by :func:`select_profile`)."""
    if name and len(name) <= PROFILE_NAME_MAX and name[0] not in "-_" and all(c in _NAME_CHARS for c in name):
        return name
    shown = repr(name) if len(name) <= PROFILE_NAME_MAX + 16 else repr(name[:PROFILE_NAME_MAX]) + "..."
    raise ProfileError(
        f"{source}: {shown} is not a profile name; use 1 to {PROFILE_NAME_MAX} ASCII letters, digits, '-' and '_', "
        f"starting with a letter or a digit (for example --profile work; '{DEFAULT_PROFILE}' is the main home)"
    )


def profile_name() -> str | None:
    """The profile in use (``HERMES_EDITOR_PROFILE``), or None for the main home (unset, empty or ``default``)."""
    name = os.environ.get(PROFILE_ENV)
    if not name or name == DEFAULT_PROFILE:
        return None
    return check_profile_name(name, PROFILE_ENV)


def profile_path(name: str) -> str:
    """Where the profile ``name`` lives (the main home for ``default``); the name is checked first."""
    check_profile_name(name, "profile")
    if name == DEFAULT_PROFILE:
        return main_home_path()
    return os.path.join(main_home_path(), PROFILES_DIR, name)


def home_path() -> str:
    """The state home: the main home, or ``profiles/NAME`` in it with a profile (a string: nothing heavier loads)."""
    name = profile_name()
    return main_home_path() if name is None else os.path.join(main_home_path(), PROFILES_DIR, name)


def profile_names() -> list[str]:
    """The profiles made so far (folders with a valid name under ``profiles/``), sorted."""
    try:
        entries = os.listdir(os.path.join(main_home_path(), PROFILES_DIR))
    except OSError:
        return []
    root = os.path.join(main_home_path(), PROFILES_DIR)
    return sorted(n for n in entries if _valid(n) and n != DEFAULT_PROFILE and os.path.isdir(os.path.join(root, n)))


def _valid(name: str) -> bool:
    try:
        check_profile_name(name)
    except ProfileError:
        return False
    return True


def select_profile(flag: str | None, *, create: bool) -> str | None:
    """Choose the profile for this process and export it: ``--profile`` (``flag``) over ``HERMES_EDITOR_PROFILE``.

    Called by every program before anything reads the home; children inherit the choice through the
    environment. ``create``: a missing profile is made (by :func:`ensure_private_home`), as a server an
    editor spawns should start the first time; otherwise a missing one is a :class:`ProfileError` that says
    how to make it (a typo must not make an empty home). Returns the profile's name, None for the main home.
    """
    if flag is not None:
        check_profile_name(flag)
        os.environ[PROFILE_ENV] = flag
    name = profile_name()
    if name is None:
        return None
    path = home_path()
    if os.path.isdir(path):
        return name
    if os.path.lexists(path):
        raise ProfileError(f"the profile {name!r} is {path}, which is not a directory; move it away")
    others = profile_names()
    twin = [n for n in others if n.lower() == name.lower()]
    if twin:
        raise ProfileError(f"no profile named {name!r}, but there is {twin[0]!r}: profile names differ by more than case")
    if not create:
        listed = ", ".join(others) if others else f"none besides {DEFAULT_PROFILE!r}, the main home"
        raise ProfileError(f"no profile named {name!r}; 'hermes-editor profiles create {name}' makes one; existing: {listed}")
    return name


def enter_home(prog: str, flag: str | None, *, create: bool) -> int | None:
    """What every program does first: :func:`select_profile`, then :func:`ensure_private_home`.

    None when the home is ready; 2 (after saying why on stderr, and with nothing created) when the
    profile's name is not allowed or, without ``create``, the profile does not exist."""
    try:
        name = select_profile(flag, create=create)
    except ProfileError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    made = name is not None and not os.path.isdir(home_path())
    ensure_private_home()
    if made and os.path.isdir(home_path()):
        print(f"{prog}: made the profile {name!r}, a new state home at {home_path()}", file=sys.stderr)
    return None


def ensure_private_home(path: str | None = None, *, in_use: bool = True) -> None:
    """Set the umask to 0o077 (remembering the user's) and create the state home 0700, or tighten it.

    Call it first in ``main()``, after :func:`select_profile` and before any thread starts: the umask
    belongs to the whole process. ``path``: another home than :func:`home_path`'s (the main one, for
    ``hermes-editor profiles``). ``in_use``: hold the home's shared in-use lock for the process's life.
    """
    global _user_umask
    previous = os.umask(PRIVATE_UMASK)
    if _user_umask is None:
        _user_umask = previous
    if path is None:
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
        return  # whatever uses the home first reports that it cannot, naming the path
    if in_use:
        _hold_in_use(path)


def _hold_in_use(home: str) -> None:
    """Hold a shared ``flock`` on ``home/in-use.lock`` until the process ends (the kernel drops it then).

    ``profiles remove`` takes it exclusively before it moves a profile away; a process that got its
    lock on a file that was moved meanwhile opens the new one (the lock must be on the home in use).
    """
    import fcntl

    global _held
    if _held is not None:
        if _held[0] == home:
            return
        os.close(_held[1])  # in-process callers (tests) that change homes
        _held = None
    lock = os.path.join(home, IN_USE_LOCK)
    for _ in range(5):
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return  # a read-only or vanished home: nothing to hold
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            now, held = os.stat(lock, follow_symlinks=False), os.fstat(fd)
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                _held = (home, fd)
                return
        except OSError:
            pass
        os.close(fd)


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
