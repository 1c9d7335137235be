"""The ``[learning]`` settings: context files, memory budgets, nudges, compression, search summaries.

Kept apart from :mod:`core.learning.context` and importing only pydantic, so that :mod:`core.config`
can hold it as a field without an import cycle.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LearningSettings"]


class LearningSettings(BaseModel):
    """The ``[learning]`` table of config.toml: context, memory, skills, compression."""

    model_config = ConfigDict(extra="forbid")

    compat_files: Literal["auto", "always", "never"] = Field(
        default="auto", description="read CLAUDE.md, GEMINI.md, .cursorrules, copilot-instructions: auto = when no AGENTS.md"
    )
    context_file_chars: int = Field(default=16_000, ge=1_000, description="cap per context file")
    soul_chars: int = Field(default=6_000, ge=500)
    memory_chars: int = Field(default=2_200, ge=200, description="budget of memories/MEMORY.md")
    user_chars: int = Field(default=1_400, ge=200, description="budget of memories/USER.md")
    memory_nudge_turns: int = Field(default=8, ge=0, description="remind to save memories every N turns; 0 = never")
    skill_nudge: bool = True
    compress_at: float = Field(default=0.8, gt=0.1, le=0.98, description="share of the context window")
    compress_keep_tail: int = Field(default=8, ge=2, description="recent messages kept verbatim")
    search_summary: bool = Field(default=False, description="session_search may ask a model to summarise its top sessions")
    summary_model: str | None = Field(default=None, description='"provider:model" for those summaries; default: the session\'s')
