"""``hermes-editor profiles list|create|remove``: separate state homes under the main one.

A profile is a whole state home (config, sessions, memory, skills, logs, checkpoints) in
``$HERMES_EDITOR_HOME/profiles/NAME``; every program takes ``--profile NAME`` (or
``HERMES_EDITOR_PROFILE``). ``default`` is the main home itself. These commands work on the main
home's list whatever profile is selected, so ``--profile`` here only marks the one in use.

Nothing is deleted: ``remove`` moves the profile to ``$HERMES_EDITOR_HOME/trash/`` once no process
uses it (each holds a shared lock on its home's ``in-use.lock``; a gateway also its bot's lock).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from core.state_home import (
    DEFAULT_PROFILE,
    IN_USE_LOCK,
    PROFILE_ENV,
    PROFILES_DIR,
    ProfileError,
    check_profile_name,
    ensure_private_home,
    main_home_path,
    profile_names,
    profile_path,
)
from hermes_cli.json_out import add_json_flag, emit

__all__ = ["COPIED_FILES", "TRASH_DIR", "register", "run"]

TRASH_DIR = "trash"  # under the main home: removed profiles, as NAME.YYYYmmddTHHMMSSZ
COPIED_FILES = ("config.toml", "SOUL.md")  # what --from copies: settings and persona, never history or memory
_COPY_LIMIT = 4 * 1024 * 1024
# Chat platforms' sections stay behind with --from: a bot token serves one gateway (Telegram refuses a
# second poller), and a second profile is most often a second bot.
_PLATFORM_SECTIONS = ("telegram", "discord", "slack", "whatsapp", "signal", "matrix", "email")


class _Refused(Exception):
    """A profile command that cannot be done; the message says why and what to do."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``profiles`` subcommand (bare ``profiles`` lists)."""
    profiles = commands.add_parser(
        "profiles",
        help="list, create or remove profiles: separate state homes (hermes-editor --profile NAME ...)",
        description="A profile is a separate state home, $HERMES_EDITOR_HOME/profiles/NAME: its own config.toml, "
        "sessions, SOUL.md, memory, skills, logs and checkpoints. Every program takes --profile NAME "
        f"(or {PROFILE_ENV}); '{DEFAULT_PROFILE}' is the main home.",
    )
    add_json_flag(profiles)
    actions = profiles.add_subparsers(dest="action", metavar="ACTION")
    listed = actions.add_parser("list", help="every profile with its path, sessions and size (the default)")
    listed.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON array of objects instead of text")
    create = actions.add_parser("create", help="make a new, empty profile")
    create.add_argument("name", help="letters, digits, '-' and '_' (at most 64)")
    create.add_argument(
        "--from",
        dest="source",
        metavar="NAME",
        help=f"copy config.toml (without its chat platforms' sections: one bot token serves one gateway) and SOUL.md "
        f"from this profile ('{DEFAULT_PROFILE}': the main home); never sessions, memory, skills or tokens",
    )
    remove = actions.add_parser(
        "remove",
        help="move a profile to the trash folder of the main home (nothing is deleted)",
        description="Move the profile to $HERMES_EDITOR_HOME/trash/NAME.TIME, once no process uses it. "
        "Nothing is deleted: delete that folder yourself when sure, or move it back to restore the profile.",
    )
    remove.add_argument("name")
    remove.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def run(args: argparse.Namespace) -> int:
    """Run a ``profiles`` command on the main home (the selected profile is only checked and marked)."""
    try:
        current = _current(args.profile)
    except ProfileError as exc:
        print(f"hermes-editor: {exc}", file=sys.stderr)
        return 2
    ensure_private_home(main_home_path(), in_use=False)
    try:
        if args.action == "create":
            return _create(args.name, args.source)
        if args.action == "remove":
            return _remove(args.name, yes=args.yes)
        return _list(current, as_json=args.json)
    except ProfileError as exc:
        print(f"hermes-editor: {exc}", file=sys.stderr)
        return 2
    except _Refused as exc:
        print(f"hermes-editor: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return 130


def _current(flag: str | None) -> str:
    """The profile selected by --profile or the environment (checked, not required to exist)."""
    if flag is not None:
        return check_profile_name(flag)
    name = os.environ.get(PROFILE_ENV)
    return check_profile_name(name, PROFILE_ENV) if name else DEFAULT_PROFILE


# --- list ------------------------------------------------------------------------------------


def _list(current: str, *, as_json: bool) -> int:
    main = Path(main_home_path())
    rows = [_describe(DEFAULT_PROFILE, main, current, skip={PROFILES_DIR, TRASH_DIR})]
    rows += [_describe(name, main / PROFILES_DIR / name, current) for name in profile_names()]
    if as_json:
        return emit(rows)
    width = max(len(r["name"]) for r in rows)
    print(f"  {'NAME':<{width}}  {'SESSIONS':>8}  {'SIZE':>9}  PATH")
    for r in rows:
        mark = "*" if r["current"] else " "
        sessions = "-" if r["sessions"] is None else str(r["sessions"])
        note = "  (the main home)" if r["default"] else ""
        print(f"{mark} {r['name']:<{width}}  {sessions:>8}  {_size(r['size_bytes']):>9}  {r['path']}{note}")
    if current != DEFAULT_PROFILE and current not in profile_names():
        print(f"\nThe selected profile {current!r} does not exist: 'hermes-editor profiles create {current}' makes it.")
    return 0


def _describe(name: str, path: Path, current: str, skip: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    return {
        "name": name,
        "path": str(path),
        "default": name == DEFAULT_PROFILE,
        "current": name == current,
        "sessions": _session_count(path / "state.db"),
        "size_bytes": _tree_size(path, skip),
    }


def _session_count(db: Path) -> int | None:
    """Sessions in a store, read-only (another profile's store is neither made nor migrated); None without one."""
    if not db.is_file():
        return None
    try:
        with sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=5) as conn:
            (count,) = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()
    except sqlite3.Error:
        return None
    return int(count)


def _tree_size(root: Path, skip: frozenset[str] | set[str] = frozenset()) -> int:
    """Bytes of the files under ``root`` (links not followed; ``skip``: names at the top left out)."""
    total = 0
    for folder, dirs, files in os.walk(root):
        if folder == str(root):
            dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n / 1000:.1f} kB"


