"""``hermes-editor skills list|show|prune|approve``: see skills and their use; curate the agent's
own; keep flagged steps of a personal skill that screening would remove from prompts. The hub's
``search|install|update|remove|pin|unpin`` live in :mod:`hermes_cli.skills_hub_cmd`."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from hermes_cli.json_out import add_json_flag, emit, iso

__all__ = ["register", "run"]


def register(commands: argparse._SubParsersAction) -> None:
    skills = commands.add_parser("skills", help="list, show, install, update or prune skills")
    add_json_flag(skills)
    actions = skills.add_subparsers(dest="action", metavar="ACTION")
    listed = actions.add_parser("list", help="every skill with its source and use (the default)")
    listed.add_argument("--project", default=".", help="project folder for .agents/skills (default: here)")
    add_json_flag(listed)
    show = actions.add_parser("show", help="print one skill")
    show.add_argument("name")
    show.add_argument("--project", default=".")
    approve = actions.add_parser("approve", help="keep a personal skill's flagged steps (screening removes them from prompts)")
    approve.add_argument("name")
    approve.add_argument("--yes", action="store_true", help="approve every flagged step without asking")
    prune = actions.add_parser("prune", help="run the curator now and ask about each of its proposals (skills curate only lists them)")
    prune.add_argument("--days", type=float, default=30, help="unused for this many days (default 30)")
    prune.add_argument("--yes", action="store_true", help="accept every proposal without asking")
    from hermes_cli import skills_hub_cmd

    skills_hub_cmd.register(actions)
    from hermes_cli import curator_cmd

    curator_cmd.register(actions)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from core.learning import skills

    action = args.action or "list"
    from hermes_cli import skills_hub_cmd

    if action in skills_hub_cmd.ACTIONS:
        return skills_hub_cmd.run(args)
    from hermes_cli import curator_cmd

    if action in curator_cmd.ACTIONS:
        return curator_cmd.run(args)
    if action == "list":
        from core.learning import hub
        from core.learning.hub.install import source_summary

        usage = skills.usage()
        listed = skills.discover([Path(getattr(args, "project", ".")).resolve()])
        installed, pins = hub.records(), hub.pinned()
        sources = {s.name: source_summary(installed[s.name]) for s in listed if s.origin == "personal" and s.name in installed}
        if getattr(args, "json", False):
            return emit(
                [
                    {
                        "name": skill.name,
                        "origin": skill.origin,
                        "description": skill.description,
                        "path": str(skill.path),
                        "uses": usage.get(skill.name, {}).get("uses", 0),
                        "last_used": iso(usage.get(skill.name, {}).get("last_used") or None),
                        "created_by": usage.get(skill.name, {}).get("created_by"),
                        "installed_from": sources.get(skill.name),
                        "pinned": skill.origin == "personal" and skill.name in pins,
                    }
                    for skill in listed
                ]
            )
        for skill in listed:
            info = usage.get(skill.name, {})
            last = time.strftime("%Y-%m-%d", time.localtime(info["last_used"])) if info.get("last_used") else "never"
            author = f", by {info['created_by']}" if info.get("created_by") else ""
            print(f"{skill.name:<28} {skill.origin:<8} uses {info.get('uses', 0):<4} last {last}{author}")
            print(f"{'':29}{skill.description}")
            if skill.name in sources or (skill.origin == "personal" and skill.name in pins):
                print(f"{'':29}{_provenance(sources.get(skill.name), skill.name in pins)}")
        if not listed:
            print("No skills.")
        return 0
    if action == "show":
        found = skills.find(args.name, [Path(args.project).resolve()])
        if found is None:
            print(f"No skill named {args.name!r}.", file=sys.stderr)
            return 1
        print(skills.view(found))
        return 0
    if action == "approve":
        found = skills.find(args.name)
        if found is None or found.origin != "personal":
            print(f"No personal skill named {args.name!r} (project and bundled skills are not screened this way).", file=sys.stderr)
            return 1
        return approve_flagged([(found.path.read_text(encoding="utf-8"), str(found.path))], args.yes)
    print(f"Unknown skills action {action!r}.", file=sys.stderr)
    return 2


def _provenance(source: dict[str, Any] | None, pinned: bool) -> str:
    """One line: where an installed skill came from, at which version, and whether it is pinned."""
    if source is None:
        return "pinned"
    ref = f", ref {source['ref']}" if source["ref"] else ""
    return f"from {source['source']}{ref} at {source['version']}" + (", pinned" if pinned else "")


def approve_flagged(texts: list[tuple[str, str]], yes: bool) -> int:
    """Show each flagged passage of ``texts`` ((text, source) pairs) and remember the ones the
    user approves, so that prompts keep them; 0 when nothing is left flagged."""
    from core.learning import gate as learning_gate
    from core.learning.screening import review_learned

    accepted = learning_gate.approved()
    flags = [flag for text, source in texts for flag in review_learned(text, source, accepted)[1]]
    if not flags:
        print("Nothing is flagged: every line reaches the prompt as written.")
        return 0
    left = 0
    for flag in flags:
        print(flag.finding.describe())
        if not yes and input("  keep it in prompts? [y/N] ").strip().lower() not in ("y", "yes"):
            print("  still removed from prompts")
            left += 1
            continue
        learning_gate.remember([flag], "cli")
        print("  approved")
    return 1 if left else 0
