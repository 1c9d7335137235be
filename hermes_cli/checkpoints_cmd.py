"""``hermes-editor checkpoints [list [SESSION] | prune]``: the file checkpoints /undo restores, and
keeping their shadow repository small."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from hermes_cli.json_out import add_json_flag, emit, iso

__all__ = ["register", "run"]

# Without a session, the listing looks at this many most recent sessions.
RECENT_SESSIONS = 20


def register(commands: argparse._SubParsersAction) -> None:
    checkpoints = commands.add_parser("checkpoints", help="list file checkpoints (what /undo restores) or prune old ones")
    add_json_flag(checkpoints)
    actions = checkpoints.add_subparsers(dest="action", metavar="ACTION")
    listed = actions.add_parser(
        "list", help=f"a session's checkpoints, newest first (the default; without SESSION: the {RECENT_SESSIONS} latest sessions')"
    )
    listed.add_argument("session_id", nargs="?", metavar="SESSION", help="a session id, or a unique prefix of one")
    add_json_flag(listed)
    prune = actions.add_parser(
        "prune",
        help="let go of old sessions' checkpoints and delete unused objects (also done daily on its own)",
    )
    prune.add_argument(
        "--keep-days", type=float, default=None, help="keep sessions with a checkpoint this recent (default 30; 0 keeps every session)"
    )


def run(args: argparse.Namespace) -> int:
    from core.host.checkpoints import KEEP_DAYS, Checkpoints

    if args.action in (None, "list"):
        return asyncio.run(_list(getattr(args, "session_id", None), as_json=args.json))
    keep_days = KEEP_DAYS if args.keep_days is None else args.keep_days
    if keep_days < 0:
        print("--keep-days must be 0 or more")
        return 2
    store = Checkpoints()
    if not (store.repo_path / "HEAD").exists():
        print("No checkpoints yet.")
        return 0
    report = asyncio.run(store.prune(keep_days=keep_days))
    print(report.summary())
    return 0


async def _list(ref: str | None, *, as_json: bool) -> int:
    from core.config import home
    from core.host.checkpoints import Checkpoints
    from core.store import SessionStore
    from hermes_cli.ids import IdError, find_session, unknown

    path = home() / "state.db"
    checkpoints = Checkpoints()
    if not path.exists() or not (checkpoints.repo_path / "HEAD").exists():
        if ref is not None and not path.exists():
            print(unknown(ref, "session", "sessions list"), file=sys.stderr)
            return 1
        return emit([]) if as_json else _say("No checkpoints yet.")
    async with SessionStore.open(path) as store:
        if ref is None:
            sessions = await store.list_sessions(limit=RECENT_SESSIONS)
        else:
            try:
                sessions = [await find_session(store, ref)]
            except IdError as exc:
                print(exc, file=sys.stderr)
                return exc.code
    found = [(session, await checkpoints.list(session.id)) for session in sessions]
    if as_json:
        return emit([_row(session, point) for session, points in found for point in points])
    if not any(points for _, points in found):
        return _say("No checkpoints for this session." if ref is not None else "No checkpoints in the latest sessions.")
    for session, points in found:
        if not points:
            continue
        print(f"{session.id}  {session.title or '(untitled)'}  {session.cwd}")
        for point in points:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(point.created))
            names = ", ".join(f.path if f.existed else f"{f.path} (new)" for f in point.files[:4])
            more = f" and {len(point.files) - 4} more" if len(point.files) > 4 else ""
            print(f"  {point.id[:12]}  {when}  turn {point.turn_id}  {names}{more}")
    return 0


def _say(text: str) -> int:
    print(text)
    return 0


def _row(session: Any, point: Any) -> dict[str, Any]:
    """A checkpoint in ``checkpoints list --json``; ``files`` are the files as they were before the turn."""
    return {
        "id": point.id,
        "session_id": session.id,
        "session_title": session.title,
        "turn_id": point.turn_id,
        "created_at": iso(point.created),
        "files": [{"path": f.path, "existed": f.existed, "kept": not f.skipped} for f in point.files],
    }