# --- create ----------------------------------------------------------------------------------


def _create(name: str, source: str | None) -> int:
    check_profile_name(name, "profiles create")
    if name == DEFAULT_PROFILE:
        raise _Refused(f"{DEFAULT_PROFILE!r} is the main home ({main_home_path()}); it always exists. Choose another name.", 2)
    source_path = _source(source) if source is not None else None
    twin = [n for n in profile_names() if n.lower() == name.lower()]
    if twin:
        raise _Refused(f"a profile named {twin[0]!r} exists at {profile_path(twin[0])}; profile names differ by more than case.")
    path = Path(profile_path(name))
    path.parent.mkdir(mode=0o700, exist_ok=True)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        raise _Refused(f"{path} exists already; 'hermes-editor profiles list' shows the profiles.") from None
    copied = [_copy(source_path / file, path / file) for file in COPIED_FILES] if source_path is not None else []
    print(f"Made the profile {name!r}: {path}")
    if source is not None:
        done = [f for f, ok in zip(COPIED_FILES, copied) if ok]
        print(f"Copied from {source!r}: {', '.join(done) if done else 'nothing (it has neither ' + ' nor '.join(COPIED_FILES) + ')'}.")
    print(f"Use it with --profile {name} (hermes-acp, hermes-mcp, hermes-gateway, hermes-editor) or {PROFILE_ENV}={name}.")
    if not copied or not copied[0]:
        print(f"Set its model with 'hermes-editor --profile {name} setup'.")
    return 0


