"""The curator as a scheduled job: one run scores the agent's skills, watches the memory files'
budgets, stores what it proposes and reports it like any cron result.

The job is built in (kind ``curator``): the scheduler runs :func:`run_builtin`, not an agent
turn. :func:`sync_job` makes the store's job match ``[curator]`` (made when enabled, its schedule
and chat kept up to date, removed when disabled); the gateway calls it when its scheduler starts.
``hermes-editor skills curate`` runs :func:`curate` on the spot.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.learning import curator
from core.learning.proposals import StoredProposal, note_level, record

if TYPE_CHECKING:
    from core.config import Config
    from core.models import Model
    from core.store.jobs import JobRecord, JobStore

__all__ = ["CURATOR", "CuratorRun", "curate", "report_text", "run_builtin", "sync_job"]

CURATOR = "curator"
PROMPT = "built-in: score the agent's skills and memory, and propose archives, merges and consolidations"
log = logging.getLogger(__name__)


@dataclass(slots=True)
class CuratorRun:
    """What one run found: the proposals now pending from it, and notes for the user."""

    proposals: list[StoredProposal] = field(default_factory=list)
    scores: list[curator.SkillScore] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def cheap_model(config: Config) -> Model | None:
    """``[curator] model`` without fallbacks; None when unset (the heuristics decide)."""
    spec = config.curator.model
    if not spec:
        return None
    from core.models import build_model

    return build_model(config.model_copy(update={"model": spec, "fallback_models": []}))


async def curate(config: Config, *, unused_days: float | None = None, run_id: str | None = None) -> CuratorRun:
    """One curator run: propose, store, and say what was proposed. Changes nothing else."""
    from core.config import ConfigError

    run = CuratorRun()
    days = config.curator.unused_days if unused_days is None else unused_days
    try:
        model = cheap_model(config)
    except ConfigError as exc:
        model = None
        run.notes.append(f"[curator] model is not usable ({exc}); the heuristics decided")
    try:
        found = await _skill_proposals(config, model, days, run)
        found += await _memory_proposals(config, model, run)
    finally:
        if model is not None:
            await model.aclose()
    run.proposals = await asyncio.to_thread(record, found, run_id=run_id)
    return run


async def _skill_proposals(config: Config, model: Model | None, days: float, run: CuratorRun) -> list[curator.Proposal]:
    candidates = await asyncio.to_thread(curator.eligible)
    run.scores = curator.score_skills(candidates, unused_days=days)
    if model is not None and candidates:
        try:
            return await curator.model_proposals(model, candidates, run.scores)
        except Exception as exc:  # a model failure must not stop the run: the heuristics stand in
            log.warning("curator model failed: %s", exc)
            run.notes.append(f"the model's answer could not be used ({type(exc).__name__}: {exc}); the heuristics decided")
    return curator.heuristic_proposals(run.scores, unused_days=days, similarity=config.curator.similarity)


async def _memory_proposals(config: Config, model: Model | None, run: CuratorRun) -> list[curator.Proposal]:
    """A consolidation for each memory file at ``[curator] memory_full`` of its budget on this run
    and the one before."""
    from core.learning.consolidation import dedupe, model_rewrite, usable_rewrite
    from core.learning.memory import FILES, budget_for, memory_path, parse_entries, render_entries

    out = []
    for kind, file in FILES.items():
        try:
            raw = memory_path(kind).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raw = ""
        budget = budget_for(kind, config.learning)
        levels = await asyncio.to_thread(note_level, kind, len(raw) / budget)
        threshold = config.curator.memory_full
        if len(levels) < 2 or min(levels[-2:]) < threshold:
            continue
        why = f"at {levels[-1]:.0%} of its {budget}-character budget, and at least {threshold:.0%} on the run before"
        rewrite, source = None, "heuristics"
        if model is not None:
            try:
                rewrite, source = usable_rewrite(kind, raw, await model_rewrite(model, kind, raw, budget)), "model"
                if rewrite is None:
                    run.notes.append(f"the model's rewrite of {file} was not usable (not shorter, or flagged); the heuristics decided")
            except Exception as exc:  # as for skills: the heuristics stand in
                run.notes.append(f"the model could not rewrite {file} ({type(exc).__name__}: {exc}); the heuristics decided")
        if rewrite is None:
            rewrite, source = usable_rewrite(kind, raw, render_entries(dedupe(parse_entries(raw)))), "heuristics"
        if rewrite is None:
            run.notes.append(f"{file} is {why}, and has no near-duplicate entries to merge: see it with 'hermes-editor memory show'")
            continue
        reason = f"{why}; {len(raw)} -> {len(rewrite)} characters"
        out.append(curator.Proposal("consolidate", kind, None, reason, text=rewrite, source=source))
    return out


def report_text(run: CuratorRun) -> str:
    """The run's short report: each proposal with its id, then how to act on them."""
    from core.redaction import scrub

    if not run.proposals and not run.notes:
        return "Curator: nothing to propose; skills and memory are left as they are."
    lines = [f"Curator: {len(run.proposals)} proposal(s); nothing has been changed."]
    lines += [f"- {p.id}  {p.describe()}" + (" [model]" if p.source == "model" else "") for p in run.proposals]
    lines += [f"Note: {scrub(note)}" for note in run.notes]  # a model's error may quote what it was sent
    if run.proposals:
        lines.append("Apply one: hermes-editor skills apply-proposal ID · drop one: hermes-editor skills reject-proposal ID")
    return "\n".join(lines)


async def run_builtin(kind: str, config: Config, *, run_id: str) -> tuple[str, bool]:
    """Run the built-in job ``kind``: (its report, whether it is worth delivering)."""
    if kind != CURATOR:
        raise ValueError(f"unknown built-in job kind {kind!r}")
    run = await curate(config, run_id=run_id)
    return report_text(run), bool(run.proposals or run.notes)


def owner_chat(config: Config) -> str | None:
    """Where the curator reports: ``[curator] chat``, else the owner's Telegram chat (as ``cron add``), else none."""
    from core.store.gateway import place_key_of

    if config.curator.chat:
        return place_key_of(config.curator.chat)
    owner = config.gateway.owner
    if owner is None:
        return None
    platform, _, native = str(owner).rpartition(":")
    return f"telegram:{native}:0" if platform in ("", "telegram") else None


async def sync_job(jobs: JobStore, config: Config) -> JobRecord | None:
    """Make the store's curator job match ``[curator]``: present with its schedule when enabled,
    absent when not. Returns the job (None when disabled)."""
    from core.config import home
    from core.store.schedule import local_zone, parse_schedule

    current = await jobs.builtin_job(CURATOR)
    if not config.curator.enabled:
        if current is not None:
            await jobs.remove_job(current.id)
        return None
    tz = config.cron.timezone or local_zone()
    return await jobs.put_builtin(
        CURATOR,
        name=CURATOR,
        schedule=parse_schedule(config.curator.schedule, tz=tz),
        timezone=tz,
        prompt=PROMPT,
        project=str(home()),
        chat_key=owner_chat(config),
    )
