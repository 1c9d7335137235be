"""``hermes-editor sessions list|search|show|export|rename|delete|stats``: the stored history from a terminal."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_cli.ids import IdError, find_session
from hermes_cli.json_out import add_json_flag, emit, iso
from hermes_cli.redact import redact

if TYPE_CHECKING:
    from core.store import SessionStore

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``sessions`` subcommand (bare ``sessions`` lists, as before)."""
    sessions = commands.add_parser("sessions", help="list, search, show, export, rename or delete sessions; stats")
    sessions.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    add_json_flag(sessions)
    actions = sessions.add_subparsers(dest="action", metavar="ACTION")
    listed = actions.add_parser("list", help="recent sessions (the default)")
    listed.add_argument("--limit", type=int, default=argparse.SUPPRESS)
    listed.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON array of objects instead of text")
    add_search_arguments(actions.add_parser("search", help='search messages: words, "phrases", prefix*'))
    show = actions.add_parser("show", help="print a session's messages")
    show.add_argument("session_id", help="an id or a unique prefix of one")
    export = actions.add_parser("export", help="export a session as Markdown or JSONL (secrets redacted)")
    export.add_argument("session_id", help="an id or a unique prefix of one")
    export.add_argument("--format", choices=["md", "jsonl"], default="md")
    export.add_argument("--output", "-o", help="file to write (default: stdout)")
    rename = actions.add_parser("rename", help="set a session's title")
    rename.add_argument("session_id", help="an id or a unique prefix of one")
    rename.add_argument("title", nargs="+")
    delete = actions.add_parser("delete", help="delete sessions with their messages, approvals and checkpoints (asks nothing)")
    delete.add_argument("session_id", nargs="?", help="an id or a unique prefix of one")
    delete.add_argument("--older-than", type=float, metavar="DAYS", help="every session with no activity for this many days")
    delete.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    delete.add_argument("--force", action="store_true", help="delete sessions that are running right now too")
    stats = actions.add_parser("stats", help="counts of sessions and messages, by surface; store size; oldest and newest")
    add_json_flag(stats, "print one JSON object instead of text")


def add_search_arguments(search: argparse.ArgumentParser) -> None:
    """The query and filters of ``sessions search``, which the top-level ``search`` shares."""
    search.add_argument("query", nargs="+", help='words that must all occur, "phrases", prefix*')
    search.add_argument("--project", help="only sessions under this folder")
    search.add_argument("--since", help="YYYY-MM-DD")
    search.add_argument("--until", help="YYYY-MM-DD")
    search.add_argument("--role", choices=["user", "assistant", "tool_result", "summary"])
    search.add_argument("--limit", type=int, default=10, help="how many hits (default 10)")
    add_json_flag(search)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from core.config import home
    from core.store import SessionStore

    if args.action == "delete" and (args.session_id is None) == (args.older_than is None):
        print("usage: hermes-editor sessions delete (ID | --older-than DAYS) [--dry-run] [--force]", file=sys.stderr)
        return 2
    if args.action == "delete" and args.older_than is not None and args.older_than < 0:
        print("--older-than must be 0 or more days.", file=sys.stderr)
        return 2
    listing = args.action in (None, "list")
    path = home() / "state.db"
    if not path.exists() and args.action == "stats" and args.json:
        return _stats_json(None, path)
    if not path.exists() and getattr(args, "json", False):
        emit([])
        return 0 if listing else 1
    if not path.exists():
        print("No sessions yet. Start one from your editor (hermes-acp), or try 'hermes-editor demo'.")
        return 0 if listing or args.action == "stats" else 1
    async with SessionStore.open(path) as store:
        if listing:
            return await _list(store, max(1, args.limit), as_json=args.json)
        if args.action == "search":
            return await _search(store, args)
        if args.action == "stats" and args.json:
            from core.store.session_admin import stats

            return _stats_json(await stats(store), path)
        if args.action == "stats":
            return await _stats(store)
        if args.action == "delete" and args.session_id is None:
            return await _delete(store, None, args)
        try:
            record = await find_session(store, args.session_id)
        except IdError as exc:
            print(exc, file=sys.stderr)
            return exc.code
        if args.action == "rename":
            title = " ".join(args.title).strip()
            if not title:
                print("The title is empty.", file=sys.stderr)
                return 2
            await store.update_session(record.id, title=title)
            print(f"Renamed {record.id} to {title!r}.")
            return 0
        if args.action == "delete":
            return await _delete(store, record, args)
        messages = await store.messages(record.id)
    if args.action == "show":
        from core.store.history import describe

        print(f"{record.title or '(untitled)'}  {record.id}  {record.cwd}")
        for stored in messages:
            print(f"{stored.seq:>4}  {redact(describe(stored.message, 2000))}")
        return 0
    text = _jsonl(messages) if args.format == "jsonl" else _markdown(record, messages)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"Wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


