"""Commands: run one (approved first, unless a rule or the mode allows it), or start a server in
the background and read or stop it later. Output keeps its head and tail; the exit code or the
signal is always reported."""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.host.processes import CommandResult
from core.host.sandbox import Grants
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.registry import ToolOutput, tool

__all__ = ["command_output", "run_command", "stop_command"]

OUTPUT_LIMIT = 30_000
BACKGROUND_LIMIT = 200_000  # kept per background command between reads
READ_LIMIT = 30_000


class RunCommandArgs(BaseModel):
    command: str = Field(description="shell command line")
    cwd: str = "."
    timeout: float = Field(default=120, gt=0, le=1800, description="seconds")
    background: bool = Field(default=False, description="for servers: return at once; see command_output")
    network: bool = Field(default=False, description="it needs the network (the user is asked)")
    write_paths: list[str] = Field(
        default_factory=list, description="paths outside the project, or protected ones, it must write (the user is asked)"
    )
    sandbox: bool = Field(default=True, description="false: run outside the sandbox with full access (the user is always asked)")


def _title(args: RunCommandArgs) -> str:
    text = args.command if len(args.command) <= 80 else args.command[:79] + "…"
    return text + (" (background)" if args.background else "")


@tool(kind="execute", read_only=False, title=_title, paths=lambda a: [a.cwd])
async def run_command(ctx: ToolContext, args: RunCommandArgs) -> ToolOutput:
    """Run a shell command in the project; returns exit code and output (stdout+stderr).

    It runs in a sandbox: the project is writable, the rest of the disk read-only, credentials
    and secret files (.env, keys) hidden, no network. Ask for more with network, write_paths or
    sandbox=false."""
    cwd = ctx.resolve(args.cwd)
    remote = getattr(ctx.host, "remote_files", None)  # another machine's files
    if not (await remote.kind_of(cwd) == "dir" if remote is not None else cwd.is_dir()):
        raise ToolError(f"{cwd} is not a directory.")
    wants = Grants(network=args.network, writable=tuple(ctx.resolve(p) for p in args.write_paths), unconfined=not args.sandbox)
    await ctx.approve_command(args.command, cwd, wants)
    if args.background:
        job = await ctx.start_command(args.command, cwd, output_limit=BACKGROUND_LIMIT)
        return ToolOutput(
            f"Started in the background as job {job.id}. Read its output with command_output(job={job.id}); "
            f"stop it with stop_command(job={job.id})."
        )
    result, note = await ctx.run_command(args.command, cwd, timeout=args.timeout, output_limit=OUTPUT_LIMIT)
    text = _report(result, timeout=args.timeout) + note
    if result.exit_code not in (0, None) or result.timed_out or result.signal:
        raise ToolError(text)
    return ToolOutput(text)


def _status(result: CommandResult, timeout: float | None = None) -> str:
    if result.timed_out:
        return f"timed out after {timeout:g}s and was stopped"
    if result.signal:
        return f"killed by {result.signal}"
    return f"exit code {result.exit_code}"


def _report(result: CommandResult, *, timeout: float | None = None) -> str:
    body = result.output.rstrip("\n") or "(no output)"
    if result.truncated and result.omitted == 0:
        body = f"[output cut: only the last {OUTPUT_LIMIT} bytes were kept]\n{body}"
    return f"{_status(result, timeout)}\n{body}"


class JobArgs(BaseModel):
    job: str = Field(description="id from run_command")


class CommandOutputArgs(JobArgs):
    wait: float = Field(default=0, ge=0, le=60, description="seconds to wait for new output")


def _job(ctx: ToolContext, job_id: str):
    job = ctx.host.jobs.get(str(job_id))
    if job is None:
        running = ", ".join(sorted(ctx.host.jobs)) or "none"
        raise ToolError(f"No background command {job_id!r} in this session (running: {running}).")
    return job


@tool(kind="execute", read_only=True, title=lambda a: f"Output of job {a.job}")
async def command_output(ctx: ToolContext, args: CommandOutputArgs) -> ToolOutput:
    """New output of a background command since the last read, and whether it still runs."""
    job = _job(ctx, args.job)
    text, result = await job.read(args.wait)
    if len(text) > READ_LIMIT:
        text = f"[... {len(text) - READ_LIMIT} characters omitted ...]\n" + text[-READ_LIMIT:]
    if result is None:
        return ToolOutput(f"running\n{text.rstrip() or '(no new output)'}")
    ctx.host.jobs.pop(job.id, None)
    await job.stop()  # releases what it holds (an editor terminal)
    note = await ctx.after_background(job)
    return ToolOutput(f"ended, {_status(result)}\n{text.rstrip() or '(no new output)'}{note}")


@tool(kind="execute", read_only=False, title=lambda a: f"Stop job {a.job}")
async def stop_command(ctx: ToolContext, args: JobArgs) -> ToolOutput:
    """Stop a background command (and everything it started)."""
    job = _job(ctx, args.job)
    ctx.host.jobs.pop(job.id, None)
    result = await job.stop()
    note = await ctx.after_background(job)
    return ToolOutput(f"stopped ({_status(result)})\n{result.output.rstrip() or '(no new output)'}{note}")
