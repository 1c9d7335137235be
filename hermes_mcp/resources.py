"""Resources, resource templates and prompts: sessions, skills and memory files; skills as prompts.

URIs:
- ``hermes://sessions`` — recent sessions (Markdown index); ``hermes://sessions/{session_id}``
  — one conversation as Markdown (long ones end with a pointer to ``session_read``);
- ``hermes://skills/{name}`` — a skill's SKILL.md; every skill is also a prompt of its name;
- ``hermes://memory/{file}`` — ``MEMORY.md`` and ``USER.md``.

Skills change on disk while a client is connected; a poll notices and tells clients: in the
handshake era with ``notifications/*/list_changed`` on each connection, in the 2026-07-28 era
through the SDK's subscription bus to ``subscriptions/listen`` streams.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from core.learning import memory, skills
from hermes_mcp.history import transcript_markdown
from hermes_mcp.views import iso

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.mcpserver import MCPServer
    from mcp.server.subscriptions import SubscriptionBus

    from hermes_mcp.runtime import Runtime

__all__ = ["ChangeNotifier", "dynamic_resources", "register_resources", "skill_prompt", "skill_prompts", "watch_skills"]

log = logging.getLogger(__name__)

MARKDOWN = "text/markdown"
RECENT_SESSIONS = 20
SKILL_POLL_SECONDS = 1.0
MAX_LEGACY_CONNECTIONS = 64


def register_resources(server: MCPServer, runtime: Runtime) -> None:
    """The static resource and the templates (the dynamic list comes from ``dynamic_resources``)."""
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError

    @server.resource(
        "hermes://sessions",
        name="sessions",
        title="Recent sessions",
        mime_type=MARKDOWN,
        description="The most recent conversations from every surface",
    )
    async def sessions_index() -> str:
        store = await runtime.store()
        lines = ["# Recent sessions", ""]
        for record in await store.list_sessions(limit=50):
            lines.append(f"- `{record.id}` {record.title or 'untitled'} — {record.cwd} ({record.surface}, {iso(record.updated_at)})")
        if len(lines) == 2:
            lines.append("No sessions yet.")
        return "\n".join(lines) + "\n"

    @server.resource(
        "hermes://sessions/{session_id}",
        name="session",
        title="A conversation",
        mime_type=MARKDOWN,
        description="One conversation as Markdown",
    )
    async def session_text(session_id: str) -> str:
        text = await transcript_markdown(await runtime.store(), session_id)
        if text is None:
            raise ResourceNotFoundError(f"no session {session_id!r}")
        return text

    @server.resource("hermes://skills/{name}", name="skill", title="A skill", mime_type=MARKDOWN, description="A skill's SKILL.md")
    async def skill_text(name: str) -> str:
        text = await asyncio.to_thread(_skill_text, name, list(runtime.projects))
        if text is None:
            raise ResourceNotFoundError(f"no skill {name!r}")
        return text

    @server.resource(
        "hermes://memory/{file}",
        name="memory",
        title="A memory file",
        mime_type=MARKDOWN,
        description="MEMORY.md (notes) or USER.md (about the user)",
    )
    async def memory_text(file: str) -> str:
        names = {name: kind for kind, name in memory.FILES.items()}
        if file not in names:
            raise ResourceNotFoundError(f"no memory file {file!r}; there are {', '.join(names)}")
        return await asyncio.to_thread(_memory_text, names[file])


def _skill_text(name: str, projects: list) -> str | None:
    skill = skills.find(name, projects)
    if skill is None:
        return None
    try:
        return skills.read_text(skill)
    except OSError:
        return None


def _memory_text(kind: str) -> str:
    try:
        return memory.memory_path(kind).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""


async def dynamic_resources(runtime: Runtime) -> list[Any]:
    """Concrete resources for what exists now: each skill, each memory file, recent sessions."""
    from mcp_types import Resource

    out = []
    for skill in await asyncio.to_thread(skills.discover, list(runtime.projects)):
        out.append(
            Resource(
                uri=f"hermes://skills/{skill.name}",
                name=f"skill-{skill.name}",
                title=f"Skill: {skill.name}",
                description=skill.description or None,
                mime_type=MARKDOWN,
            )
        )
    for kind, name in memory.FILES.items():
        out.append(
            Resource(uri=f"hermes://memory/{name}", name=f"memory-{kind}", title=f"Memory: {memory.LABELS[kind]}", mime_type=MARKDOWN)
        )
    store = await runtime.store()
    for record in await store.list_sessions(limit=RECENT_SESSIONS):
        out.append(
            Resource(
                uri=f"hermes://sessions/{record.id}",
                name=f"session-{record.id[:8]}",
                title=record.title or f"Session {record.id[:8]}",
                description=f"{record.cwd} ({record.surface}, {iso(record.updated_at)})",
                mime_type=MARKDOWN,
            )
        )
    return out


async def skill_prompts(runtime: Runtime) -> list[Any]:
    """Every skill as a prompt with one optional argument, the task to apply it to."""
    from mcp_types import Prompt, PromptArgument

    return [
        Prompt(
            name=skill.name,
            title=f"Skill: {skill.name}",
            description=skill.description or f"Use the {skill.name} skill",
            arguments=[PromptArgument(name="task", description="what to apply the skill to", required=False)],
        )
        for skill in await asyncio.to_thread(skills.discover, list(runtime.projects))
    ]


async def skill_prompt(runtime: Runtime, name: str, arguments: dict[str, str] | None) -> Any:
    """The prompt for one skill; an unknown name is a JSON-RPC invalid-params error."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS, GetPromptResult, PromptMessage, TextContent

    skill = await asyncio.to_thread(skills.find, name, list(runtime.projects))
    body = await asyncio.to_thread(_skill_text, name, list(runtime.projects)) if skill is not None else None
    if skill is None or body is None:
        raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {name}")
    task = (arguments or {}).get("task", "").strip()
    intro = f"Use the skill '{skill.name}' below" + (f" for this: {task}" if task else "") + "."
    text = f'{intro}\n\n<skill name="{skill.name}" path="{skill.path}">\n{body}\n</skill>'
    return GetPromptResult(
        description=skill.description or None,
        messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
    )


