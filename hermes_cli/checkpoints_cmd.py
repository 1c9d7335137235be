"""``hermes-editor checkpoints prune``: keep the shadow repository of file checkpoints small."""

from __future__ import annotations

import argparse
import asyncio

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction) -> None:
    checkpoints = commands.add_parser("checkpoints", help="prune old file checkpoints (what /undo restores)")
    actions = checkpoints.add_subparsers(dest="action", metavar="ACTION")
    prune = actions.add_parser(
        "prune",
        help="let go of old sessions' checkpoints and delete unused objects (also done daily on its own)",
    )
    prune.add_argument(
        "--keep-days", type=float, default=None, help="keep sessions with a checkpoint this recent (default 30; 0 keeps every session)"
    )


def run(args: argparse.Namespace) -> int:
    from core.host.checkpoints import KEEP_DAYS, Checkpoints

    if args.action != "prune":
        print("usage: hermes-editor checkpoints prune [--keep-days N]")
        return 2
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