async def _delete(store, record, args: argparse.Namespace) -> int:
    from core.host.checkpoints import Checkpoints
    from core.store.session_admin import delete_sessions, running_sessions, sessions_older_than

    if record is not None:
        targets = [record]
    else:
        targets = await sessions_older_than(store, time.time() - args.older_than * 86_400)
        if not targets:
            print(f"No session has been idle for {args.older_than:g} days.")
            return 0
    running = await running_sessions(store, [r.id for r in targets])
    skipped = [r for r in targets if r.id in running and not args.force]
    targets = [r for r in targets if r not in skipped]
    for r in skipped:
        print(f"Skipped {r.id}  {r.title or '(untitled)'}: it is running now (--force deletes it anyway).", file=sys.stderr)
    counts = {r.id: await store.message_count(r.id) for r in targets}
    if not args.dry_run:
        await delete_sessions(store, [r.id for r in targets])
        checkpoints = Checkpoints()
        for r in targets:
            await checkpoints.drop_session(r.id)
    verb = "Would delete" if args.dry_run else "Deleted"
    for r in targets:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.updated_at))
        print(f"{verb} {r.id}  {when}  {r.title or '(untitled)'}  ({counts[r.id]} messages)")
    if record is None:
        print(f"{verb} {len(targets)} session(s).")
    return 1 if skipped and not targets else 0


def _stats_json(found: Any, path: Path) -> int:
    """``sessions stats --json``: one object; zeros when there is no store yet."""
    row = {
        "sessions": found.sessions if found else 0,
        "messages": found.messages if found else 0,
        "by_surface": dict(found.by_surface) if found else {},
        "size_bytes": found.size_bytes if found else 0,
        "path": str(path),
        "oldest": iso(found.oldest) if found else None,
        "newest": iso(found.newest) if found else None,
        "input_tokens": found.input_tokens if found else 0,
        "output_tokens": found.output_tokens if found else 0,
        "cost_usd": found.cost_usd if found else None,
        "priced_sessions": found.priced_sessions if found else 0,
    }
    sys.stdout.write(json.dumps(row, indent=2) + "\n")
    return 0


async def _stats(store) -> int:
    from core.store.session_admin import stats

    found = await stats(store)

    def day(stamp: float | None) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp is not None else "-"

    print(f"sessions:  {found.sessions}")
    print(f"messages:  {found.messages}")
    for surface, count in found.by_surface.items():
        print(f"  {surface + ':':<9} {count}")
    print(f"store:     {found.size_bytes / 1_000_000:.1f} MB  {store.path}")
    print(f"oldest:    {day(found.oldest)}")
    print(f"newest:    {day(found.newest)}")
    print(f"tokens:    {found.input_tokens:,} in, {found.output_tokens:,} out")
    if found.cost_usd is None:
        print("cost:      unknown (no session has a priced model; see [pricing] in the README)")
    else:
        unpriced = found.sessions - found.priced_sessions
        print(f"cost:      ${found.cost_usd:.4f}" + (f" ({unpriced} sessions without a known price not counted)" if unpriced else ""))
    return 0


