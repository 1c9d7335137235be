"""The skill curator: proposes archiving unused agent-written skills and merging near-duplicates.

It only proposes; :func:`apply` acts on one proposal once the user said yes. Nothing is deleted:
archived skills move to ``skills/.archive/``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

from core.learning import skills

__all__ = ["Proposal", "apply", "proposals"]


@dataclass(frozen=True, slots=True)
class Proposal:
    action: Literal["archive", "merge"]
    name: str
    into: str | None
    reason: str

    def describe(self) -> str:
        if self.action == "merge":
            return f"merge {self.name} into {self.into} ({self.reason})"
        return f"archive {self.name} ({self.reason})"


def _similar(a: skills.Skill, b: skills.Skill) -> float:
    return SequenceMatcher(None, f"{a.name} {a.description}".lower(), f"{b.name} {b.description}".lower()).ratio()


def proposals(*, unused_days: float = 30, similarity: float = 0.8, now: float | None = None) -> list[Proposal]:
    """What the curator would change among personal skills, most useful first."""
    now = time.time() if now is None else now
    usage = skills.usage()
    personal = [s for s in skills.discover() if s.origin == "personal"]
    out: list[Proposal] = []
    merged: set[str] = set()
    for i, a in enumerate(personal):
        for b in personal[i + 1 :]:
            if a.name in merged or b.name in merged or _similar(a, b) < similarity:
                continue
            # Keep the one used more; fold the other into it.
            keep, fold = (a, b) if usage.get(a.name, {}).get("uses", 0) >= usage.get(b.name, {}).get("uses", 0) else (b, a)
            merged.add(fold.name)
            out.append(Proposal("merge", fold.name, keep.name, f"{_similar(a, b):.0%} similar"))
    for skill in personal:
        info = usage.get(skill.name, {})
        if skill.name in merged or info.get("created_by") != "agent":
            continue
        last = info.get("last_used") or info.get("created_at") or 0
        if now - last > unused_days * 86400:
            days = int((now - last) / 86400)
            out.append(Proposal("archive", skill.name, None, f"agent-written, unused for {days} days"))
    return out


def apply(proposal: Proposal) -> str:
    """Carry out one accepted proposal; returns what was done."""
    if proposal.action == "archive":
        target = skills.archive_skill(proposal.name, agent_only=False)
        return f"archived {proposal.name} to {target}"
    fold = skills.find(proposal.name)
    keep = skills.find(proposal.into or "")
    if fold is None or keep is None:
        raise skills.SkillError(f"cannot merge: {proposal.name} or {proposal.into} is gone")
    _, body = skills.parse_front_matter(fold.path.read_text(encoding="utf-8"))
    with open(keep.path, "a", encoding="utf-8") as handle:
        handle.write(f"\n\n## Merged from {fold.name}\n\n{body.strip()}\n")
    target = skills.archive_skill(fold.name, agent_only=False)
    return f"merged {fold.name} into {keep.name} (original archived to {target})"
