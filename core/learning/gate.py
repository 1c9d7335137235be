"""What a person approved of flagged learning writes.

A memory entry or a skill reaches every later session in every project, so what screening flags
in it (:func:`core.learning.screening.review_learned`: fetching and running code, sending data out,
loosening approvals) is written only after a question, which the tools ask through
``ToolContext.require_write`` (the policy's ``learning_ruling``: refused in ``auto`` mode, where
nobody is asked, and asked in ``ask`` and ``accept-edits``; read-only mode refuses every write).

A person's yes is remembered by the passage's digest in ``learned-approvals.json`` in the state
home, so that the passage keeps its place when memory and skills are read back into a prompt;
any other flagged passage found there (written before screening, or by hand) is neutralised.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path

from core.config import home
from core.learning.screening import Flagged
from core.locked_json import locked_json

__all__ = ["approved", "describe", "remember"]


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
