"""``hermes-editor skills search|install|update|remove|pin|unpin``: skills from git repositories,
local folders and JSON indexes, screened before they are written, with where they came from
recorded (see :mod:`core.learning.hub`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hermes_cli.json_out import add_json_flag, emit

__all__ = ["ACTIONS", "register", "run"]

ACTIONS = ("search", "install", "update", "remove", "pin", "unpin")


def register(actions: argparse._SubParsersAction) -> None:
    """Add the hub's actions to ``hermes-editor skills``."""
    search = actions.add_parser(
        "search", help="look through the configured sources' skills (names and descriptions)", description=_SOURCES_HELP
    )
    search.add_argument("query", nargs="*", help="words every match holds (none: list everything)")
    search.add_argument("--source", help="only this [skills.sources.NAME]")
    add_json_flag(search)
    install = actions.add_parser(
        "install",
        help="fetch a skill, screen every file, and install it into your skills",
        description="Install a skill by NAME (offered by a configured source) or from a source given here: a git URL "
        "(URL@ref), owner/repo[/sub/path][@ref] on the configured forge (default GitHub), or a local folder. Every file is "
        "screened first; a refusal names the file and line and writes nothing. " + _SOURCES_HELP,
    )
    install.add_argument("target", metavar="NAME|SOURCE")
    install.add_argument("--source", help="take NAME from this [skills.sources.NAME]")
    install.add_argument("--ref", help="git branch, tag or full commit (instead of @ref)")
    install.add_argument("--subpath", help="the folder inside the repository or folder that holds the skill(s)")
    install.add_argument(
        "--skill", action="append", default=[], metavar="NAME", help="which skill of a source holding several (repeatable)"
    )
    install.add_argument("--all", action="store_true", help="every skill the source holds")
    install.add_argument("--as", dest="as_name", metavar="NAME", help="install under another name (when the name is taken)")
    install.add_argument("--project", default=".", help="project whose .agents/skills names are taken too (default: here)")
    update = actions.add_parser(
        "update",
        help="fetch an installed skill's source again, show the diff, apply on yes",
        description="Fetch the source of an installed skill again, screen it, and show a unified diff of each file that "
        "would change; nothing changes without your yes. Pinned skills are refused; a skill edited here since it was "
        "installed is not replaced without --force. The replaced copy moves to skills/.archive/.",
    )
    update.add_argument("name", nargs="?")
    update.add_argument("--all", action="store_true", help="every installed skill that is not pinned")
    update.add_argument("--yes", action="store_true", help="apply without asking (for scripts)")
    update.add_argument("--force", action="store_true", help="replace local edits too (they move to the archive)")
    remove = actions.add_parser("remove", help="archive a personal skill and forget where it came from")
    remove.add_argument("name")
    remove.add_argument("--project", default=".")
    pin = actions.add_parser("pin", help="keep a personal skill as it is: update refuses it and the curator leaves it alone")
    pin.add_argument("name")
    unpin = actions.add_parser("unpin", help="let update and the curator change a pinned skill again")
    unpin.add_argument("name")


_SOURCES_HELP = (
    'Sources are configured in config.toml as [skills.sources.NAME] with git = "owner/repo" or a URL (and optional '
    'subpath and ref), folder = "/path", or index = "https://.../index.json".'
)


def run(args: argparse.Namespace) -> int:
    from core.config import ConfigError
    from core.learning.hub import HubError

    try:
        return _ACTIONS[args.action](args)
    except (HubError, ConfigError) as exc:
        print(f"hermes-editor skills {args.action}: {exc}", file=sys.stderr)
        return 1


def _settings() -> Any:
    from core.config import load_config

    return load_config().skills


