"""``hermes-editor memory show|log|revert|approve``: what the agent remembers, who changed it,
undo, and keeping lines that screening would remove from prompts."""

from __future__ import annotations

import argparse
import sys
import time

from hermes_cli.json_out import add_json_flag, emit, iso

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction) -> None:
    memory = commands.add_parser("memory", help="show memory, its change log, or revert a change")
    actions = memory.add_subparsers(dest="action", metavar="ACTION")
    add_json_flag(memory)
    show = actions.add_parser("show", help="both memory files with their budgets (the default)")
    add_json_flag(show)
    log = actions.add_parser("log", help="every change: id, when, who, before and after")
    log.add_argument("--limit", type=int, default=30)
    add_json_flag(log)
    revert = actions.add_parser("revert", help="undo one change by its id (from 'memory log')")
    revert.add_argument("id", help="an id from 'memory log', or a unique prefix of one")
    approve = actions.add_parser("approve", help="keep flagged lines you wrote yourself (screening removes them from prompts)")
    approve.add_argument("--yes", action="store_true", help="approve every flagged line without asking")


def run(args: argparse.Namespace) -> int:
    from core.learning import memory
    from core.learning.context import current_settings

    action = args.action or "show"
    if action == "show":
        settings = current_settings()
        if args.json:
            rows = []
            for kind in memory.FILES:
                path = memory.memory_path(kind)
                text = path.read_text(encoding="utf-8") if path.is_file() else ""
                rows.append(
                    {
                        "kind": kind,
                        "file": memory.FILES[kind],
                        "label": memory.LABELS[kind],
                        "path": str(path),
                        "characters": len(text),
                        "budget": memory.budget_for(kind, settings),
                        "text": text,
                    }
                )
            return emit(rows)
        for kind in memory.FILES:
            path = memory.memory_path(kind)
            text = path.read_text(encoding="utf-8") if path.is_file() else ""
            print(f"# {memory.LABELS[kind]}  {len(text)}/{memory.budget_for(kind, settings)} characters  {path}")
            print(text.rstrip() or "(empty)")
            print()
        return 0
    if action == "log":
        if args.json:
            return emit(
                [
                    {
                        "id": entry.id,
                        "at": iso(entry.at),
                        "who": entry.who,
                        "action": entry.action,
                        "kind": entry.kind,
                        "file": memory.FILES[entry.kind],
                        "before": entry.before,
                        "after": entry.after,
                    }
                    for entry in memory.journal()[-max(1, args.limit) :]
                ]
            )
        for entry in memory.journal()[-max(1, args.limit) :]:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.at))
            print(f"{entry.id}  {when}  {entry.who:<16} {entry.action:<7} {memory.FILES[entry.kind]}")
            if entry.before is not None:
                print(f"    - {entry.before}")
            if entry.after is not None:
                print(f"    + {entry.after}")
        return 0
    if action == "approve":
        from hermes_cli.skills_cmd import approve_flagged

        texts = []
        for kind in memory.FILES:
            path = memory.memory_path(kind)
            texts.append((path.read_text(encoding="utf-8") if path.is_file() else "", str(path)))
        return approve_flagged(texts, args.yes)
    from hermes_cli.ids import IdError, resolve

    entries = [(entry.id, f"{entry.who} {entry.action} {memory.FILES[entry.kind]}") for entry in memory.journal()]
    try:
        change = memory.revert(resolve(args.id, entries, what="memory change", listing="memory log"))
    except IdError as exc:
        print(str(exc), file=sys.stderr)
        return exc.code
    except memory.MemoryError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(f"Reverted: {change.action} in {memory.FILES[change.kind]} ({change.used}/{change.budget} characters).")
    return 0
