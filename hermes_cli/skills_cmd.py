"""``hermes-editor skills list|show|prune``: see skills and their use; curate the agent's own."""

from __future__ import annotations

import argparse
import sys
import time

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction) -> None:
    skills = commands.add_parser("skills", help="list, show or prune skills")
    actions = skills.add_subparsers(dest="action", metavar="ACTION")
    listed = actions.add_parser("list", help="every skill with its source and use (the default)")
    listed.add_argument("--project", default=".", help="project folder for .agents/skills (default: here)")
    show = actions.add_parser("show", help="print one skill")
    show.add_argument("name")
    show.add_argument("--project", default=".")
    prune = actions.add_parser("prune", help="archive unused agent-written skills, merge near-duplicates (asks first)")
    prune.add_argument("--days", type=float, default=30, help="unused for this many days (default 30)")
    prune.add_argument("--yes", action="store_true", help="accept every proposal without asking")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from core import skills

    action = args.action or "list"
    if action == "list":
        usage = skills.usage()
        found = skills.discover([Path(getattr(args, "project", ".")).resolve()])
        for skill in found:
            info = usage.get(skill.name, {})
            last = time.strftime("%Y-%m-%d", time.localtime(info["last_used"])) if info.get("last_used") else "never"
            author = f", by {info['created_by']}" if info.get("created_by") else ""
            print(f"{skill.name:<28} {skill.origin:<8} uses {info.get('uses', 0):<4} last {last}{author}")
            print(f"{'':29}{skill.description}")
        if not found:
            print("No skills.")
        return 0
    if action == "show":
        found = skills.find(args.name, [Path(args.project).resolve()])
        if found is None:
            print(f"No skill named {args.name!r}.", file=sys.stderr)
            return 1
        print(skills.view(found))
        return 0
    from core import curator

    proposals = curator.proposals(unused_days=args.days)
    if not proposals:
        print("Nothing to prune.")
        return 0
    for proposal in proposals:
        if not args.yes:
            answer = input(f"{proposal.describe()}? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print("  kept")
                continue
        print("  " + curator.apply(proposal))
    return 0