def _search(args: argparse.Namespace) -> int:
    from core.learning.hub.install import search

    found, problems = search(_settings(), " ".join(args.query), args.source)
    for problem in problems:
        print(f"warning: could not read source {problem}", file=sys.stderr)
    if getattr(args, "json", False):
        return emit(
            [{"name": c.name, "description": c.description, "source": c.via.name or c.via.label(), "from": c.origin.label()} for c in found]
        )
    for candidate in found:
        print(f"{candidate.name:<28} {candidate.via.name or candidate.via.label()}")
        print(f"{'':29}{candidate.description}")
    if not found:
        print("No skills match." if args.query else "The sources hold no skills.")
    return 0 if found or not problems else 1


def _install(args: argparse.Namespace) -> int:
    from pathlib import Path

    from core.learning.hub.install import install

    done = install(
        _settings(),
        args.target,
        only=args.source,
        ref=args.ref,
        subpath=args.subpath,
        pick=tuple(args.skill),
        every=args.all,
        as_name=args.as_name,
        projects=(Path(args.project).resolve(),),
    )
    for skill in done:
        print(f"Installed {skill.name} from {skill.source} at {skill.version.removeprefix('sha256:')[:12]} into {skill.folder}")
    return 0


def _update(args: argparse.Namespace) -> int:
    from core.learning import hub

    if args.all == bool(args.name):
        print("hermes-editor skills update: name one installed skill, or give --all", file=sys.stderr)
        return 2
    names = sorted(hub.records()) if args.all else [args.name]
    if args.all and not names:
        print("No skills were installed from a source.")
        return 0
    status = 0
    for name in names:
        if args.all and hub.is_pinned(name):
            print(f"{name}: pinned, skipped (hermes-editor skills unpin {name} to update it)")
            continue
        try:
            status = max(status, _update_one(name, args))
        except hub.HubError as exc:
            if not args.all:
                raise
            print(f"{name}: {exc}", file=sys.stderr)
            status = 1
    return status


def _update_one(name: str, args: argparse.Namespace) -> int:
    from core.learning.hub.install import apply_update, edited_message, plan_update, record_version

    plan = plan_update(_settings(), name)
    if not plan.changed:
        if plan.version != (plan.record.get("commit") or plan.record.get("content_hash")):
            record_version(name, plan.version)
        print(f"{name}: up to date ({plan.version.removeprefix('sha256:')[:12]})")
        return 0
    print(f"{name}: {plan.origin.label()} at {plan.version.removeprefix('sha256:')[:12]} would change:")
    sys.stdout.write(plan.diff)
    if plan.edited and not args.force:
        print(f"{name}: {edited_message(plan)}.", file=sys.stderr)
        return 1
    if not args.yes and not _confirm(f"Apply this update to {name}? [y/N] "):
        print(f"{name}: not updated")
        return 0
    archived = apply_update(plan, force=args.force)
    kept = f" (the previous copy is in {archived})" if archived else ""
    print(f"{name}: updated to {plan.version.removeprefix('sha256:')[:12]}{kept}")
    return 0


def _confirm(question: str) -> bool:
    try:
        return input(question).strip().lower() in ("y", "yes")
    except EOFError:
        print()
        return False


def _remove(args: argparse.Namespace) -> int:
    from pathlib import Path

    from core.learning.hub.install import remove

    archived = remove(args.name, (Path(args.project).resolve(),))
    print(f"Removed {args.name}: archived to {archived} (move it back to restore it)")
    return 0


def _pin(args: argparse.Namespace) -> int:
    from core.learning import hub

    hub.pin(args.name)
    found = hub.record(args.name)
    at = f" at {(found.get('commit') or found.get('content_hash') or '').removeprefix('sha256:')[:12]}" if found else ""
    print(f"Pinned {args.name}{at}: skills update refuses it and the curator leaves it alone.")
    return 0


def _unpin(args: argparse.Namespace) -> int:
    from core.learning import hub

    if not hub.unpin(args.name):
        print(f"{args.name} was not pinned.")
        return 0
    print(f"Unpinned {args.name}.")
    return 0


_ACTIONS = {"search": _search, "install": _install, "update": _update, "remove": _remove, "pin": _pin, "unpin": _unpin}
