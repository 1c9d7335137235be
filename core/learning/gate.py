"""Learning writes go through the session's policy, and flagged ones through a person.

A memory entry or a skill reaches every later session in every project, so what screening flags
in it (:func:`core.learning.screening.review_learned`: fetching and running code, sending data out,
loosening approvals) is written only after a question: refused in ``auto`` mode, where nobody is
asked, and asked in ``ask`` and ``accept-edits``. Unflagged writes need no question, except that
a policy refusing changes (read-only mode) refuses them too.

A person's yes is remembered by the passage's digest in ``learned-approvals.json`` in the state
home, so that the passage keeps its place when memory and skills are read back into a prompt;
any other flagged passage found there (written before screening, or by hand) is neutralised.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from core.config import home
from core.learning.screening import Flagged
from core.locked_json import locked_json
from core.policy.approvals import Action, ApprovalPolicy, Ruling

if TYPE_CHECKING:
    from core.tools.context import ToolContext

__all__ = ["approved", "confirm", "describe", "permit", "remember"]


def _path() -> Path:
    return home() / "learned-approvals.json"


def approved() -> frozenset[str]:
    """Digests of flagged passages a person approved."""
    try:
        data = json.loads(_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return frozenset()
    return frozenset(data) if isinstance(data, dict) else frozenset()


def remember(flags: Iterable[Flagged], who: str) -> None:
    """Record that a person approved these passages (who, when, and what was flagged)."""
    flags = list(flags)
    if not flags:
        return
    with locked_json(_path(), limit=50_000_000) as data:
        for flag in flags:
            data[flag.digest] = {"at": time.time(), "by": who, "finding": flag.finding.describe()[:300]}


def describe(flags: Iterable[Flagged]) -> str:
    """The findings, one after another, as a question or an error names them."""
    return "; ".join(flag.finding.describe() for flag in flags)


@dataclasses.dataclass(slots=True)
class _LearningPolicy(ApprovalPolicy):
    """The session's policy as it applies to a learning write: its refusals stand; flagged text asks
    every time (never "always") and is refused where nobody is asked."""

    flagged: str = ""

    def ruling(self, action: Action) -> Ruling:
        base = ApprovalPolicy.ruling(self, action)
        if base.verdict == "refuse":
            return base
        if not self.flagged:
            return Ruling("allow", "learning writes ask only when screening flags them")
        if self.mode == "auto":
            return Ruling(
                "refuse",
                f"screening flagged it ({self.flagged}) and auto mode asks nobody, so nothing was saved. "
                "Leave it out, or let the user save it in ask or accept-edits mode, where they are asked",
                False,
            )
        return Ruling("ask", f"screening flagged it: {self.flagged}", False)


def _through(ctx: ToolContext, flagged: str) -> ToolContext:
    policy = ctx.policy
    strict = _LearningPolicy(mode=policy.mode, roots=policy.roots, rules=list(policy.rules), home=policy.home, flagged=flagged)
    return dataclasses.replace(ctx, policy=strict, remember_rule=None)


async def permit(ctx: ToolContext, title: str) -> None:
    """Let an unflagged learning write go ahead unless the session's policy refuses changes."""
    await _through(ctx, "").approve_call(title)


async def confirm(ctx: ToolContext, flags: Iterable[Flagged], title: str) -> None:
    """Ask the user about flagged passages (refused in auto mode); raises ToolRejected on no."""
    await _through(ctx, describe(flags)).approve_call(title)
