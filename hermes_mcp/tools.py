"""The MCP tools: 13 short names (14 with ``--trust-client-approvals``), all ``async``, annotated,
structured results under 100 KB.

Each tool is a thin wrapper: arguments in, a call into tasks / approvals / history / the
library, a typed result out. Errors the calling model should read are ``ToolError``s with a
message saying what to do; protocol misuse stays a JSON-RPC error (the SDK's job).

No ``from __future__ import annotations`` here: the SDK reads these signatures to build the
input and output schemas, and the tools are closures over the runtime.
"""

import asyncio
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from core.config import config_path
from core.store.sessions import SearchQueryError
from hermes_mcp import approvals as approvals_mod
from hermes_mcp import history
from hermes_mcp.follow import MAX_WAIT, follow, resumed_task_id
from hermes_mcp.projects import ProjectRefused, client_roots, confine
from hermes_mcp.protocol_tasks import runs_as_protocol_task
from hermes_mcp.runtime import NotReady, Runtime
from hermes_mcp.tasks import Task, TaskError
from hermes_mcp.views import (
    ApprovalAnswer,
    ApprovalsList,
    MemoryAdded,
    MemoryFileView,
    MemoryView,
    SearchPage,
    SessionPage,
    SessionsPage,
    SkillInfo,
    SkillsList,
    SkillText,
    TaskView,
    clip,
    dumps,
)

__all__ = ["CLIENT_ANSWER_TOOL", "TOOL_NAMES", "register_tools", "tool_names"]

TOOL_NAMES = (
    "ask",
    "task_start",
    "task_status",
    "task_wait",
    "task_cancel",
    "approvals_list",
    "sessions_search",
    "sessions_list",
    "session_read",
    "skills_list",
    "skill_view",
    "memory_read",
    "memory_add",
)
# Lets the client's model answer approvals: registered only with --trust-client-approvals.
CLIENT_ANSWER_TOOL = "approval_respond"
SKILL_CHARS = 40_000
MEMORY_CHARS = 20_000

Mode = Literal["ask", "accept-edits", "read-only", "auto"]
Prompt = Annotated[str, Field(description="what the agent should do")]
Cwd = Annotated[
    str | None,
    Field(
        description="absolute path of the project directory, inside the client's roots or the user's configured projects "
        "(default: the client's first root)"
    ),
]
SessionArg = Annotated[str | None, Field(description="continue this session (from any editor or this server)")]
ModeArg = Annotated[
    Mode, Field(description="ask: changes and commands ask; accept-edits: edits and sandboxed commands go ahead; read-only: neither")
]
TaskId = Annotated[str, Field(description="from ask or task_start")]
WaitArg = Annotated[float, Field(ge=0, le=MAX_WAIT, description="seconds to wait at most")]
CwdFilter = Annotated[str | None, Field(description="only sessions of this project directory")]
Cursor = Annotated[str | None, Field(description="next_cursor from the previous page")]

TaskResult = Annotated[CallToolResult, TaskView]

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
RUN_AGENT = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True)


