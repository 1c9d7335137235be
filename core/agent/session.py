"""What a session's prompt carries beyond the base: the model family's guidance, SOUL.md, memory,
skills, project context, the session's personality overlay, and the ephemeral nudges of the learning loop.

Caching rule: the system prompt is recomposed only between turns, and only when a watched file
changed (SOUL.md, the AGENTS.md chain, the skill folders, the overlay), the session's model did
(its family's guidance: a provider caches per model, so a switch starts a new cache anyway) or
the user chose another personality overlay (kept last, so what comes before it stays cached). Memory is a snapshot taken when the
session starts and never refreshed within it: the memory tool changes the files, and the next
session sees the change. Nudges are request-only text (``ModelRequest.ephemeral``) on every step
of their turn: the adapters put them last, after the cached prefix and apart from the user's
words; never in the system prompt and never in the stored history.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from core.learning.context import LearningSettings, NestedContext, fingerprint, load_project_context, load_soul, soul_path
from core.learning.memory import MEMORY_TOOL_NOTE, snapshot
from core.learning.screening import Finding
from core.learning.skills import bundled_skills_dir, discover, index_screened, personal_dir
from core.models.families import guidance_for

__all__ = ["SessionContext", "TurnOpening", "TurnStats", "looks_like_correction", "title_from"]

MEMORY_NUDGE = (
    "[Ephemeral reminder, not from the user: if this conversation showed something durable — the user's "
    "preferences, a project convention, an environment fact, a lesson from a mistake — save it with the memory "
    "tool (short entries; nothing temporary or secret). Otherwise ignore this.]"
)
MEMORY_FULL_NUDGE = (
    "[Ephemeral reminder: a memory file is nearly full. When you next save, consolidate first: merge related "
    "entries with replace and remove stale ones.]"
)
SKILL_NUDGE = (
    "[Ephemeral reminder, not from the user: the last task took several steps{why}. If the approach is reusable, "
    "save it as a skill with skill_manage (create), or improve the skill you used (patch). Otherwise ignore this.]"
)
_CORRECTION = re.compile(
    r"^\s*(no[,.!]|nope|wrong|that'?s (not|wrong)|not what i|actually[,]|instead[,]|don'?t do|you (should|shouldn'?t|forgot|missed))",
    re.IGNORECASE,
)


def looks_like_correction(text: str) -> bool:
    """Whether the user's message reads as correcting the agent."""
    return bool(_CORRECTION.search(text))


def title_from(text: str) -> str | None:
    """A session title from its first prompt: one line, at most 60 characters; None for a blank prompt."""
    if not text.strip():
        return None
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:59].rstrip() + "…"


@dataclass(slots=True)
class TurnOpening:
    """What the start of a turn changes: a new system prompt (None: unchanged), screening findings
    to report, and the turn's ephemeral nudge."""

    prompt: str | None
    findings: list[Finding]
    nudge: str | None


@dataclass(slots=True)
class TurnStats:
    """How complex the last turn was (for the skill nudge)."""

    tool_calls: int = 0
    failures: int = 0
    recovered: bool = False

    @property
    def complex(self) -> bool:
        return self.tool_calls >= 5 or self.recovered

    def record(self, failed: bool) -> None:
        """Count one finished tool call."""
        self.tool_calls += 1
        self.failures += failed
        self.recovered |= self.failures > 0 and not failed