def _source(source: str) -> Path:
    check_profile_name(source, "--from")
    path = Path(profile_path(source))
    if not path.is_dir():
        listed = ", ".join([DEFAULT_PROFILE, *profile_names()])
        raise _Refused(f"--from: no profile named {source!r}; existing: {listed}")
    return path


def _copy(source: Path, target: Path) -> bool:
    """Copy one file into the new profile, private (0600); False when the source has none."""
    if not source.is_file():
        return False
    if source.stat().st_size > _COPY_LIMIT:
        raise _Refused(f"--from: {source} is over {_COPY_LIMIT // (1024 * 1024)} MB; copy what you need by hand.")
    data = source.read_bytes()
    if source.name == "config.toml":
        data = _without_platforms(data, source)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return True


def _without_platforms(data: bytes, source: Path) -> bytes:
    """config.toml less its chat platforms' sections (comments and order kept)."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        document = tomlkit.parse(data.decode("utf-8"))
    except (UnicodeDecodeError, TOMLKitError) as exc:
        raise _Refused(f"--from: {source} is not valid TOML ({exc}); fix it, or copy what you need by hand.") from None
    for section in _PLATFORM_SECTIONS:
        document.pop(section, None)
    return tomlkit.dumps(document).encode("utf-8")


# --- remove ----------------------------------------------------------------------------------


def _remove(name: str, *, yes: bool) -> int:
    check_profile_name(name, "profiles remove")
    if name == DEFAULT_PROFILE:
        raise _Refused(f"{DEFAULT_PROFILE!r} is the main home ({main_home_path()}), not a profile; it cannot be removed.", 2)
    path = Path(profile_path(name))
    if not os.path.lexists(path):
        listed = ", ".join(profile_names()) or "none"
        raise _Refused(f"no profile named {name!r}; existing: {listed}")
    sessions, size = _session_count(path / "state.db"), _tree_size(path)
    what = f"{sessions or 0} session(s), {_size(size)}"
    if not yes:
        try:
            answer = input(f"Move the profile {name!r} ({what}, {path}) to the trash folder? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            raise _Refused(f"kept the profile {name!r} (answer y, or pass --yes).")
    lock = _lock_unused(name, path)
    try:
        trash = Path(main_home_path()) / TRASH_DIR
        trash.mkdir(mode=0o700, exist_ok=True)
        target = trash / f"{name}.{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
        if os.path.lexists(target):
            raise _Refused(f"{target} exists already; try again in a second.")
        os.rename(path, target)  # a link to a profile kept elsewhere moves as a link: its target stays
    finally:
        if lock is not None:
            os.close(lock)
    print(f"Moved the profile {name!r} ({what}) to {target}.")
    print(f"Nothing was deleted: delete that folder when you are sure, or move it back to {path} to restore the profile.")
    return 0


def _lock_unused(name: str, path: Path) -> int | None:
    """Take the profile's in-use lock exclusively (held through the move), or refuse naming what runs."""
    gateway = _running_gateway(path / "gateway")
    if gateway is not None:
        raise _Refused(f"the profile {name!r} is in use by hermes-gateway (pid {gateway}); stop it first, then remove the profile.")
    try:
        fd = os.open(path / IN_USE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None  # a profile that cannot hold a lock cannot be in use by anything of ours
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise _Refused(
            f"the profile {name!r} is in use by a running process (an editor's hermes-acp, hermes-mcp, hermes-gateway "
            f"or a hermes-editor command with --profile {name}); close it first, then remove the profile."
        ) from None
    return fd


def _running_gateway(directory: Path) -> int | str | None:
    """The pid of a gateway holding one of the locks in ``directory`` (an older one holds no in-use lock)."""
    if not directory.is_dir():
        return None
    for lock in sorted(directory.glob("*.lock")):
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            try:
                return int(json.loads(lock.with_suffix(".json").read_text(encoding="utf-8"))["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                return "?"
        finally:
            os.close(fd)
    return None
