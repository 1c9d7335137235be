"""The one path that dispatches every call: validate, run, turn every failure into a result the model reads."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from pydantic import ValidationError

from core.events import DiffContent, Location, ToolContent
from core.messages import ToolCallPart, ToolResultMessage
from core.redaction import scrub
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.registry import Tool, ToolOutput

__all__ = ["ToolRun", "run_tool", "tool_locations", "tool_title"]

log = logging.getLogger(__name__)


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
            ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=scrub(message), is_error=True),
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
    ctx.tool_name, ctx.tool_kind = found.name, found.kind
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
        ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=scrub(output.text), diffs=list(output.diffs)),
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