@dataclass(slots=True)
class SessionContext:
    """The session's prompt sections and the state of its nudges."""

    cwd: Path
    base: str
    settings: LearningSettings
    toolsets: frozenset[str]
    memory: str = ""
    memory_full: tuple[str, ...] = ()
    soul: str = ""
    skills: str = ""
    project: str = ""
    watched: tuple[Path, ...] = ()
    stamp: tuple[tuple[str, int, int], ...] = ()
    findings: list[Finding] = field(default_factory=list)
    reported: set[str] = field(default_factory=set)
    nested: NestedContext | None = None
    last_turn: TurnStats = field(default_factory=TurnStats)
    # Names of the session's tools: the prompt and the reminders promise no other. None: all.
    tools: frozenset[str] | None = None
    # The model family's notes (core.models.families), set at each turn's start for the session's model.
    guidance: str = ""
    # The personality overlay chosen for the session (core.learning.personality) and its section.
    personality: str | None = None
    overlay: str = ""
    # The prompt the session's requests carry now: a turn's start compares the new one with it.
    issued: str = ""
    # A personality chosen from another task (a chat command) while a turn starts: one at a time.
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(
        cls, cwd: Path, base: str, settings: LearningSettings, toolsets: Iterable[str], tools: Iterable[str] | None = None
    ) -> SessionContext:
        """Read everything once (blocking: call it off the event loop)."""
        memory = snapshot(settings)
        names = None if tools is None else frozenset(tools)
        text = memory.text
        if names is not None and "memory" not in names:
            text = text.replace(MEMORY_TOOL_NOTE, "")
        ctx = cls(cwd, base, settings, frozenset(toolsets), memory=text, memory_full=memory.full, tools=names)
        ctx.findings.extend(memory.findings)
        ctx.nested = NestedContext(cwd, settings.context_file_chars)
        ctx._load_files()
        ctx.issued = ctx.prompt()
        return ctx

    def _load_files(self) -> None:
        soul = load_soul(self.settings)
        self.soul = f"# Persona (from the user's SOUL.md)\n{soul.text.strip()}" if soul else ""
        project = load_project_context(self.cwd, self.settings)
        self.project = project.render()
        skills = discover([self.cwd], toolsets=self.toolsets)
        self.skills, skill_findings = index_screened(skills)
        if not self._has("skill_view"):
            self.skills = ""  # a list of skills the session cannot load would only mislead
        self.findings.extend(project.findings + (list(soul.findings) if soul else []) + skill_findings)
        skill_paths = [s.path for s in skills]
        folders = [self.cwd / ".agents" / "skills", personal_dir(), bundled_skills_dir()]
        overlay_files = self._load_overlay()
        self.watched = (soul_path(), *project.watched, *folders, *skill_paths, *overlay_files)
        self.stamp = fingerprint(self.watched)

    def _load_overlay(self) -> tuple[Path, ...]:
        """Read the chosen overlay (screened); returns the files to watch for it."""
        from core.learning.personality import load_overlay, watched

        if self.personality is None:
            self.overlay = ""
            return ()
        overlay = load_overlay(self.personality)
        self.overlay = overlay.section() if overlay is not None else ""
        if overlay is not None:
            self.findings.extend(overlay.findings)
        return watched(self.personality)

    def choose_personality(self, name: str | None) -> None:
        """Use the overlay ``name`` (None: none) from the next turn's prompt (blocking: call it off the event loop)."""
        with self.lock:
            self.personality = name
            self._load_files()

    def _has(self, tool: str) -> bool:
        return self.tools is None or tool in self.tools

    def prompt(self) -> str:
        """The system prompt; stable parts first so that a change late in it keeps more of the cache."""
        sections = [self.base, self.guidance, self.soul, self.memory, self.skills, self.project, self.overlay]
        return "\n\n".join(s for s in sections if s)

    def refresh(self) -> bool:
        """Between turns: reload the files when one changed. True when the prompt changed."""
        if fingerprint(self.watched) == self.stamp:
            return False
        before = self.prompt()
        self._load_files()
        return self.prompt() != before

    def new_findings(self) -> list[Finding]:
        """Screening findings not yet reported to the user."""
        fresh = [f for f in self.findings if f.describe() not in self.reported]
        self.reported.update(f.describe() for f in fresh)
        return fresh

    def begin_turn(self, turn_number: int, prompt_text: str, model: str | None = None, family: str | None = None) -> TurnOpening:
        """Between turns (blocking: call it off the event loop): apply changed context files, the
        guidance for ``model`` (the label of the model this turn uses; ``family``, the one its
        provider's profile names, if any) and a newly chosen overlay (the prefix is stable within a
        turn), collect new findings and choose the turn's nudge."""
        with self.lock:
            if model is not None:
                self.guidance = guidance_for(model, family)
            self.refresh()
            prompt = self.prompt()
            changed = prompt if prompt != self.issued else None
            self.issued = prompt
            return TurnOpening(changed, self.new_findings(), self.nudge(turn_number, prompt_text))

    def nested_note(self, paths: list[Path]) -> str:
        """The nested AGENTS.md files that apply to ``paths`` and were not shown yet, as text to
        append to a tool result ("" when none)."""
        if self.nested is None:
            return ""
        return "".join(
            f"\n\n[Instructions from {item.path}, which applies to files under its folder:]\n{item.text}"
            for item in self.nested.for_paths(paths)
        )

    def nudge(self, turn_number: int, prompt_text: str) -> str | None:
        """The ephemeral reminder for this turn's request, if any."""
        parts = []
        every = self.settings.memory_nudge_turns
        if every and turn_number > 0 and turn_number % every == 0 and self._has("memory"):
            parts.append(MEMORY_NUDGE)
            if self.memory_full:
                parts.append(MEMORY_FULL_NUDGE)
        if self.settings.skill_nudge and self._has("skill_manage"):
            why = []
            if self.last_turn.tool_calls >= 5:
                why.append(f"{self.last_turn.tool_calls} tool calls")
            if self.last_turn.recovered:
                why.append("an error you recovered from")
            if looks_like_correction(prompt_text) and turn_number > 1:
                why.append("the user is correcting you")
            if why:
                parts.append(SKILL_NUDGE.format(why=" (" + ", ".join(why) + ")"))
        return "\n".join(parts) or None
