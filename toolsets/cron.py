"""The ``cron`` tool: the agent manages scheduled jobs from a chat, an editor or an MCP task.

Jobs it creates run in the session's project (run by ``hermes-gateway``'s scheduler) and
deliver to the chat the session is bound to, if any, and to the destinations the call names
(``deliver``: files the result is appended to, webhooks it is POSTed to). Creating, pausing or
removing a job changes state, so it asks the user first (the session's approval mode decides).
A destination outside the project (a file elsewhere, a webhook URL the model wrote) is a write
or a send the scheduler will repeat without asking, so it asks in every mode, names the path
or URL plainly and never offers "always"; in a chat only the bot's owner may name one (a paired
user answers their own questions, but the machine is not theirs). Files the project's tools
could not write without asking (``.git/``, ``.envrc``, secrets) are refused. A job's mode is
read-only unless the user approved one that may edit (``accept-edits``); nobody is present to
approve anything during a run.

A job belongs to the person whose turn made it in a chat (a person on several platforms is one,
their identities linked); the gateway's owner (any of the owner's identities) controls every job,
anyone else only their own. Outside a chat (no chat user) the tool acts for the owner, as the
CLI does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple

from pydantic import BaseModel, Field

from core.config import home
from core.paths import is_secret_path, protected_reason, within
from core.store import SessionStore
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.registry import ToolOutput, tool

if TYPE_CHECKING:
    from core.store.jobs import Destination, JobRecord

# The job store and the schedule parser (croniter, time zones) load when the tool is first called:
# most sessions never call it.

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
    deliver: list[str] | None = Field(
        default=None,
        description="for add: where each result also goes, besides the store and this chat (if any): 'file:PATH' (appended; "
        "relative to the project), 'webhook:URL' (http/https, POSTed as JSON) or 'webhook:NAME' (configured by the user); "
        "omit for the configured defaults, [] for none",
    )


def _title(args: CronArgs) -> str:
    return f"Cron: {args.action}" + (f" {args.job_id}" if args.job_id else "")


class _Chat(NamedTuple):
    """Who the tool acts for (a person; None: no chat user, the owner), and the place a new job's results go."""

    user: str | None
    chat_key: str | None


async def _chat_of(store: SessionStore, session_id: str) -> _Chat:
    from core.store.gateway import GatewayStore

    bound = await GatewayStore(store).session_chats(session_id)
    if not bound:
        return _Chat(None, None)
    users = {user for _, user in bound}
    if len(users) != 1 or None in users:
        raise ToolError(
            "This session is open in several chats (or no chat user is recorded for this turn), so it is not clear "
            "whose jobs these are; use /cron in the chat instead."
        )
    return _Chat(users.pop(), bound[0][0])


_NO_SCHEDULER = (
    "Warning: no scheduler is running, so this job will not run until one starts: the user should run `hermes-gateway run` "
    "(it needs no chat platform)."
)


def _destinations(ctx: ToolContext, given: list[str]) -> tuple[list[Destination], list[str]]:
    """The destinations the call named, and why each that reaches outside the project needs a question every time."""
    from core.store.jobs import DestinationError, parse_destination

    root = ctx.roots[0]
    found: list[Destination] = []
    outside: list[str] = []
    for text in given:
        try:
            dest = parse_destination(text, base=root)
        except DestinationError as exc:
            raise ToolError(str(exc)) from None
        if dest.kind == "file":
            path = Path(dest.value)
            if reason := protected_reason(path):
                raise ToolError(f"{path}: {reason}, so a job may not append to it. Nothing was scheduled; choose another file.")
            if is_secret_path(path):
                raise ToolError(f"{path} may hold secrets, so a job may not append to it. Nothing was scheduled; choose another file.")
            if not within(path, ctx.roots):
                outside.append(f"each run appends to {path}, outside the project")
        elif dest.named:
            if dest.value not in ctx.settings.cron.webhooks:
                known = ", ".join(sorted(ctx.settings.cron.webhooks)) or "none are configured"
                raise ToolError(
                    f"no webhook named {dest.value!r} ({known}); give an http(s) URL or ask the user to add [cron.webhooks.NAME]"
                )
        else:
            outside.append(f"each run's result is sent to {dest.value}")
        found.append(dest)
    return found, outside