async def _search(store, args: argparse.Namespace) -> int:
    from core.store import history

    try:
        hits = await history.search(
            store,
            " ".join(args.query),
            project=str(Path(args.project).resolve()) if args.project else None,
            since=history.to_epoch(args.since),
            until=history.to_epoch(args.until, end=True),
            role=args.role,
            limit=max(1, args.limit),
        )
    except ValueError as exc:
        print(f"Cannot search: {exc}.", file=sys.stderr)
        return 2
    if args.json:
        emit([_hit_row(hit) for hit in hits])
        return 0 if hits else 1
    if not hits:
        print("No matches.")
        return 1
    for hit in hits:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(hit.created_at))
        print(f"{hit.session_id}  {when}  {hit.title or '(untitled)'}  #{hit.seq}")
        print(f"    {hit.role}: {redact(hit.snippet)}")
    return 0


async def _list(store: SessionStore, limit: int, *, as_json: bool) -> int:
    records = await store.list_sessions(limit=limit)
    if as_json:
        return emit([_session_row(r) for r in records])
    if not records:
        print("No sessions yet.")
        return 0
    for record in records:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.updated_at))
        print(f"{record.id}  {when}  {record.surface:<4}  {record.title or '(untitled)'}")
        print(f"{'':34}{_short_path(record.cwd)}")
    return 0


def _short_path(path: str) -> str:
    user = str(Path.home())
    return "~" + path[len(user) :] if path == user or path.startswith(user + "/") else path


def _session_row(record: Any) -> dict[str, Any]:
    """A session in ``sessions list --json``."""
    return {
        "id": record.id,
        "title": redact(record.title) if record.title else None,
        "cwd": record.cwd,
        "surface": record.surface,
        "model": record.model,
        "parent_id": record.parent_id,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "cost_usd": record.cost_usd,
    }


def _hit_row(hit: Any) -> dict[str, Any]:
    """A hit in ``sessions search --json``; ``snippet`` marks matches with ``[`` ``]``."""
    return {
        "session_id": hit.session_id,
        "title": redact(hit.title) if hit.title else None,
        "cwd": hit.cwd,
        "seq": hit.seq,
        "role": hit.role,
        "snippet": redact(hit.snippet),
        "created_at": iso(hit.created_at),
        "score": hit.score,
    }


def _jsonl(messages) -> str:
    from core.messages import dump_message

    lines = []
    for stored in messages:
        row = {"seq": stored.seq, "created_at": stored.created_at, "message": json.loads(dump_message(stored.message))}
        lines.append(redact(json.dumps(row, ensure_ascii=False)))
    return "\n".join(lines) + ("\n" if lines else "")


def _markdown(record, messages) -> str:
    from core.messages import (
        AssistantMessage,
        SummaryMessage,
        ToolResultMessage,
        UserMessage,
    )

    out = [
        f"# {record.title or 'Untitled session'}",
        "",
        f"- id: `{record.id}`",
        f"- project: `{record.cwd}`",
        f"- started: {time.strftime('%Y-%m-%d %H:%M', time.localtime(record.created_at))}",
        "",
    ]
    for stored in messages:
        message = stored.message
        if isinstance(message, UserMessage):
            out += ["## User", "", message.text, ""]
        elif isinstance(message, AssistantMessage):
            out += ["## Assistant", ""] + ([message.text, ""] if message.text else [])
            for call in message.tool_calls:
                out += [f"**{call.name}**", "```json", json.dumps(call.arguments, indent=1, ensure_ascii=False), "```", ""]
        elif isinstance(message, ToolResultMessage):
            status = " (failed)" if message.is_error else ""
            out += [f"<details><summary>{message.tool_name} result{status}</summary>", "", "```", message.content, "```", "</details>", ""]
        elif isinstance(message, SummaryMessage):
            out += ["## Summary of the earlier conversation", "", message.text, ""]
    return redact("\n".join(out))
