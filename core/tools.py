"""Tools: typed async functions with metadata, and the one path that dispatches them all."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from core.approvals import Action, ApprovalBroker, ApprovalPolicy, ApprovalRequest, Decision
from core.events import DiffContent, Event, Location, PermissionNeeded, ToolContent, ToolKind, ToolUpdated
from core.host import Host
from core.messages import FileDiff, ToolCallPart, ToolResultMessage
from core.models.base import ToolSpec

__all__ = [
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "ToolRejected",
    "run_tool",
    "tool",
]

log = logging.getLogger(__name__)


class ToolError(Exception):
    """A failure the model should read and can act on."""


class ToolRejected(ToolError):
    """The user (or the policy) said no."""


@dataclass(slots=True)
class ToolOutput:
    """What a tool returns: text for the model, content and diffs for the user."""

    text: str
    content: list[ToolContent] = field(default_factory=list)
    diffs: list[FileDiff] = field(default_factory=list)


ToolFunc = Callable[["ToolContext", Any], Awaitable["ToolOutput | str"]]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    func: ToolFunc
    kind: ToolKind
    read_only: bool
    toolsets: frozenset[str]
    # A short human title from the arguments, e.g. "Read src/app.py".
    title: Callable[[Any], str]
    # Paths the call touches, relative ones resolved against the session cwd.
    paths: Callable[[Any], list[str]]

    def spec(self) -> ToolSpec:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return ToolSpec(self.name, self.description, schema)


def tool(
    *,
    kind: ToolKind,
    read_only: bool,
    toolsets: Iterable[str],
    title: Callable[[Any], str] | None = None,
    paths: Callable[[Any], list[str]] | None = None,
) -> Callable[[ToolFunc], Tool]:
    """Make a Tool of ``async def name(ctx, args: ArgsModel)``; its docstring is the description."""

    def wrap(func: ToolFunc) -> Tool:
        args_model = func.__annotations__.get("args")
        if isinstance(args_model, str):
            args_model = func.__globals__[args_model]
        return Tool(
            name=func.__name__,
            description=(func.__doc__ or "").strip(),
            args_model=args_model,
            func=func,
            kind=kind,
            read_only=read_only,
            toolsets=frozenset(toolsets),
            title=title or (lambda _args, _n=func.__name__: _n),
            paths=paths or (lambda _args: []),
        )

    return wrap


@dataclass(slots=True)
class ToolContext:
    """What a running tool may use: the session's host, roots, approvals and the event sink."""

    session_id: str
    cwd: Path
    roots: list[Path]
    host: Host
    policy: ApprovalPolicy
    broker: ApprovalBroker
    emit: Callable[[Event], Awaitable[None]]
    call_id: str = ""
    tool: Tool | None = None
    remember_rule: Callable[[str, str, str], Awaitable[None]] | None = None
    _approved: set[Path] = field(default_factory=set)
    _command_approved: str | None = None
    _running: bool = False

    def resolve(self, path: str) -> Path:
        """An absolute, resolved path (symlinks and '..' followed) for a path the model gave."""
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.cwd / candidate
        return candidate.resolve()

    async def show(self, content: list[ToolContent]) -> None:
        """Show content in this tool call while it runs."""
        await self.emit(ToolUpdated(self.call_id, content=content))

    async def check_read(self, path: Path) -> None:
        """Ask before reading outside the project or a secret; allow the rest."""
        await self._gate(Action(self._name, self._kind, True, (path,)), title=f"Read {path}")

    async def approve_change(self, title: str, diffs: list[FileDiff]) -> None:
        """Ask before writing ``diffs`` (shown to the user); raises ToolRejected on no."""
        paths = tuple(Path(d.path) for d in diffs)
        await self._gate(Action(self._name, self._kind, False, paths), title=title, diffs=diffs)
        self._approved.update(paths)

    async def approve_command(self, command: str, cwd: Path) -> None:
        """Ask before running ``command``; raises ToolRejected on no."""
        action = Action(self._name, "execute", False, (cwd,), command)
        await self._gate(action, title=f"Run `{command}`", command=command)
        self._command_approved = command

    async def approve_call(self, title: str, detail: str = "") -> None:
        """Ask before a call that changes something outside files and commands (e.g. an MCP tool)."""
        action = Action(self._name, self._kind, False, ())
        await self._gate(action, title=title, command=None, detail=detail or None)

    async def write_text(self, path: Path, content: str) -> None:
        """Write through the host; only paths approved in this call may be written."""
        if path not in self._approved:
            raise ToolError(f"internal error: {path} was written without approval")
        await self.host.write_text(path, content)

    async def run_command(self, command: str, cwd: Path, *, timeout: float, output_limit: int):
        if self._command_approved != command:
            raise ToolError("internal error: command run without approval")
        return await self.host.run_command(command, cwd, timeout=timeout, output_limit=output_limit, show=self.show)

    @property
    def _name(self) -> str:
        return self.tool.name if self.tool else "?"

    @property
    def _kind(self) -> str:
        return self.tool.kind if self.tool else "other"

    async def _gate(
        self,
        action: Action,
        *,
        title: str,
        diffs: list[FileDiff] | None = None,
        command: str | None = None,
        detail: str | None = None,
    ) -> None:
        verdict, reason = self.policy.decide(action)
        if verdict == "allow":
            return await self._mark_running()
        if verdict == "refuse":
            raise ToolRejected(f"Not allowed: {reason}.")
        request = await self.broker.open(
            ApprovalRequest(
                session_id=self.session_id,
                tool_call_id=self.call_id,
                tool_name=action.tool,
                tool_kind=action.kind,
                title=title,
                reason=detail or reason,
                diffs=list(diffs or []),
                command=command,
                paths=[str(p) for p in action.paths],
            )
        )
        await self.emit(PermissionNeeded(request))
        decision = await self.broker.wait(request)
        if decision in (Decision.ALLOW_ALWAYS, Decision.REJECT_ALWAYS) and self.remember_rule is not None:
            rule_tool, pattern = self.policy.rule_key(action)
            verdict_word = "allow" if decision.allowed else "deny"
            # Secrets and paths outside the project ask every time; "always" would be surprising there.
            if not reason.endswith(("may hold secrets", "outside the project")):
                self.policy.rules.insert(0, (rule_tool, pattern, verdict_word))
                await self.remember_rule(rule_tool, pattern, verdict_word)
        if decision is Decision.CANCELLED:
            raise ToolRejected("The approval request was cancelled or timed out; nothing was changed.")
        if not decision.allowed:
            raise ToolRejected(
                "The user rejected this action; nothing was changed. Do not retry it as is: "
                "ask the user what they would like instead, or try a different approach."
            )
        await self._mark_running()

    async def _mark_running(self) -> None:
        """Pending (awaiting approval) becomes in progress once the call may go ahead."""
        if not self._running:
            self._running = True
            await self.emit(ToolUpdated(self.call_id))


