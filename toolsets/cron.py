"""The ``cron`` tool: the agent manages scheduled jobs from a gateway chat.

Jobs it creates run in the session's project and deliver to the chat the session is bound
to. Creating, pausing or removing a job changes state, so it asks the user first (the
session's approval mode decides). A job's mode is read-only unless the user approved one
that may edit (``accept-edits``); nobody is present to approve anything during a run.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from core.cron import ScheduleError, fmt_time, local_zone, parse_schedule
from core.tools import ToolContext, ToolError, ToolOutput, tool

__all__ = ["cron"]


class CronArgs(BaseModel):
    action: Literal["list", "add", "pause", "resume", "remove"]
    schedule: str | None = Field(
        default=None, description="for add: '0 9 * * 1-5', 'every 2h', 'daily at 09:00', 'weekdays at 9am', 'in 30m' or an ISO time"
    )
    prompt: str | None = Field(default=None, description="for add: what the agent should do at each run")
    name: str | None = Field(default=None, description="for add: a short label")
    mode: Literal["read-only", "accept-edits"] = Field(default="read-only", description="for add: what a run may do")
    job_id: str | None = Field(default=None, description="for pause, resume, remove")


def _title(args: CronArgs) -> str:
    return f"Cron: {args.action}" + (f" {args.job_id}" if args.job_id else "")


@tool(kind="other", read_only=False, toolsets={"gateway"}, title=_title)
async def cron(ctx: ToolContext, args: CronArgs) -> ToolOutput:
    """List, add, pause, resume or remove scheduled jobs; a run's reply is delivered to this chat."""
    from core.config import load_config
    from core.store import SessionStore
    from core.store.jobs import JobStore

    async with SessionStore.open() as store:
        jobs = JobStore(store)
        if args.action == "list":
            found = await jobs.list_jobs()
            if not found:
                return ToolOutput("No scheduled jobs.")
            return ToolOutput(
                "\n".join(
                    f"{j.id}  {j.name}  {j.parsed.describe()}  {'paused' if j.paused else 'next ' + fmt_time(j.next_run_at, j.timezone)}  mode={j.mode}"
                    for j in found
                )
            )
        if args.action == "add":
            if not args.schedule or not args.prompt:
                raise ToolError("add needs schedule and prompt")
            tz = load_config().cron.timezone or local_zone()
            try:
                schedule = parse_schedule(args.schedule, tz=tz)
            except ScheduleError as exc:
                raise ToolError(str(exc)) from None
            await ctx.approve_call(f"Schedule '{args.prompt[:60]}' {schedule.describe()} (mode {args.mode})")
            row = await store._fetchone("SELECT chat_key FROM gateway_chats WHERE session_id = ?", (ctx.session_id,))
            chat_id = thread_id = None
            if row is not None:
                chat, _, thread = str(row["chat_key"]).partition(":")
                chat_id, thread_id = int(chat), (int(thread) or None if thread else None)
            job = await jobs.add_job(
                name=(args.name or args.prompt)[:40],
                schedule=schedule,
                timezone=tz,
                prompt=args.prompt,
                project=str(ctx.roots[0]),
                mode=args.mode,
                chat_id=chat_id,
                thread_id=thread_id,
            )
            where = "this chat" if chat_id is not None else "nowhere (no chat is bound to this session; see `hermes-editor cron runs`)"
            return ToolOutput(f"Added job {job.id}: {schedule.describe()}, next {fmt_time(job.next_run_at, tz)}; results go to {where}.")
        if not args.job_id:
            raise ToolError(f"{args.action} needs job_id")
        if await jobs.get_job(args.job_id) is None:
            raise ToolError(f"no job {args.job_id}; list them with action=list")
        await ctx.approve_call(f"{args.action.capitalize()} job {args.job_id}")
        if args.action == "remove":
            await jobs.remove_job(args.job_id)
        else:
            await jobs.set_paused(args.job_id, args.action == "pause")
        return ToolOutput(f"Job {args.job_id}: {args.action} done.")
