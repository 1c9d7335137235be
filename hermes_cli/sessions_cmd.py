"""``hermes-editor sessions list|search|show|export``: read the stored history from a terminal."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from hermes_cli.redact import redact

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``sessions`` subcommand (bare ``sessions`` lists, as before)."""
    sessions = commands.add_parser("sessions", help="list, search, show or export sessions")
    sessions.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    actions = sessions.add_subparsers(dest="action", metavar="ACTION")
    listed = actions.add_parser("list", help="recent sessions (the default)")
    listed.add_argument("--limit", type=int, default=20)
    search = actions.add_parser("search", help='search messages: words, "phrases", prefix*')
    search.add_argument("query", nargs="+")
    search.add_argument("--project", help="only sessions under this folder")
    search.add_argument("--since", help="YYYY-MM-DD")
    search.add_argument("--until", help="YYYY-MM-DD")
    search.add_argument("--role", choices=["user", "assistant", "tool_result", "summary"])
    search.add_argument("--limit", type=int, default=10)
    show = actions.add_parser("show", help="print a session's messages")
    show.add_argument("session_id", help="an id or a unique prefix of one")
    export = actions.add_parser("export", help="export a session as Markdown or JSONL (secrets redacted)")
    export.add_argument("session_id")
    export.add_argument("--format", choices=["md", "jsonl"], default="md")
    export.add_argument("--output", "-o", help="file to write (default: stdout)")


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from core.config import home
    from core.store import SessionStore

    path = home() / "state.db"
    if not path.exists():
        print("No sessions yet. Start one from your editor (hermes-acp), or try 'hermes-editor demo'.")
        return 0 if args.action in (None, "list") else 1
    async with SessionStore.open(path) as store:
        if args.action == "search":
            return await _search(store, args)
        record = await _find(store, args.session_id)
        if record is None:
            print(f"No session matches {args.session_id!r}.", file=sys.stderr)
            return 1
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


async def _find(store, prefix: str):
    record = await store.get_session(prefix)
    if record is not None:
        return record
    matches = [r for r in await store.list_sessions(limit=100_000) if r.id.startswith(prefix)]
    return matches[0] if len(matches) == 1 else None


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
    if not hits:
        print("No matches.")
        return 1
    for hit in hits:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(hit.created_at))
        print(f"{hit.session_id}  {when}  {hit.title or '(untitled)'}  #{hit.seq}")
        print(f"    {hit.role}: {redact(hit.snippet)}")
    return 0


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
