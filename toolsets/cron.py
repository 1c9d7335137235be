"""The ``cron`` tool: the agent manages scheduled jobs from a gateway chat.

Jobs it creates run in the session's project and deliver to the chat the session is bound
to. Creating, pausing or removing a job changes state, so it asks the user first (the
session's approval mode decides). A job's mode is read-only unless the user approved one
that may edit (``accept-edits``); nobody is present to approve anything during a run.

A job belongs to the chat user whose turn made it; the gateway's owner (``[gateway] owner``)
controls every job, anyone else only their own. Outside a chat (no chat user) the tool acts for
the owner, as the CLI does.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

from core.store.schedule import ScheduleError, fmt_time, local_zone, parse_schedule
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.registry import ToolOutput, tool

__all__ = ["cron"]


class CronArgs(BaseModel):
    action: Literal["list", "add", "pause", "resume", "remove", "run", "runs"]
    schedule: str | None = Field(
        default=None, description="for add: '0 9 * * 1-5', 'every 2h', 'daily at 09:00', 'weekdays at 9am', 'in 30m' or an ISO time"
    )
    prompt: str | None = Field(default=None, description="for add: what the agent should do at each run")
    name: str | None = Field(default=None, description="for add: a short label")
    mode: Literal["read-only", "accept-edits"] = Field(default="read-only", description="for add: what a run may do")
    job_id: str | None = Field(default=None, description="for pause, resume, remove, run (now), runs (recent results)")


def _title(args: CronArgs) -> str:
    return f"Cron: {args.action}" + (f" {args.job_id}" if args.job_id else "")


class _Chat(NamedTuple):
    """Who the tool acts for (None: no chat user, the owner), and where a new job's results go."""

    user_id: int | None
    chat_id: int | None
    thread_id: int | None


async def _chat_of(store, session_id: str) -> _Chat:
    from core.store.gateway import GatewayStore

    bound = await GatewayStore(store).session_chats(session_id)
    if not bound:
        return _Chat(None, None, None)
    users = {user for _, user in bound}
    if len(users) != 1 or None in users:
        raise ToolError(
            "This session is open in several chats (or no chat user is recorded for this turn), so it is not clear "
            "whose jobs these are; use /cron in the chat instead."
        )
    chat, _, thread = bound[0][0].partition(":")
    return _Chat(users.pop(), int(chat), (int(thread) or None) if thread else None)


@tool(kind="other", read_only=False, title=_title)
async def cron(ctx: ToolContext, args: CronArgs) -> ToolOutput:
    """List, add, pause, resume, remove or run scheduled jobs, or show a job's recent runs; results go to this chat."""
    from core.store.jobs import JobStore

    owner = ctx.settings.owner
    store = ctx.session_store()
    jobs = JobStore(store)
    chat = await _chat_of(store, ctx.session_id)
    if args.action == "list":
        found = [j for j in await jobs.list_jobs() if j.controlled_by(chat.user_id, owner)]
        if not found:
            return ToolOutput("No scheduled jobs of this user.")
        return ToolOutput(
            "\n".join(
                f"{j.id}  {j.name}  {j.parsed.describe()}  {'paused' if j.paused else 'next ' + fmt_time(j.next_run_at, j.timezone)}  mode={j.mode}"
                for j in found
            )
        )
    if args.action == "add":
        if not args.schedule or not args.prompt:
            raise ToolError("add needs schedule and prompt")
        tz = ctx.settings.timezone or local_zone()
        try:
            schedule = parse_schedule(args.schedule, tz=tz)
        except ScheduleError as exc:
            raise ToolError(str(exc)) from None
        await ctx.approve_call(f"Schedule '{args.prompt[:60]}' {schedule.describe()} (mode {args.mode})")
        added = await jobs.add_job(
            name=(args.name or args.prompt)[:40],
            schedule=schedule,
            timezone=tz,
            prompt=args.prompt,
            project=str(ctx.roots[0]),
            mode=args.mode,
            chat_id=chat.chat_id,
            thread_id=chat.thread_id,
            owner_id=chat.user_id,
        )
        where = "this chat" if chat.chat_id is not None else "nowhere (no chat is bound to this session; see `hermes-editor cron runs`)"
        return ToolOutput(f"Added job {added.id}: {schedule.describe()}, next {fmt_time(added.next_run_at, tz)}; results go to {where}.")
    if not args.job_id:
        raise ToolError(f"{args.action} needs job_id")
    job = await jobs.get_job(args.job_id)
    if job is None:
        raise ToolError(f"no job {args.job_id}; list them with action=list")
    if not job.controlled_by(chat.user_id, owner):
        raise ToolError(
            f"job {args.job_id} belongs to another user: this user can see and control only the jobs they made "
            "(the bot's owner controls all). Nothing was changed; list theirs with action=list."
        )
    if args.action == "runs":
        runs = await jobs.runs(job.id, limit=5)
        if not runs:
            return ToolOutput(f"Job {job.id} has not run yet.")
        return ToolOutput(
            "\n".join(f"{fmt_time(r.scheduled_at, job.timezone)}  {r.status}  {(r.error or r.result or '')[:500]}" for r in runs)
        )
    await ctx.approve_call(f"{args.action.capitalize()} job {args.job_id} ({job.name})")
    if args.action == "remove":
        await jobs.remove_job(args.job_id)
    elif args.action == "run":
        await jobs.request_run(args.job_id)
    else:
        await jobs.set_paused(args.job_id, args.action == "pause")
    return ToolOutput(f"Job {args.job_id}: {args.action} done.")
