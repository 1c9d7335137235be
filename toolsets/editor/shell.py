"""Run a command. Always approved first (unless a rule or the mode allows it); output is capped."""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.tools import ToolContext, ToolError, ToolOutput, tool

__all__ = ["run_command"]

OUTPUT_LIMIT = 30_000


class RunCommandArgs(BaseModel):
    command: str = Field(description="shell command line")
    cwd: str = Field(default=".", description="working directory")
    timeout: float = Field(default=120, gt=0, le=1800, description="seconds")


@tool(
    kind="execute",
    read_only=False,
    toolsets={"editor", "gateway", "cron"},
    title=lambda a: a.command if len(a.command) <= 80 else a.command[:79] + "…",
    paths=lambda a: [a.cwd],
)
async def run_command(ctx: ToolContext, args: RunCommandArgs) -> ToolOutput:
    """Run a shell command in the project and return its exit code and output (stdout+stderr)."""
    cwd = ctx.resolve(args.cwd)
    if not cwd.is_dir():
        raise ToolError(f"{cwd} is not a directory.")
    await ctx.approve_command(args.command, cwd)
    result = await ctx.run_command(args.command, cwd, timeout=args.timeout, output_limit=OUTPUT_LIMIT)
    if result.timed_out:
        status = f"timed out after {args.timeout:g}s and was stopped"
    elif result.signal:
        status = f"killed by {result.signal}"
    else:
        status = f"exit code {result.exit_code}"
    body = result.output.rstrip("\n") or "(no output)"
    if result.truncated:
        body += f"\n[output cut at {OUTPUT_LIMIT} bytes]"
    text = f"{status}\n{body}"
    if result.exit_code not in (0, None) or result.timed_out or result.signal:
        raise ToolError(text)
    return ToolOutput(text)
