"""Skill tools: load a skill on demand, and write or improve the agent's own skills."""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, Field

from core import skills
from core.tools import ToolContext, ToolError, tool

__all__ = ["skill_manage", "skill_view"]


class SkillViewArgs(BaseModel):
    name: str
    file: str = Field("", description="a file of the skill, e.g. references/x.md")


@tool(kind="read", read_only=True, toolsets={"editor", "gateway"}, title=lambda a: f"Skill {a.name}")
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


@tool(kind="edit", read_only=False, toolsets={"editor", "gateway"}, title=lambda a: f"Skill {a.action}: {a.name}")
async def skill_manage(ctx: ToolContext, args: SkillManageArgs) -> str:
    """Create, patch or delete your own skills (reusable procedures); bundled ones are read-only."""
    if ctx.policy.mode == "read-only":
        raise ToolError("The session is in read-only mode: nothing was saved.")
    try:
        if args.action == "create":
            path = await asyncio.to_thread(skills.create_skill, args.name, args.content)
            return f"Created {path}; it is listed from the next turn."
        if args.action == "patch":
            path = await asyncio.to_thread(skills.patch_skill, args.name, args.old, args.new)
            return f"Patched {path}."
        target = await asyncio.to_thread(skills.archive_skill, args.name)
        return f"Deleted {args.name} (archived in {target})."
    except skills.SkillError as exc:
        raise ToolError(str(exc)) from None