def _format_validation(tool_name: str, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        problems.append(f"{loc}: {err['msg']}")
    return f"Invalid arguments for {tool_name}: " + "; ".join(problems)


@dataclass(slots=True)
class ToolRun:
    """The outcome of one dispatched call."""

    result: ToolResultMessage
    content: list[ToolContent]
    failed: bool


async def run_tool(tools: dict[str, Tool], call: ToolCallPart, ctx: ToolContext) -> ToolRun:
    """The one dispatch path: validate, run, turn every failure into a result the model reads."""
    found = tools.get(call.name)

    def fail(message: str) -> ToolRun:
        return ToolRun(
            ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=message, is_error=True),
            [],
            True,
        )

    if found is None:
        return fail(f"Unknown tool '{call.name}'. Available tools: {', '.join(sorted(tools))}.")
    if call.invalid_arguments is not None:
        return fail(
            f"The arguments for {call.name} were not a valid JSON object: {call.invalid_arguments[:200]!r}. "
            "Call the tool again with valid JSON arguments."
        )
    try:
        args = found.args_model.model_validate(call.arguments)
    except ValidationError as exc:
        return fail(_format_validation(call.name, exc))
    ctx.tool = found
    ctx.call_id = call.id
    try:
        output = await found.func(ctx, args)
    except ToolError as exc:
        return fail(str(exc))
    except asyncio.CancelledError:
        raise
    except (OSError, UnicodeError) as exc:
        return fail(f"{call.name} failed: {exc}")
    except Exception as exc:  # a bug in a tool must not end the turn
        log.exception("tool %s crashed", call.name)
        return fail(f"{call.name} failed unexpectedly: {type(exc).__name__}: {exc}")
    if isinstance(output, str):
        output = ToolOutput(output)
    content = list(output.content) or [DiffContent(d.path, d.old_text, d.new_text) for d in output.diffs]
    return ToolRun(
        ToolResultMessage(
            tool_call_id=call.id, tool_name=call.name, content=output.text, diffs=list(output.diffs)
        ),
        content,
        False,
    )


def tool_locations(found: Tool | None, args: dict, ctx: ToolContext) -> list[Location]:
    """Absolute locations a call will touch, for the editor to follow."""
    if found is None:
        return []
    try:
        parsed = found.args_model.model_validate(args)
        return [Location(str(ctx.resolve(p))) for p in found.paths(parsed)]
    except Exception:
        return []


def tool_title(found: Tool | None, name: str, args: dict) -> str:
    if found is None:
        return name
    try:
        return found.title(found.args_model.model_validate(args))
    except Exception:
        return name