def _where(job: JobRecord, ctx: ToolContext) -> str:
    """Where a job's results go, for the model and the user."""
    places = ["the store (`hermes-editor cron runs " + job.id + "`)"]
    if job.chat_key is not None:
        places.append("this chat")
    for dest in job.destinations(ctx.settings.cron.deliver):
        places.append(f"file {dest.value}" if dest.kind == "file" else f"webhook {dest.value}")
    return ", ".join(places)


@tool(kind="other", read_only=False, title=_title)
async def cron(ctx: ToolContext, args: CronArgs) -> ToolOutput:
    """List, add, pause, resume, remove or run scheduled jobs, or show a job's recent runs. Jobs run in this project;
    results are kept for `hermes-editor cron runs`, go to this chat if there is one, and to files or webhooks named in deliver."""
    from core.store.jobs import JobStore, scheduler_running
    from core.store.schedule import ScheduleError, fmt_time, local_zone, parse_schedule

    owners = ctx.settings.owners
    store = ctx.session_store()
    jobs = JobStore(store)
    chat = await _chat_of(store, ctx.session_id)
    if args.action == "list":
        found = [j for j in await jobs.list_jobs() if j.controlled_by(chat.user, owners)]
        if not found:
            return ToolOutput("No scheduled jobs of this user.")
        return ToolOutput(
            "\n".join(
                f"{j.id}  {j.name}  {j.parsed.describe()}  {'paused' if j.paused else 'next ' + fmt_time(j.next_run_at, j.timezone)}"
                f"  mode={j.mode}  results to: {_where(j, ctx)}"
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
        destinations, outside = _destinations(ctx, args.deliver) if args.deliver is not None else ([], [])
        if outside and chat.user is not None and chat.user not in owners:
            raise ToolError(
                "Only the bot's owner may send a job's results outside the project (a file elsewhere or a webhook URL): "
                f"{outside[0]}. Nothing was scheduled; use a file inside the project, or a webhook the owner configured."
            )
        title = f"Schedule '{args.prompt[:60]}' {schedule.describe()} (mode {args.mode}) in {ctx.roots[0]}"
        if destinations:
            title += "; results also go to " + ", ".join(
                f"file {d.value}" if d.kind == "file" else f"webhook {d.value}" for d in destinations
            )
        await ctx.approve_call(title, every_time="; ".join(outside))
        added = await jobs.add_job(
            name=(args.name or args.prompt)[:40],
            schedule=schedule,
            timezone=tz,
            prompt=args.prompt,
            project=str(ctx.roots[0]),
            mode=args.mode,
            chat_key=chat.chat_key,
            owner_id=chat.user,
            deliver=None if args.deliver is None else [d.spec for d in destinations],
        )
        text = f"Added job {added.id}: {schedule.describe()}, next {fmt_time(added.next_run_at, tz)}; results go to {_where(added, ctx)}."
        if not scheduler_running(home() / "gateway"):
            text += "\n" + _NO_SCHEDULER
        return ToolOutput(text)
    if not args.job_id:
        raise ToolError(f"{args.action} needs job_id")
    job = await jobs.get_job(args.job_id)
    if job is None:
        raise ToolError(f"no job {args.job_id}; list them with action=list")
    if not job.controlled_by(chat.user, owners):
        raise ToolError(
            f"job {args.job_id} belongs to another user: this user can see and control only the jobs they made "
            "(the bot's owner controls all). Nothing was changed; list theirs with action=list."
        )
    if args.action == "runs":
        runs = await jobs.runs(job.id, limit=5)
        if not runs:
            return ToolOutput(f"Job {job.id} has not run yet.")
        return ToolOutput(
            "\n".join(
                f"{fmt_time(r.scheduled_at, job.timezone)}  {r.status}  delivery {r.delivery_status}  {(r.error or r.result or '')[:500]}"
                for r in runs
            )
        )
    await ctx.approve_call(f"{args.action.capitalize()} job {args.job_id} ({job.name})")
    if args.action == "remove":
        await jobs.remove_job(args.job_id)
    elif args.action == "run":
        await jobs.request_run(args.job_id)
        if not scheduler_running(home() / "gateway"):
            return ToolOutput(f"Job {args.job_id}: queued; results go to {_where(job, ctx)}.\n{_NO_SCHEDULER}")
        return ToolOutput(f"Job {args.job_id}: queued; results go to {_where(job, ctx)}.")
    else:
        await jobs.set_paused(args.job_id, args.action == "pause")
    return ToolOutput(f"Job {args.job_id}: {args.action} done.")
