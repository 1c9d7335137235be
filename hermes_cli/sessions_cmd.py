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
    add_export_arguments(actions)
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


# core.learning.export.FORMATS, OUTCOMES and core.store.records.SURFACES, stated again so that
# building the parser imports no part of core (a test checks they agree).
EXPORT_FORMATS = ("md", "jsonl", "sharegpt", "openai", "trajectory")
EXPORT_OUTCOMES = ("completed", "cancelled", "failed", "refused", "incomplete", "unknown")
EXPORT_SURFACES = ("acp", "mcp", "gateway", "cli")
_EXPORT_HELP = """\
Formats: md (a readable transcript), jsonl (the stored messages, one a line), sharegpt
(LLaMA-Factory's ShareGPT: one JSON array), openai (OpenAI chat fine-tuning JSONL, one session a
line), trajectory (one JSON object a line per session: steps, tool calls, results, statuses,
times, usage, outcome). Secrets are always redacted; --anonymise also replaces the project
path, home directory, user name and e-mail addresses. The README's "Exporting sessions" gives
each shape."""


def add_export_arguments(actions: argparse._SubParsersAction) -> None:
    """``sessions export``: one session by id, or every session the filters take."""
    export = actions.add_parser(
        "export",
        help="export sessions as Markdown, JSONL, ShareGPT, OpenAI fine-tuning or trajectories (secrets redacted)",
        description=_EXPORT_HELP,
    )
    export.add_argument("session_id", nargs="?", help="an id or a unique prefix of one; leave out (or --all) for every session")
    export.add_argument("--all", action="store_true", help="every session the filters below take (the default without an id)")
    export.add_argument("--format", choices=EXPORT_FORMATS, default="md", help="the output shape (default md)")
    export.add_argument("--output", "-o", metavar="FILE", help="file to write (default: stdout); written whole or not at all")
    export.add_argument("--project", metavar="PATH", help="only sessions whose working directory is this folder or inside it")
    export.add_argument("--since", metavar="YYYY-MM-DD", help="only sessions started on or after this day (local time)")
    export.add_argument("--until", metavar="YYYY-MM-DD", help="only sessions started on or before this day (local time)")
    export.add_argument(
        "--surface", action="append", choices=EXPORT_SURFACES, help="only sessions started from this surface (repeat for several)"
    )
    export.add_argument(
        "--outcome", action="append", choices=EXPORT_OUTCOMES, help="only sessions whose last turn ended this way (repeat for several)"
    )
    export.add_argument(
        "--anonymise",
        "--anonymize",
        action="store_true",
        help="replace the project path by <project>, the home directory by ~, the user name by <user>, e-mail addresses by userN@example.com",
    )


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
        if args.action == "export":
            return await _export(store, args)
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
    from core.store.history import describe

    print(f"{record.title or '(untitled)'}  {record.id}  {record.cwd}")
    for stored in messages:
        print(f"{stored.seq:>4}  {redact(describe(stored.message, 2000))}")
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


async def _export(store: SessionStore, args: argparse.Namespace) -> int:
    """``sessions export``: one session, or every session the filters take, streamed to a file or stdout."""
    from core.learning.export import Selection, export_sessions, select_sessions
    from core.learning.export_clean import Anonymiser, Cleaner, secret_free
    from core.store import history

    filters = [f"--{name}" for name in ("project", "since", "until", "surface", "outcome") if getattr(args, name)]
    if args.session_id is not None and (args.all or filters):
        print(
            f"{'--all' if args.all else ', '.join(filters)} chooses among all sessions: give a session id or filters, not both.",
            file=sys.stderr,
        )
        return 2
    days: dict[str, float | None] = {}
    for name, end in (("since", False), ("until", True)):
        try:
            days[name] = history.to_epoch(getattr(args, name), end=end)
        except ValueError:
            print(f"--{name} takes a day as YYYY-MM-DD (got {getattr(args, name)!r}).", file=sys.stderr)
            return 2
    if args.session_id is not None:
        try:
            record = await find_session(store, args.session_id)
        except IdError as exc:
            print(exc, file=sys.stderr)
            return exc.code

        async def one() -> Any:
            yield record

        records = one()
    else:
        selection = Selection(
            project=str(Path(args.project).expanduser().resolve()) if args.project else None,
            since=days["since"],
            until=days["until"],
            surfaces=frozenset(args.surface or ()),
            outcomes=frozenset(args.outcome or ()),
        )
        records = select_sessions(store, selection)
    redact("")  # loads the configuration, which registers the configured secret values for scrubbing
    cleaner = Cleaner(secret_free, Anonymiser.of_this_user() if args.anonymise else None)
    with _Output(args.output) as out:
        done = await export_sessions(store, records, args.format, out.write, cleaner=cleaner, tool_specs=_tool_specs())
        out.keep = bool(done.written) or args.session_id is None
    return _export_report(args, done)


def _export_report(args: argparse.Namespace, done: Any) -> int:
    """What the export wrote, on stderr (stdout may be the export itself); 1 when nothing was."""
    if args.session_id is not None and not done.written:
        print(f"Session {done.skipped[0]} has no model reply: nothing to export as {args.format}.", file=sys.stderr)
        return 1
    if args.output:
        print(f"Wrote {args.output}")
    if args.session_id is None:
        left_out = f" ({len(done.skipped)} left out: no model reply that {args.format} can carry)" if done.skipped else ""
        print(f"Exported {len(done.written)} session(s){left_out}.", file=sys.stderr)
        if not done.written and not done.skipped:
            print("No session matches the filters.", file=sys.stderr)
    return 0 if done.written else 1


def _tool_specs() -> dict[str, Any]:
    """Every tool's schema by name, for the formats that describe the tools a session called."""
    from toolsets import all_tools

    return {tool.name: tool.spec() for tool in all_tools()}


class _Output:
    """stdout, or a file written through a temporary one beside it (mode 0600: it holds
    conversations) and renamed over it at the end, so that a failed export leaves no half file."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path).expanduser() if path else None
        self.keep = True
        self._file: Any = None
        self._temp: str | None = None

    def __enter__(self) -> _Output:
        import tempfile

        if self.path is not None:
            folder = self.path.parent
            if self.path.is_dir():
                raise SystemExit(f"Cannot write {self.path}: it is a folder. Give a file name, such as {self.path / 'sessions.jsonl'}.")
            if not folder.is_dir():
                raise SystemExit(f"Cannot write {self.path}: the folder {folder} does not exist. Create it, or choose another --output.")
            fd, self._temp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=folder)
            self._file = open(fd, "w", encoding="utf-8")
        return self

    def write(self, text: str) -> None:
        (self._file or sys.stdout).write(text)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        import os

        if self._file is None:
            sys.stdout.flush()
            return
        self._file.close()
        assert self._temp is not None and self.path is not None
        if exc_type is None and self.keep:
            os.replace(self._temp, self.path)
        else:
            os.unlink(self._temp)
