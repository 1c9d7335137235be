"""The skill curator: scores agent-written skills and proposes archiving and merging them.

A skill earns its place by use (how often it was loaded), recency (days since its last use, or
since it was written) and overlap (how alike its name and description are to another's). Only
personal skills the agent wrote are considered; bundled, project, installed, hand-written and
pinned skills are never proposed. With a model (``[curator] model``) the model judges the same
scores and the skills' texts; without one, or when its answer cannot be used, the heuristics
decide: unused for ``unused_days``, or ``similarity`` alike.

It only proposes. Proposals are stored (:mod:`core.learning.proposals`) and act only when the
user applies one; nothing is deleted: archived skills move to ``skills/.archive/``.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any, Literal

from core.learning import skills

if TYPE_CHECKING:
    from core.models import Model

__all__ = [
    "Proposal",
    "SkillScore",
    "carry_out",
    "eligible",
    "heuristic_proposals",
    "is_pinned",
    "model_proposals",
    "score_skills",
]

Action = Literal["archive", "merge", "consolidate"]
# A skill idle past unused_days is proposed for archiving while its value (0.4 x use, saturating at
# 20 uses, + 0.6 x recency, e^(-idle/unused_days)) is below this: never used, 30 days idle, 0.22;
# 3 uses, 30 days, 0.41 (kept), 60 days, 0.26.
ARCHIVE_BELOW = 0.35
_EXCERPT = 600  # characters of each skill's text the model sees
MODEL_SKILLS = 40
_SKILLS_SYSTEM = (
    "You curate the skills an AI coding agent wrote for itself. Each skill comes with its use count, days since "
    "its last use, its closest other skill and how alike they are, a value from use and recency (0 to 1, low is "
    "stale), and the start of its text. Propose archiving a "
    "skill only when it is stale or useless, and merging two only when they teach the same thing. Propose nothing "
    "when the skills are fine. Answer with JSON only, in this form: "
    '{"archive": [{"name": "...", "reason": "..."}], "merge": [{"name": "<folded>", "into": "<kept>", "reason": "..."}]}. '
    "Reasons are one short sentence. Use only the names given."
)


@dataclass(frozen=True, slots=True)
class Proposal:
    """One change the curator would make: archive a skill, merge one into another, or rewrite a
    memory file (``name`` is ``memory`` or ``user``, ``text`` the shorter file)."""

    action: Action
    name: str
    into: str | None
    reason: str
    text: str | None = None
    source: str = "heuristics"  # or "model": who judged it

    def describe(self) -> str:
        if self.action == "merge":
            return f"merge {self.name} into {self.into} ({self.reason})"
        if self.action == "consolidate":
            from core.learning.memory import FILES

            return f"consolidate {FILES.get(self.name, self.name)} ({self.reason})"
        return f"archive {self.name} ({self.reason})"


@dataclass(frozen=True, slots=True)
class SkillScore:
    """What the curator knows of one agent-written skill."""

    name: str
    description: str
    uses: int
    idle_days: float  # since its last use, or since it was written when never used
    overlap: float  # how alike it is to its closest other skill (0..1)
    closest: str | None
    value: float  # use and recency together (0..1): low is a candidate for archiving


def is_pinned(name: str) -> bool:
    """Whether the user pinned ``name`` (``skills pin``): the curator leaves a pinned skill alone."""
    from core.learning.hub import is_pinned as pinned

    return pinned(name)


def eligible() -> list[skills.Skill]:
    """The skills the curator may propose changes to: personal, written by the agent, not pinned."""
    usage = skills.usage()
    return [
        s
        for s in skills.discover()
        if s.origin == "personal" and usage.get(s.name, {}).get("created_by") == "agent" and not is_pinned(s.name)
    ]


def _similar(a: skills.Skill | SkillScore, b: skills.Skill | SkillScore) -> float:
    return SequenceMatcher(None, f"{a.name} {a.description}".lower(), f"{b.name} {b.description}".lower()).ratio()


def score_skills(candidates: list[skills.Skill], *, unused_days: float = 30, now: float | None = None) -> list[SkillScore]:
    """Scores of ``candidates`` (from :func:`eligible`), in their order."""
    now = time.time() if now is None else now
    usage = skills.usage()
    out = []
    for skill in candidates:
        info = usage.get(skill.name, {})
        uses = int(info.get("uses", 0) or 0)
        last = float(info.get("last_used") or info.get("created_at") or 0)
        idle = max(0.0, (now - last) / 86400)
        others = [(_similar(skill, other), other.name) for other in candidates if other.name != skill.name]
        overlap, closest = max(others, default=(0.0, None))
        value = 0.4 * min(1.0, math.log1p(uses) / math.log1p(20)) + 0.6 * math.exp(-idle / unused_days)
        out.append(SkillScore(skill.name, skill.description, uses, idle, overlap, closest, round(value, 3)))
    return out


def heuristic_proposals(scores: list[SkillScore], *, unused_days: float = 30, similarity: float = 0.8) -> list[Proposal]:
    """Merges of skills at least ``similarity`` alike (the one used less, then idle longer, is folded
    into the other; no chains), then archives of skills unused for ``unused_days`` whose value is
    below ``ARCHIVE_BELOW`` (a skill used often gets longer before it counts as stale)."""
    out: list[Proposal] = []
    touched: set[str] = set()  # folded or kept: in one proposal at most
    for i, a in enumerate(scores):
        for b in scores[i + 1 :]:
            alike = _similar(a, b)
            if a.name in touched or b.name in touched or alike < similarity:
                continue
            keep, fold = (a, b) if (a.uses, -int(a.idle_days)) >= (b.uses, -int(b.idle_days)) else (b, a)
            touched |= {a.name, b.name}
            out.append(Proposal("merge", fold.name, keep.name, f"{alike:.0%} similar"))
    for score in sorted(scores, key=lambda s: s.value):
        if score.name not in touched and score.idle_days > unused_days and score.value < ARCHIVE_BELOW:
            what = "never used since it was written" if score.uses == 0 else f"{score.uses} uses before"
            out.append(Proposal("archive", score.name, None, f"agent-written, unused for {int(score.idle_days)} days ({what})"))
    return out


async def model_proposals(model: Model, candidates: list[skills.Skill], scores: list[SkillScore]) -> list[Proposal]:
    """What ``model`` proposes for ``candidates``; names it invents, or that it was not shown, are
    dropped. It is shown the ``MODEL_SKILLS`` likeliest to go (lowest value, most overlap), so that
    a cheap model's window holds them. Raises ValueError when its answer is not the JSON asked for
    (the caller falls back)."""
    from core.messages import UserMessage
    from core.models import ModelRequest, ResponseDone
    from core.redaction import scrub

    scores = sorted(scores, key=lambda s: s.value - s.overlap)[:MODEL_SKILLS]
    by_name = {s.name: s for s in candidates}
    texts = {s.name: skills.parse_front_matter(skills.read_text(by_name[s.name]))[1].strip()[:_EXCERPT] for s in scores}
    listing = [
        {
            "name": s.name,
            "description": s.description,
            "uses": s.uses,
            "idle_days": int(s.idle_days),
            "closest": s.closest,
            "alike": round(s.overlap, 2),
            "value": s.value,
            "text": texts[s.name],
        }
        for s in scores
    ]
    request = ModelRequest(
        system=_SKILLS_SYSTEM, messages=[UserMessage.of(scrub(json.dumps(listing, ensure_ascii=False)))], max_tokens=1024
    )
    done = None
    async for event in model.stream(request):
        if isinstance(event, ResponseDone):
            done = event
    if done is None:
        raise ValueError("the model's answer ended early")
    return _read_answer(done.message.text, {s.name for s in scores})


def _read_answer(text: str, names: set[str]) -> list[Proposal]:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("the model did not answer with JSON")
    try:
        data: Any = json.loads(text[start : end + 1])
    except ValueError:
        raise ValueError("the model's JSON could not be read") from None
    if not isinstance(data, dict):
        raise ValueError("the model's JSON is not an object")
    out: list[Proposal] = []
    used: set[str] = set()
    for item in _items(data.get("merge")):
        name, into = str(item.get("name", "")), str(item.get("into", ""))
        if name in names and into in names and name != into and not {name, into} & used:
            used |= {name}
            out.append(Proposal("merge", name, into, _reason(item, "the model found them alike"), source="model"))
    for item in _items(data.get("archive")):
        name = str(item.get("name", ""))
        if name in names and name not in used and name not in {p.into for p in out}:
            used.add(name)
            out.append(Proposal("archive", name, None, _reason(item, "the model judged it stale"), source="model"))
    return out


def _items(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _reason(item: dict[str, Any], default: str) -> str:
    reason = " ".join(str(item.get("reason") or "").split())[:200]
    return reason or default


def carry_out(proposal: Proposal) -> str:
    """Archive or merge skills as ``proposal`` says (checked by the caller); returns what was done."""
    if proposal.action == "archive":
        found = skills.find(proposal.name)  # only a name discovery finds: no path in it
        if found is None or found.origin != "personal":
            raise skills.SkillError(f"cannot archive: {proposal.name} is no longer a personal skill")
        target = skills.archive_skill(found.name, agent_only=False)
        return f"archived {found.name} to {target}"
    fold = skills.find(proposal.name)
    keep = skills.find(proposal.into or "")
    if fold is None or keep is None or fold.origin != "personal" or keep.origin != "personal":
        raise skills.SkillError(f"cannot merge: {proposal.name} or {proposal.into} is no longer a personal skill")
    _, body = skills.parse_front_matter(fold.path.read_text(encoding="utf-8"))
    with open(keep.path, "a", encoding="utf-8") as handle:
        handle.write(f"\n\n## Merged from {fold.name}\n\n{body.strip()}\n")
    target = skills.archive_skill(fold.name, agent_only=False)
    return f"merged {fold.name} into {keep.name} (original archived to {target})"
