"""The ``[learning]`` settings: context files, memory budgets, nudges, compression, search summaries.

Kept apart from :mod:`core.learning.context` and importing only pydantic, so that :mod:`core.config`
can hold it as a field without an import cycle.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LearningSettings", "SkillSourceConfig", "SkillsSettings"]


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


class SkillSourceConfig(BaseModel):
    """``[skills.sources.NAME]``: where ``hermes-editor skills search|install`` looks for skills.

    Exactly one of ``git`` (a URL, or ``owner/repo`` on the forge), ``folder`` (a local path) or
    ``index`` (an agentskills.io-style JSON index URL)."""

    model_config = ConfigDict(extra="forbid")

    git: str | None = Field(default=None, description='a git URL, or "owner/repo" on [skills] forge')
    folder: str | None = Field(default=None, description="a local folder holding skills (absolute; ~ allowed)")
    index: str | None = Field(default=None, description="an http(s) URL of a JSON index of skills")
    subpath: str | None = Field(default=None, description="git: the folder inside the repository that holds the skills")
    ref: str | None = Field(default=None, description="git: a branch, tag or full commit (default: the repository's HEAD)")

    def problem(self) -> tuple[str, str] | None:
        """(key, what is wrong) for what one field alone cannot say; None when the source is usable."""
        given = [k for k in ("git", "folder", "index") if getattr(self, k)]
        if len(given) != 1:
            return "", 'give exactly one of git = "owner/repo" (or a URL), folder = "/path" or index = "https://.../index.json"'
        if self.index and not self.index.startswith(("http://", "https://")):
            return "index", "an index is an http:// or https:// URL"
        if (self.subpath or self.ref) and not self.git:
            return ("subpath" if self.subpath else "ref"), "subpath and ref apply to git sources only"
        if self.subpath and (self.subpath.startswith(("/", "\\")) or ".." in self.subpath.replace("\\", "/").split("/")):
            return "subpath", "a subpath is relative to the repository and has no '..'"
        if self.ref and (self.ref.startswith("-") or any(c.isspace() for c in self.ref)):
            return "ref", "a ref is a branch, tag or commit name (no spaces, no leading '-')"
        if self.folder and not self.folder.startswith(("/", "~")):
            return "folder", "a folder source is an absolute path (~ allowed)"
        return None


class SkillsSettings(BaseModel):
    """The ``[skills]`` table of config.toml: sources of installable skills and the installer's limits."""

    model_config = ConfigDict(extra="forbid")

    forge: str = Field(default="https://github.com/", description='where "owner/repo" git sources live')
    max_file_bytes: int = Field(default=1_000_000, ge=1_000, description="largest file a fetched skill may hold")
    max_skill_bytes: int = Field(default=10_000_000, ge=1_000, description="largest fetched skill, all files together")
    sources: dict[str, SkillSourceConfig] = Field(default_factory=dict, description="named sources for skills search|install")
