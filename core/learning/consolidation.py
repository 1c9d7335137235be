"""Memory consolidation: a shorter rewrite of a memory file that keeps sitting near its budget.

Without a model the rewrite is deterministic and loses no word: an entry whose words (case and
punctuation set aside) all appear in another entry is merged into that fuller one, in the order
they first appeared. Entries that differ in a single word ("project 3" and "project 4") are
different facts and both kept; rewording is left to a model. With a model the model rewrites the file; its
answer is used only when it is a non-empty list, shorter than the file, holds no credential and
passes screening as any memory entry must. Nothing is written here: the curator stores the
rewrite as a proposal, and applying it keeps the old file as a backup.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from core.learning.memory import FILES, parse_entries, render_entries
from core.learning.screening import looks_secret, review_learned

if TYPE_CHECKING:
    from core.models import Model

__all__ = ["dedupe", "model_rewrite", "usable_rewrite"]

_SYSTEM = (
    "You consolidate the memory file of an AI coding agent: one Markdown list item per entry. Merge entries that "
    "say the same thing, drop repeats and stale duplicates, and shorten wording, but keep every distinct fact. "
    "Answer with the new file only: Markdown list items, each starting with '- ', nothing else."
)


def _words(entry: str) -> frozenset[str]:
    return frozenset(re.sub(r"[^\w\s]", " ", entry.lower()).split())


def dedupe(entries: list[str]) -> list[str]:
    """``entries`` with each one whose words another holds merged into that fuller one, first appearance first."""
    kept: list[str] = []
    for entry in entries:
        mine = _words(entry)
        for i, other in enumerate(kept):
            theirs = _words(other)
            if mine <= theirs or theirs <= mine:
                if len(mine) > len(theirs) or (mine == theirs and len(entry) > len(other)):
                    kept[i] = entry
                break
        else:
            kept.append(entry)
    return kept


def usable_rewrite(kind: str, old: str, new: str) -> str | None:
    """``new`` as a memory file when it may replace ``old``; None when it is empty, not shorter,
    holds a credential or is flagged by screening (passages the user approved before pass)."""
    entries = parse_entries(new)
    text = render_entries(entries)
    if not entries or len(text) >= len(render_entries(parse_entries(old))) or looks_secret(text):
        return None
    from core.learning.gate import approved

    findings, flags = review_learned(text, f"{FILES[kind]} rewrite", approved())
    return None if findings or flags else text


async def model_rewrite(model: Model, kind: str, text: str, budget: int) -> str:
    """``model``'s consolidation of a memory file (raw; check it with :func:`usable_rewrite`)."""
    from core.messages import UserMessage
    from core.models import ModelRequest, ResponseDone
    from core.redaction import scrub

    goal = int(budget * 0.6)
    prompt = f"The file {FILES[kind]} ({len(text)} of {budget} characters; aim for at most {goal}):\n\n{text}"
    request = ModelRequest(system=_SYSTEM, messages=[UserMessage.of(scrub(prompt))], max_tokens=2048)
    async for event in model.stream(request):
        if isinstance(event, ResponseDone):
            return event.message.text
    raise ValueError("the model's answer ended early")