def compact_schema(node: Any, *, output: bool = False) -> Any:
    """A JSON schema without titles, null defaults and (for outputs) defaults and model docstrings.

    An optional argument (``X | None = None``) becomes plain ``X``, not required: absent and
    null mean the same to these tools, and a single ``type`` is what every client's schema
    dialect takes (Gemini's OpenAPI subset rejects type arrays). The tool list travels with
    every model request, so this halves what it costs.
    """
    if isinstance(node, list):
        return [compact_schema(item, output=output) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "default" and (output or value is None):
            continue
        if output and key == "description" and "properties" in node:
            continue  # a model's docstring; the tool's description says what the result is
        out[key] = value if key == "enum" else compact_schema(value, output=output)
    arms = out.get("anyOf")
    if not output and isinstance(arms, list) and len(arms) == 2 and {"type": "null"} in arms and node.get("default", 0) is None:
        other = arms[0] if arms[1] == {"type": "null"} else arms[1]
        del out["anyOf"]
        out = {**other, **out}
    return out


def _compact_registered(server: MCPServer) -> None:
    manager = getattr(server, "_tool_manager", None)  # no public accessor for registered tools
    if manager is None:
        return
    for tool in manager.list_tools():
        tool.parameters = compact_schema(tool.parameters)
        if tool.fn_metadata.output_schema is not None:
            tool.fn_metadata.output_schema = compact_schema(tool.fn_metadata.output_schema, output=True)
        tool.description = " ".join(tool.description.split())


def tool_names(trust_client_approvals: bool = False) -> tuple[str, ...]:
    """The tools a server lists, in order."""
    if not trust_client_approvals:
        return TOOL_NAMES
    at = TOOL_NAMES.index("approvals_list") + 1
    return (*TOOL_NAMES[:at], CLIENT_ANSWER_TOOL, *TOOL_NAMES[at:])


def result(model: BaseModel) -> CallToolResult:
    """A structured result: compact JSON as text, the same object as structuredContent."""
    return CallToolResult(content=[TextContent(type="text", text=dumps(model))], structured_content=model.model_dump(mode="json"))


def register_tools(server: MCPServer, runtime: Runtime) -> None:
    """Add every tool to ``server``."""

    def fail(exc: Exception) -> ToolError:
        return ToolError(runtime.redact(str(exc)))

    async def start(ctx: Context, prompt: str, cwd: str | None, session_id: str | None, mode: str) -> Task | InputRequiredResult:
        """A new task, in a folder the user opened or configured; or the round that asks for the roots."""
        roots = await client_roots(ctx)
        if isinstance(roots, InputRequiredResult):
            return roots
        allowed = runtime.allowed_projects(roots)
        if not cwd and not session_id:
            cwd = next((str(r) for r in roots if r in allowed), None)
            if cwd is None and roots:
                shared = ", ".join(str(r) for r in roots)
                raise ToolError(
                    f"cwd is required: the client's roots ({shared}) are too broad to be a project (never /, the home "
                    f"directory or above). Name the project's folder as cwd; it must be in [mcp] projects of "
                    f"{config_path()} or opened as a root in the client."
                )
        try:
            return await runtime.tasks.start(prompt, cwd=cwd, session_id=session_id, mode=mode, allowed=allowed)
        except (TaskError, NotReady, ProjectRefused) as exc:
            raise fail(exc) from None

    async def project(ctx: Context, cwd: str) -> Path | InputRequiredResult:
        """``cwd`` as a folder the user opened or configured (for project skills)."""
        roots = await client_roots(ctx)
        if isinstance(roots, InputRequiredResult):
            return roots
        try:
            return confine(cwd, runtime.allowed_projects(roots))
        except ProjectRefused as exc:
            raise fail(exc) from None

    def task(task_id: str) -> Task:
        try:
            return runtime.tasks.get(task_id)
        except TaskError as exc:
            raise fail(exc) from None

    # --- the agent ---------------------------------------------------------------------

    async def ask(
        ctx: Context,
        prompt: Prompt,
        cwd: Cwd = None,
        session_id: SessionArg = None,
        mode: ModeArg = "ask",
        wait: Annotated[float, Field(ge=1, le=MAX_WAIT, description="seconds to wait for the result")] = 40,
    ) -> TaskResult | InputRequiredResult:
        """Ask the Hermes coding agent for something small in a project and wait for the result: its reply
        and the changed files as diffs. Longer work returns a task_id to follow with task_wait. Changes and
        commands wait for the user's approval (status needs_approval; only the user answers)."""
        resumed = resumed_task_id(ctx)
        found = task(resumed) if resumed else await start(ctx, prompt, cwd, session_id, mode)
        if isinstance(found, InputRequiredResult):
            return found
        if runs_as_protocol_task():
            return result(found.view())  # the client follows it as a protocol task (hermes_mcp.protocol_tasks)
        outcome = await follow(ctx, runtime, found, wait)
        return outcome if isinstance(outcome, InputRequiredResult) else result(outcome)

    async def task_start(
        ctx: Context, prompt: Prompt, cwd: Cwd = None, session_id: SessionArg = None, mode: ModeArg = "ask"
    ) -> TaskResult | InputRequiredResult:
        """Start the Hermes agent on a task in a project directory; returns a task_id at once. Follow it
        with task_wait. Continue an earlier conversation (from any editor) with session_id."""
        found = await start(ctx, prompt, cwd, session_id, mode)
        return found if isinstance(found, InputRequiredResult) else result(found.view())

    async def task_status(task_id: TaskId) -> TaskResult:
        """Where a task stands: status, the reply so far, tool calls, approvals it waits on, changed files."""
        return result(task(task_id).view())

    async def task_wait(ctx: Context, task_id: TaskId, wait: WaitArg = 30) -> TaskResult | InputRequiredResult:
        """Wait until a task finishes or needs the user's approval (at most `wait` seconds), with progress
        notifications; then return its status. Clients with forms are asked for approvals here."""
        outcome = await follow(ctx, runtime, task(task_id), wait)
        return outcome if isinstance(outcome, InputRequiredResult) else result(outcome)

    async def task_cancel(task_id: TaskId) -> TaskResult:
        """Stop a task: the model, running tools and its open approvals. Work done so far is kept."""
        task(task_id)
        return result((await runtime.tasks.cancel(task_id)).view())

    server.add_tool(ask, annotations=RUN_AGENT.model_copy(update={"title": "Ask the agent"}))
    server.add_tool(task_start, annotations=RUN_AGENT.model_copy(update={"title": "Start an agent task"}))
    server.add_tool(task_status, annotations=READ.model_copy(update={"title": "Task status"}))
    # task_wait changes nothing itself; an approval a user gives in its form is the user's act.
    server.add_tool(task_wait, annotations=READ.model_copy(update={"title": "Wait for a task"}))
    server.add_tool(
        task_cancel,
        annotations=ToolAnnotations(
            title="Cancel a task", read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )

    # --- approvals ---------------------------------------------------------------------

    async def approvals_list(
        session_id: Annotated[str | None, Field(description="only this session's")] = None,
    ) -> Annotated[CallToolResult, ApprovalsList]:
        """Actions waiting for the user's approval, from this server's tasks and from editor and gateway
        sessions: what would happen, why it asks, and for file changes the diff. Show them to the user:
        only the user answers (see how_to_answer)."""
        return result(
            approvals_mod.approvals_list_view(
                await approvals_mod.list_approvals(runtime, runtime.tasks, session_id), runtime.trust_client_approvals
            )
        )

    server.add_tool(approvals_list, annotations=READ.model_copy(update={"title": "Pending approvals"}))

    if runtime.trust_client_approvals:

        async def approval_respond(
            approval_id: Annotated[str, Field(description="from a task's approvals")],
            decision: Annotated[
                approvals_mod.Decision, Field(description="allow or deny; allow_always / deny_always only where can_always")
            ],
        ) -> Annotated[CallToolResult, ApprovalAnswer]:
            """Pass on the user's answer to an approval one of this server's tasks waits on. Send only what the
            user decided, never your own choice. The first answer from anywhere wins."""
            try:
                return result(await approvals_mod.respond(runtime, runtime.tasks, approval_id, decision))
            except approvals_mod.ApprovalChoice as exc:
                raise fail(exc) from None

        server.add_tool(
            approval_respond,
            name=CLIENT_ANSWER_TOOL,
            annotations=ToolAnnotations(
                title="Answer an approval", read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        )

    # --- history -----------------------------------------------------------------------

    async def sessions_search(
        query: Annotated[str, Field(description="words to find (all must occur)")],
        cwd: CwdFilter = None,
        session_id: Annotated[str | None, Field(description="only in this session")] = None,
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
        cursor: Cursor = None,
    ) -> Annotated[CallToolResult, SearchPage]:
        """Full-text search over every conversation (editors, this server, the gateway), best match first;
        matches are in [brackets]. Read around a hit with session_read(session_id, after=seq-1)."""
        store = await runtime.store()
        try:
            page = await history.search_sessions(store, query, cwd=cwd, session_id=session_id, cursor=cursor, limit=limit)
        except (history.BadCursor, SearchQueryError) as exc:
            raise fail(exc) from None
        return result(page)

    async def sessions_list(
        cwd: CwdFilter = None, limit: Annotated[int, Field(ge=1, le=100)] = 20, cursor: Cursor = None
    ) -> Annotated[CallToolResult, SessionsPage]:
        """Conversations from every surface, most recently active first, a page at a time."""
        store = await runtime.store()
        try:
            return result(await history.list_sessions(store, cwd=cwd, cursor=cursor, limit=limit))
        except history.BadCursor as exc:
            raise fail(exc) from None

    async def session_read(
        session_id: Annotated[str, Field(description="from sessions_list or sessions_search")],
        after: Annotated[int, Field(ge=0, description="start after this message seq (next_after of the last page)")] = 0,
        limit: Annotated[int, Field(ge=1, le=100)] = 30,
    ) -> Annotated[CallToolResult, SessionPage]:
        """A page of one conversation, oldest first: user and assistant messages, tool calls and results."""
        page = await history.read_session(await runtime.store(), session_id, after=after, limit=limit)
        if page is None:
            raise ToolError(f"No session {session_id!r}; find one with sessions_list or sessions_search.")
        return result(page)

    server.add_tool(sessions_search, annotations=READ.model_copy(update={"title": "Search conversations"}))
    server.add_tool(sessions_list, annotations=READ.model_copy(update={"title": "List conversations"}))
    server.add_tool(session_read, annotations=READ.model_copy(update={"title": "Read a conversation"}))

    # --- skills and memory -------------------------------------------------------------

    async def skills_list(
        ctx: Context,
        cwd: Annotated[str | None, Field(description="also this project's skills (.agents/skills)")] = None,
    ) -> Annotated[CallToolResult, SkillsList] | InputRequiredResult:
        """Skills the agent has: the project's, personal ones and bundled ones (in that precedence). View one with skill_view."""
        from core.learning import skills

        extra = await project(ctx, cwd) if cwd else None
        if isinstance(extra, InputRequiredResult):
            return extra
        folders_of = [*runtime.projects, *([extra] if extra else [])]
        found = await asyncio.to_thread(skills.discover, folders_of)
        folders = [
            *(str(Path(p) / ".agents" / "skills") for p in folders_of),
            str(skills.personal_dir()),
            str(skills.bundled_skills_dir()),
        ]
        return result(
            SkillsList(
                skills=[SkillInfo(name=s.name, description=s.description, origin=s.origin, path=str(s.path)) for s in found],
                folders=folders,
            )
        )

    async def skill_view(
        ctx: Context,
        name: Annotated[str, Field(description="a name from skills_list")],
        cwd: Annotated[str | None, Field(description="the project, for project skills")] = None,
    ) -> Annotated[CallToolResult, SkillText] | InputRequiredResult:
        """One skill: its instructions (SKILL.md without front matter) and a list of its other files."""
        from core.learning import skills

        extra = await project(ctx, cwd) if cwd else None
        if isinstance(extra, InputRequiredResult):
            return extra
        folders_of = [*runtime.projects, *([extra] if extra else [])]

        def load() -> tuple[skills.Skill, str] | None:
            skill = skills.find(name, folders_of)
            if skill is None:
                return None
            text = skills.view(skill)
            skills.record_use(skill.name)
            return skill, text

        found = await asyncio.to_thread(load)
        if found is None:
            raise ToolError(f"No skill named {name!r}; see skills_list.")
        skill, full = found
        text, cut = clip(full, SKILL_CHARS, f"the rest is in {skill.path}")
        return result(
            SkillText(name=skill.name, description=skill.description, origin=skill.origin, path=str(skill.path), text=text, truncated=cut)
        )

    async def memory_read() -> Annotated[CallToolResult, MemoryView]:
        """What the agent remembers, shared by every surface: notes (MEMORY.md) and about the user (USER.md)."""
        from core.learning import memory

        def read() -> list[tuple[str, Path, str]]:
            out = []
            for kind in memory.FILES:
                path = memory.memory_path(kind)
                try:
                    out.append((kind, path, path.read_text(encoding="utf-8", errors="replace")))
                except FileNotFoundError:
                    out.append((kind, path, ""))
            return out

        files = []
        for kind, path, raw in await asyncio.to_thread(read):
            text, cut = clip(raw, MEMORY_CHARS)
            file: Literal["memory", "user"] = "user" if kind == "user" else "memory"
            files.append(MemoryFileView(file=file, label=memory.LABELS[kind], path=str(path), text=text, truncated=cut))
        return result(MemoryView(files=files))

    async def memory_add(
        text: Annotated[str, Field(description="one short, self-contained fact (no secrets)")],
        file: Annotated[
            Literal["memory", "user"], Field(description="memory: notes about work and projects; user: about the user")
        ] = "memory",
    ) -> Annotated[CallToolResult, MemoryAdded]:
        """Add one entry to the agent's memory, which every surface reads (within its size budget)."""
        from core.learning import memory
        from core.learning.context import current_settings

        if runtime.redact(text) != text:
            raise ToolError("That entry looks like it holds a credential; memory never stores secrets.")
        try:
            change = await asyncio.to_thread(memory.change_memory, "add", file, text=text, who="mcp", settings=current_settings())
        except memory.MemoryError as exc:
            raise fail(exc) from None
        return result(MemoryAdded(file=file, path=str(memory.memory_path(file)), entry=memory.render_entries([change.after or ""])))

    server.add_tool(skills_list, annotations=READ.model_copy(update={"title": "List skills"}))
    server.add_tool(skill_view, annotations=READ.model_copy(update={"title": "View a skill"}))
    server.add_tool(memory_read, annotations=READ.model_copy(update={"title": "Read memory"}))
    server.add_tool(
        memory_add,
        annotations=ToolAnnotations(
            title="Add to memory", read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
    _compact_registered(server)