class ChangeNotifier:
    """Tells connected clients that the resource and prompt lists changed."""

    def __init__(self, bus: SubscriptionBus) -> None:
        self.bus = bus
        # Handshake-era connections, by transport session ("stdio" for the one stdio peer).
        self._legacy: OrderedDict[str, Any] = OrderedDict()

    async def middleware(self, ctx: ServerRequestContext, call_next: Any) -> Any:
        """Server middleware: remember each handshake-era connection's session to notify later."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        if ctx.request_id is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            headers = getattr(ctx.request, "headers", None)
            key = (headers.get("mcp-session-id") if headers is not None else None) or "stdio"
            self._legacy.pop(key, None)
            self._legacy[key] = ctx.session
            while len(self._legacy) > MAX_LEGACY_CONNECTIONS:
                self._legacy.popitem(last=False)
        return await call_next(ctx)

    async def changed(self) -> None:
        from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged

        await self.bus.publish(ResourcesListChanged())
        await self.bus.publish(PromptsListChanged())
        for session in list(self._legacy.values()):
            try:
                await session.send_resource_list_changed()
                await session.send_prompt_list_changed()
            except Exception:  # a closed connection: best effort, as the notifications are
                log.debug("could not notify a connection", exc_info=True)


async def watch_skills(runtime: Runtime, notifier: ChangeNotifier, *, interval: float = SKILL_POLL_SECONDS) -> None:
    """Poll the skill folders; announce a change when a skill is added, removed or edited."""
    last = await asyncio.to_thread(skills.fingerprint, list(runtime.projects))
    while True:
        await asyncio.sleep(interval)
        try:
            now = await asyncio.to_thread(skills.fingerprint, list(runtime.projects))
        except Exception:
            log.debug("skill poll failed", exc_info=True)
            continue
        if now != last:
            last = now
            log.info("skills changed on disk; notifying clients")
            await notifier.changed()
