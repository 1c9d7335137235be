"""The one path that dispatches every call: validate once, run, turn every failure into a result the model reads."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from core.events import DiffContent, Location, ToolContent, ToolKind
from core.host.questions import host_questions
from core.messages import ToolCallPart, ToolResultMessage
from core.redaction import scrub
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.registry import Tool, ToolOutput

__all__ = ["PreparedCall", "ToolRun", "prepare", "run_prepared", "run_tool"]

log = logging.getLogger(__name__)


def _format_validation(tool_name: str, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        problems.append(f"{loc}: {err['msg']}")
    return f"Invalid arguments for {tool_name}: " + "; ".join(problems)


@dataclass(slots=True)
class PreparedCall:
    """A call with its arguments validated once: the tool, the parsed arguments or why it cannot run,
    its title and the absolute paths it touches."""

    call: ToolCallPart
    tool: Tool | None
    args: BaseModel | None
    error: str | None
    title: str
    paths: list[Path]

    @property
    def kind(self) -> ToolKind:
        return self.tool.kind if self.tool is not None else "other"

    @property
    def read_only(self) -> bool:
        return self.tool is not None and self.tool.read_only

    @property
    def locations(self) -> list[Location]:
        """Where the call will touch, for the editor to follow."""
        return [Location(str(p)) for p in self.paths]


def shown_path(host: object, path: str | Path) -> str:
    """A path as the user sees it in a diff: the host's path for it (another machine's files go by
    their path there); tool call locations keep the session's own path, which the editor opens."""
    display = getattr(host, "display_path", None)
    return display(path) if callable(display) else str(path)


_WHERE_KINDS = ("read", "edit", "delete", "move", "search", "execute")


def prepare(tools: dict[str, Tool], call: ToolCallPart, ctx: ToolContext) -> PreparedCall:
    """Find the tool and validate the arguments, once; the title and paths come from the parsed arguments."""
    found = tools.get(call.name)
    if found is None:
        error = f"Unknown tool '{call.name}'. Available tools: {', '.join(sorted(tools))}."
        return PreparedCall(call, None, None, error, call.name, [])
    args: BaseModel | None = None
    problem: str | None = None
    try:
        args = found.args_model.model_validate(call.arguments)
    except ValidationError as exc:
        problem = _format_validation(call.name, exc)
    if call.invalid_arguments is not None:
        problem = (
            f"The arguments for {call.name} were not a valid JSON object: {call.invalid_arguments[:200]!r}. "
            "Call the tool again with valid JSON arguments."
        )
    title, paths = call.name, []
    if args is not None:
        try:
            title = found.title(args)
        except Exception:
            pass
        where = getattr(ctx.host, "where", None)  # a host other than this machine names itself
        if isinstance(where, str) and where and found.kind in _WHERE_KINDS:
            title = f"{title} ({where})"
        try:
            paths = [ctx.resolve(p) for p in found.paths(args)]
        except Exception:
            paths = []
    return PreparedCall(call, found, args, problem, title, paths)


@dataclass(slots=True)
class ToolRun:
    """The outcome of one dispatched call."""

    result: ToolResultMessage
    content: list[ToolContent]
    failed: bool


async def run_prepared(prepared: PreparedCall, ctx: ToolContext) -> ToolRun:
    """Run a prepared call; every failure becomes a result the model reads."""
    call, found = prepared.call, prepared.tool

    def fail(message: str) -> ToolRun:
        return ToolRun(
            ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=scrub(message), is_error=True),
            [],
            True,
        )

    if prepared.error is not None or found is None or prepared.args is None:
        return fail(prepared.error or f"Unknown tool '{call.name}'.")
    ctx.tool_name, ctx.tool_kind = found.name, found.kind
    ctx.call_id = call.id
    asking = host_questions.set(ctx.ask_yes_no)
    try:
        output = await found.func(ctx, prepared.args)
    except ToolError as exc:
        return fail(str(exc))
    except asyncio.CancelledError:
        raise
    except (OSError, UnicodeError) as exc:
        return fail(f"{call.name} failed: {exc}")
    except Exception as exc:  # a bug in a tool must not end the turn
        log.exception("tool %s crashed", call.name)
        return fail(f"{call.name} failed unexpectedly: {type(exc).__name__}: {exc}")
    finally:
        host_questions.reset(asking)
    if isinstance(output, str):
        output = ToolOutput(output)
    content = list(output.content) or [DiffContent(shown_path(ctx.host, d.path), d.old_text, d.new_text) for d in output.diffs]
    return ToolRun(
        ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=scrub(output.text), diffs=list(output.diffs)),
        content,
        False,
    )


async def run_tool(tools: dict[str, Tool], call: ToolCallPart, ctx: ToolContext) -> ToolRun:
    """Prepare and run one call."""
    return await run_prepared(prepare(tools, call, ctx), ctx)
