"""``hermes-editor skills curate|proposals|apply-proposal|reject-proposal|prune``: the curator.

The curator proposes archiving and merging the agent's own skills and consolidating a memory file
that stays near its budget; it runs as a scheduled job in ``hermes-gateway`` (``[curator] enabled``)
or now, with ``skills curate``. Its proposals are stored; only ``apply-proposal`` acts, and only
when what it would change is as the curator saw it. ``prune`` runs the curator now and asks about
each proposal in turn.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from hermes_cli.json_out import add_json_flag, emit, iso

__all__ = ["ACTIONS", "register", "run"]

ACTIONS = ("curate", "proposals", "apply-proposal", "reject-proposal", "prune")


def register(actions: argparse._SubParsersAction) -> None:
    """Add the curator's subcommands (``prune`` is registered with the skills' own)."""
    curate = actions.add_parser("curate", help="run the curator now: store and print its proposals (nothing is changed)")
    add_json_flag(curate, help="print the stored proposals as one JSON array")
    listed = actions.add_parser("proposals", help="the curator's pending proposals, with their ids")
    listed.add_argument("--all", action="store_true", help="decided ones too (applied, rejected, stale, superseded)")
    add_json_flag(listed)
    apply = actions.add_parser("apply-proposal", help="carry out one proposal (refused when what it changes changed since)")
    apply.add_argument("id", help="a proposal id from 'skills proposals', or a unique prefix of one")
    reject = actions.add_parser("reject-proposal", help="drop one proposal (not proposed again while nothing changes)")
    reject.add_argument("id", help="a proposal id from 'skills proposals', or a unique prefix of one")


def run(args: argparse.Namespace) -> int:
    from core.config import ConfigError

    try:
        if args.action == "proposals":
            return _list(all_=args.all, as_json=args.json)
        if args.action in ("apply-proposal", "reject-proposal"):
            return _decide(args.action, args.id)
        if args.action == "curate":
            return _curate(as_json=args.json)
        return _prune(args.days, args.yes)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2


def _run_curator(unused_days: float | None = None) -> Any:
    from core.config import load_config
    from core.learning.curator_job import curate

    return asyncio.run(curate(load_config(), unused_days=unused_days))


def _curate(*, as_json: bool) -> int:
    from core.learning.curator_job import report_text

    found = _run_curator()
    if as_json:
        return emit([_row(p) for p in found.proposals])
    print(report_text(found))
    return 0


def _prune(days: float, yes: bool) -> int:
    """Run the curator now and ask about each proposal; a "no" leaves it pending."""
    from core.learning.proposals import ProposalError, apply

    found = _run_curator(unused_days=days)
    if not found.proposals:
        print("Nothing to prune.")
        return 0
    failed = 0
    for proposal in found.proposals:
        if not yes:
            answer = input(f"{proposal.describe()}? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print(f"  kept (proposal {proposal.id} stays pending)")
                continue
        try:
            print("  " + apply(proposal.id))
        except ProposalError as exc:
            print(f"  {exc}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _list(*, all_: bool, as_json: bool) -> int:
    from core.learning.proposals import listing

    found = listing(None if all_ else "pending")
    if as_json:
        return emit([_row(p) for p in found])
    if not found:
        print("No pending proposals." if not all_ else "No proposals.")
        return 0
    for p in found:
        state = "" if p.status == "pending" else f"  [{p.status}]"
        print(f"{p.id}  {p.describe()}  ({p.source}){state}")
        if p.action == "consolidate" and p.text and p.status == "pending":
            print("    " + p.text.rstrip("\n").replace("\n", "\n    "))
    if not all_:
        print("Apply one: hermes-editor skills apply-proposal ID · drop one: hermes-editor skills reject-proposal ID")
    return 0


def _decide(action: str, ref: str) -> int:
    from core.learning.proposals import ProposalError, apply, listing, reject
    from hermes_cli.ids import IdError, resolve

    try:
        proposal_id = resolve(ref, [(p.id, p.describe()) for p in listing(None)], what="proposal", listing="skills proposals")
    except IdError as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        if action == "apply-proposal":
            print(apply(proposal_id))
        else:
            print(f"Rejected {proposal_id}: {reject(proposal_id).describe()}; it is not proposed again while nothing changes.")
    except ProposalError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


def _row(p: Any) -> dict[str, Any]:
    """A proposal in ``--json`` listings."""
    return {
        "id": p.id,
        "action": p.action,
        "name": p.name,
        "into": p.into,
        "reason": p.reason,
        "source": p.source,
        "status": p.status,
        "created_at": iso(p.created_at),
        "decided_at": iso(p.decided_at),
        "text": p.text,
        "result": p.result,
    }
