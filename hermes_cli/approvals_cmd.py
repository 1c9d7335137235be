"""``hermes-editor approvals [list | allow ID | deny ID]``: answer the agent's questions from a terminal.

Every question any surface asks (an editor's ``hermes-acp``, ``hermes-mcp``, the gateway) is a
row in the store's approvals table; the process that asked waits for the row to be answered.
This answers it through the store's own resolve path, so the first answer from anywhere wins,
atomically: a second answer, here or anywhere else, changes nothing and says so.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from typing import Any

from hermes_cli.json_out import add_json_flag, emit, iso
from hermes_cli.redact import redact

__all__ = ["register", "run"]

ANSWERED_BY = "cli"
MIN_PREFIX = 6


class _Refused(Exception):
    """An answer that cannot be given; the message says why and what to do. ``code`` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``approvals`` subcommand (bare ``approvals`` lists)."""
    approvals = commands.add_parser(
        "approvals",
        help="list the agent's questions waiting for you, and allow or deny them",
        description="Questions from every surface (editors, hermes-mcp, the gateway). The first answer from anywhere counts.",
    )
    add_json_flag(approvals)
    actions = approvals.add_subparsers(dest="action", metavar="ACTION")
    add_json_flag(actions.add_parser("list", help="the questions waiting for an answer (the default)"))
    for verb in ("allow", "deny"):
        answer = actions.add_parser(verb, help=f"{verb} one question")
        answer.add_argument("approval_id", help=f"the id from 'approvals list' (or a unique prefix of {MIN_PREFIX}+ characters)")
        answer.add_argument(
            "--always",
            action="store_true",
            help=f"{verb} this kind of action in this project from now on (only where the question offers it)",
        )


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from core.config import home
    from core.store import SessionStore

    path = home() / "state.db"
    if not path.exists():
        if args.action in (None, "list"):
            if args.json:
                return emit([])
            print("No questions are waiting.")
            return 0
        print(f"No approval {args.approval_id!r}: nothing has been stored yet ({path} does not exist).", file=sys.stderr)
        return 1
    async with SessionStore.open(path) as store:
        if args.action in (None, "list"):
            return await _list(store, as_json=args.json)
        try:
            return await _answer(store, args.approval_id, args.action == "allow", args.always)
        except _Refused as exc:
            print(redact(str(exc)), file=sys.stderr)
            return exc.code


def _timeout() -> float:
    from core.config import ConfigError, load_config

    try:
        return load_config().approvals.timeout
    except ConfigError:
        return 1800.0


async def _list(store: Any, *, as_json: bool = False) -> int:
    # A row older than the approval timeout belongs to a process that is gone (it would have
    # expired the row itself): nobody waits for that answer any more.
    cutoff = time.time() - _timeout()
    rows = [r for r in await store.pending_approvals() if r.created_at >= cutoff]
    if as_json:
        return emit([await _row(store, row) for row in rows])
    if not rows:
        print("No questions are waiting.")
        return 0
    sessions: dict[str, Any] = {}
    for row in rows:
        if row.session_id not in sessions:
            sessions[row.session_id] = await store.get_session(row.session_id)
        record = sessions[row.session_id]
        detail = row.detail or {}
        where = f"{record.surface}, {record.title or 'untitled'}, {record.cwd}" if record else "unknown session"
        print(redact(f"{row.id}  {_age(row.created_at)}  {row.title}"))
        print(redact(f"    session: {where}"))
        if detail.get("reason"):
            print(redact(f"    asks because {detail['reason']}"))
        if detail.get("command"):
            print(redact(f"    command: {detail['command']}"))
        for item in (detail.get("paths") or [])[:5]:
            print(redact(f"    path: {item}"))
        always = " [--always]" if row.offers_always else ""
        print(f"    answer: hermes-editor approvals allow {row.id}{always}   (or deny)")
    return 0


async def _row(store: Any, row: Any) -> dict[str, Any]:
    """A waiting question in ``approvals list --json``; text fields redacted as in the text listing."""
    record = await store.get_session(row.session_id)
    detail = row.detail or {}

    def text(value: Any) -> str | None:
        return redact(str(value)) if value else None

    return {
        "id": row.id,
        "created_at": iso(row.created_at),
        "title": text(row.title),
        "session_id": row.session_id,
        "surface": record.surface if record else None,
        "session_title": text(record.title) if record else None,
        "cwd": text(record.cwd) if record else None,
        "reason": text(detail.get("reason")),
        "command": text(detail.get("command")),
        "paths": [redact(str(item)) for item in (detail.get("paths") or [])],
        "offers_always": bool(row.offers_always),
    }


async def _answer(store: Any, ref: str, allow: bool, always: bool) -> int:
    row = await _find(store, ref)
    verb = "allow" if allow else "deny"
    if row.status != "pending":
        by = f" by {row.decided_by}" if row.decided_by else ""
        raise _Refused(f"Approval {row.id} ({row.title}) was already answered{by}: {row.status}. The first answer counts; nothing changed.")
    if row.created_at < time.time() - _timeout():
        raise _Refused(
            f"Approval {row.id} ({row.title}) is older than [approvals] timeout: the process that asked is no longer "
            "waiting for it. Nothing changed; ask the agent again."
        )
    if always and not row.offers_always:
        raise _Refused(
            f"Approval {row.id} asks every time (it cannot be answered 'always'); run: hermes-editor approvals {verb} {row.id}", 2
        )
    won = await store.resolve_approval(row.id, "allowed" if allow else "denied", ANSWERED_BY, always=always)
    if not won:
        latest = await store.get_approval(row.id)
        by = f" by {latest.decided_by}" if latest and latest.decided_by else ""
        status = latest.status if latest else "gone"
        raise _Refused(f"Approval {row.id} was answered{by} a moment ago ({status}). The first answer counts; nothing changed.")
    done = ("allowed" if allow else "denied") + (" always, for this kind of action in this project" if always else "")
    print(redact(f"{done[0].upper()}{done[1:]}: {row.title} ({row.id})."))
    return 0


async def _find(store: Any, ref: str) -> Any:
    from hermes_cli.ids import IdError, resolve

    ref = ref.strip().lower()
    row = await store.get_approval(ref)
    if row is not None:
        return row
    # Ids are hex: anything else matches nothing, and never reaches the query as a pattern.
    found = []
    if len(ref) >= MIN_PREFIX and re.fullmatch(r"[0-9a-f]+", ref):
        found = await store.select(
            "SELECT id, title, status FROM approvals WHERE id >= ? AND id < ? ORDER BY id LIMIT 21", (ref, ref + "g")
        )
    candidates = [(r["id"], redact(f"{r['status']}: {r['title']}")) for r in found]
    try:
        approval_id = resolve(ref, candidates, what="approval", listing="approvals list", min_length=MIN_PREFIX)
    except IdError as exc:
        raise _Refused(str(exc)) from None
    return await store.get_approval(approval_id)


def _age(created: float) -> str:
    seconds = max(0, int(time.time() - created))
    if seconds < 90:
        return f"{seconds:>3}s ago"
    return f"{seconds // 60:>3}m ago"
