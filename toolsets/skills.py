"""Skill tools: load a skill on demand, and write or improve the agent's own skills."""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, Field

from core.learning import gate as learning_gate
from core.learning import skills
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.registry import tool

__all__ = ["skill_manage", "skill_view"]


class SkillViewArgs(BaseModel):
    name: str
    file: str = Field("", description="a file of the skill, e.g. references/x.md")


@tool(kind="read", read_only=True, title=lambda a: f"Skill {a.name}")
async def skill_view(ctx: ToolContext, args: SkillViewArgs) -> str:
    """Load a skill listed in the system prompt (or one of its files)."""
    found = await asyncio.to_thread(skills.find, args.name, [ctx.cwd])
    if found is None:
        raise ToolError(f"No skill named {args.name!r}; the system prompt lists the skills.")
    try:
        text = await asyncio.to_thread(skills.view, found, args.file or None)
    except skills.SkillError as exc:
        raise ToolError(str(exc)) from None
    await asyncio.to_thread(skills.record_use, found.name)
    return text


class SkillManageArgs(BaseModel):
    action: Literal["create", "patch", "delete"]
    name: str = Field(description="lowercase-with-hyphens")
    content: str = Field("", description="create: SKILL.md, front matter (name, description) first")
    old: str = Field("", description="patch: exact text")
    new: str = ""


def _manage_title(args: SkillManageArgs) -> str:
    return f"Skill {args.action}: {args.name}"


@tool(kind="edit", read_only=False, title=_manage_title)
async def skill_manage(ctx: ToolContext, args: SkillManageArgs) -> str:
    """Create, patch or delete your own skills (reusable procedures); bundled ones are read-only."""
    await ctx.require_write(_manage_title(args))
    who = f"agent:{ctx.session_id[:8]}"

    def write(allow: frozenset[str] = frozenset()):
        if args.action == "create":
            return skills.create_skill(args.name, args.content, allow=allow)
        return skills.patch_skill(args.name, args.old, args.new, who=who, allow=allow)

    try:
        if args.action == "delete":
            target = await asyncio.to_thread(skills.archive_skill, args.name)
            return f"Deleted {args.name} (archived in {target})."
        try:
            path = await asyncio.to_thread(write)
        except skills.SkillFlagged as flagged:
            what = "new skill" if args.action == "create" else "change to skill"
            await ctx.require_write(f"Save this {what} {args.name}, flagged by screening", flagged=learning_gate.describe(flagged.flags))
            path = await asyncio.to_thread(write, frozenset(f.digest for f in flagged.flags))
    except skills.SkillError as exc:
        raise ToolError(str(exc)) from None
    if args.action == "create":
        return f"Created {path}; it is listed from the next turn."
    return f"Patched {path}."
