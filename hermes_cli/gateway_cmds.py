"""``hermes-editor gateway status``, ``pairing ...`` and ``cron ...``: the gateway's admin side.

Users are identities, ``platform:id`` (``telegram:123``, ``discord:456``, ``email:ada@example.org``),
and chats place keys, ``platform:chat:thread`` (``discord:123:0``); a bare number typed where a
user or a chat is asked for is a Telegram id, as it always was.

These read and write the shared store and the gateway's status files; they never talk to a
running gateway directly (a queued ``cron run`` is picked up by its next scheduler pass).
``cron add`` and ``cron run`` warn when no scheduler is running (no gateway lock is held).
``cron add --deliver`` names a job's destinations besides the store and its chat (files,
webhooks); ``cron list`` shows them and ``cron runs`` how each run fared at each.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from hermes_cli.json_out import add_json_flag, emit, iso

__all__ = ["add_parsers", "run"]

# A pairing code is approved by a prefix of at least this many of its characters: a slip of
# the keyboard then hardly ever lands on a stranger's waiting code.
CODE_PREFIX = 4


def add_parsers(commands: Any) -> None:
    """Register the ``gateway``, ``pairing`` and ``cron`` subcommands."""
    gateway = commands.add_parser("gateway", help="the chat gateway: status")
    gateway.add_argument(
        "action", nargs="?", default="status", choices=["status"], help="status: is it running, and what is it doing (the default)"
    )
    add_json_flag(gateway, "print one JSON array, an object per gateway (its status file, with running and times in ISO 8601)")

    pairing = commands.add_parser("pairing", help="approve chat users (any platform) who asked to pair")
    pairing.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=["list", "approve", "reject", "users", "revoke"],
        help="list (the default): waiting requests; users: who is paired, and the identities linked to them",
    )
    pairing.add_argument(
        "value",
        nargs="?",
        help=f"the CODE (approve, reject; or a unique prefix of {CODE_PREFIX}+ characters) or the USER (revoke: platform:id "
        "such as discord:456, a number for a Telegram user id, or a unique prefix)",
    )
    add_json_flag(pairing)

    cron = commands.add_parser("cron", help="scheduled jobs run by hermes-gateway")
    add_json_flag(cron)
    verbs = cron.add_subparsers(dest="cron_action", metavar="ACTION")
    add = verbs.add_parser("add", help="add a job: cron add SCHEDULE PROMPT --project PATH [--chat ID] [--deliver DEST]")
    add.add_argument("schedule", help="'0 9 * * 1-5', 'every 2h', 'daily at 09:00', 'weekdays at 9am', 'in 30m', or ISO time")
    add.add_argument("prompt", help="what the agent does at each run")
    add.add_argument("--project", default=".", help="the project directory (default: here)")
    add.add_argument(
        "--chat",
        help="the chat the results go to: platform:chat:thread (thread 0 for none, e.g. discord:123:0) or a Telegram chat id "
        "(default: the owner's Telegram chat, when [gateway] owner is a Telegram id)",
    )
    add.add_argument("--name", help="a short label")
    add.add_argument("--mode", default="read-only", choices=["read-only", "ask", "accept-edits", "auto"])
    add.add_argument("--tz", help="IANA time zone (default: [cron] timezone or the system's)")
    add.add_argument(
        "--deliver",
        action="append",
        metavar="DEST",
        help="also send each result to file:PATH (appended) or webhook:URL|NAME (POSTed as JSON); repeatable; "
        "'none': not even the [cron] deliver defaults (default: those defaults)",
    )
    add_json_flag(verbs.add_parser("list", help="jobs, their next run, and the catch-up policy (the default)"))
    for verb in ("pause", "resume", "remove", "run"):
        verbs.add_parser(verb, help=f"{verb} a job").add_argument("job_id", help="a job id, or a unique prefix of one")
    runs = verbs.add_parser("runs", help="recent runs and their delivery")
    runs.add_argument("job_id", nargs="?", help="only this job's runs (an id, or a unique prefix of one)")
    runs.add_argument("--limit", type=int, default=20)
    add_json_flag(runs)


def run(args: argparse.Namespace) -> int:
    if args.command == "gateway":
        return _gateway_status_json() if args.json else gateway_status()
    if args.command == "pairing":
        return asyncio.run(_pairing(args.action, args.value, as_json=args.json))
    return asyncio.run(_cron(args))


def _when(epoch: float | None) -> str:
    return "-" if epoch is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def _gateway_status_json() -> int:
    """``gateway status --json``: each gateway's status file with ``name`` and ``running``; exit 0 when one runs."""
    from core.config import home
    from hermes_cli.redact import redact

    rows = []
    for path in _status_files(home() / "gateway"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        rows.append({"name": path.stem, "running": _lock_held(path.with_suffix(".lock")), **_iso_times(data)})
    sys.stdout.write(redact(json.dumps(rows, ensure_ascii=False, indent=2)) + "\n")
    return 0 if any(row["running"] for row in rows) else 1


def _iso_times(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its epoch times (keys ending in _at, and heartbeat) as ISO 8601, nested tables too."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out[key] = _iso_times(value)
        elif (key.endswith("_at") or key == "heartbeat") and isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = iso(value)
        else:
            out[key] = value
    return out


def gateway_status() -> int:
    """Print each bot's gateway: running (its lock is held) or not, and its last heartbeat."""
    from core.config import home

    files = _status_files(home() / "gateway")
    if not files:
        print("No gateway has run yet. Start one with: hermes-gateway run")
        return 1
    any_running = False
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        running = _lock_held(path.with_suffix(".lock"))
        any_running |= running
        state = "running" if running else "not running"
        if path.stem == "scheduler":
            print(f"{path.stem}: {state} (pid {data.get('pid')}, no platform: scheduled jobs only)")
            print(f"  started {_when(data.get('started_at'))}, last heartbeat {_when(data.get('heartbeat'))}")
            if running:
                print(f"  cron: runs in flight {data.get('cron_runs_running', 0)}, catch-up window {int(data.get('catch_up_grace') or 0)}s")
            continue
        platforms = _platforms(data)
        accounts = ", ".join(f"{name} {p.get('account') or '?'}" for name, p in platforms.items()) or "no platform connected yet"
        mode = f", {data['mode']}" if data.get("mode") else ""
        print(f"{path.stem}: {state} (pid {data.get('pid')}, {accounts}{mode})")
        print(f"  started {_when(data.get('started_at'))}, last heartbeat {_when(data.get('heartbeat'))}")
        for name, platform in platforms.items():
            if running and platform.get("state") != "connected":
                # Unreachable or refusing: the gateway retries it; the other platforms and the jobs go on.
                line = f"  {name}: {platform.get('state')}"
                if platform.get("attempts"):
                    line += f" (failed {platform['attempts']} times, next try {_when(platform.get('retry_at'))}): {platform.get('error')}"
                print(line)
        if running:
            print(f"  projects: {', '.join(data.get('projects') or [])}; turns running: {data.get('turns_running', 0)}")
            print(
                f"  cron: {'on' if data.get('cron_enabled') else 'off'}, runs in flight {data.get('cron_runs_running', 0)}, "
                f"catch-up window {int(data.get('catch_up_grace') or 0)}s; remote approvals "
                f"{'on' if data.get('remote_approvals') else 'off'}; last update {_when(data.get('last_update_at'))}"
            )
    return 0 if any_running else 1


def _platforms(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each platform's state in a status file (``platforms``; older gateways wrote ``telegram`` and ``bot``)."""
    found = data.get("platforms")
    if isinstance(found, dict):
        return {name: p for name, p in found.items() if isinstance(p, dict)}
    telegram = data.get("telegram")
    if isinstance(telegram, dict) or data.get("bot"):
        return {"telegram": {"account": f"@{data['bot']}" if data.get("bot") else "", **(telegram if isinstance(telegram, dict) else {})}}
    return {}


def _status_files(directory: Path) -> list[Path]:
    """The status files of gateways that have run: one per bot, and ``scheduler.json`` for a scheduler-only one."""
    if not directory.is_dir():
        return []
    return sorted([*directory.glob("bot-*.json"), *directory.glob("scheduler.json")])


def scheduler_running() -> bool:
    """Whether a gateway with its scheduler on is running (its lock is held), by the test ``gateway status`` uses."""
    from core.config import home
    from core.store.jobs import scheduler_running as running_in

    return running_in(home() / "gateway")


def _warn_without_scheduler() -> None:
    if not scheduler_running():
        print(
            "hermes-editor: warning: no scheduler is running, so jobs will not run until one starts: hermes-gateway run",
            file=sys.stderr,
        )


def _lock_held(path: Path) -> bool:
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


async def _pairing(action: str, value: str | None, *, as_json: bool = False) -> int:
    from core.config import load_config
    from core.store import SessionStore
    from core.store.gateway import GatewayStore
    from surface_support.pairing import Pairing, configured_identities

    async with SessionStore.open() as store:
        gateway = GatewayStore(store)
        pairing = Pairing(gateway, configured_identities(load_config()))
        if action == "list":
            codes = await pairing.pending()
            if as_json:
                return emit(
                    [
                        {
                            "code": c.code,
                            "user_id": c.user_id,
                            "name": c.name,
                            "chat_key": c.chat_key,
                            "created_at": iso(c.created_at),
                            "expires_at": iso(c.expires_at),
                        }
                        for c in codes
                    ]
                )
            if not codes:
                print("No pairing requests waiting.")
            for code in codes:
                print(f"{code.code}  user {code.user_id} ({code.name or '?'})  expires {_when(code.expires_at)}")
            return 0
        if action == "users":
            return await _pairing_users(gateway, as_json=as_json)
        if not value:
            print(f"pairing {action} needs a value (see --help).")
            return 2
        if action in ("approve", "reject"):
            return await _answer_code(pairing, gateway, action, value)
        return await _revoke(gateway, value)


async def _pairing_users(gateway: Any, *, as_json: bool) -> int:
    """``pairing users``: the paired identities, then those linked to a person (who they are linked to)."""
    paired = await gateway.users()
    links = await gateway.links()
    if as_json:
        persons = {identity: person for identity, person, _ in links}
        linked_at = {identity: at for identity, _, at in links}
        rows = [
            {
                "user_id": user_id,
                "name": name,
                "paired_at": iso(at),
                "person": persons.get(user_id, user_id),
                "linked_at": iso(linked_at.get(user_id)),
            }
            for user_id, name, at in paired
        ]
        shown = {user_id for user_id, _, _ in paired}
        rows += [
            {"user_id": identity, "name": None, "paired_at": None, "person": person, "linked_at": iso(at)}
            for identity, person, at in links
            if identity not in shown
        ]
        return emit(rows)
    if not paired and not links:
        print("Nobody is paired (configured ids are in config.toml).")
    for user_id, name, at in paired:
        print(f"{user_id}  {name or '?'}  paired {_when(at)}")
    for identity, person, at in links:
        print(f"{identity}  linked to {person} {_when(at)}")
    return 0


async def _answer_code(pairing: Any, gateway: Any, action: str, value: str) -> int:
    """``pairing approve|reject CODE`` (or a unique prefix of a waiting code)."""
    from hermes_cli.ids import IdError, resolve
    from surface_support.pairing import PairingError, normalise

    # A unique prefix of a waiting code names it; a code that matches none goes on as typed,
    # so a wrong one counts towards the lock-out as before.
    waiting = {c.code: c for c in await pairing.pending()}
    candidates = [(c.code, f"user {c.user_id} ({c.name or '?'})") for c in waiting.values()]
    try:
        value = resolve(normalise(value), candidates, what="pending pairing code", listing="pairing list", min_length=CODE_PREFIX)
    except IdError as exc:
        if exc.matches or len(normalise(value)) < CODE_PREFIX:
            print(exc)
            return 1
    if action == "reject":
        print("Rejected." if await gateway.reject_code(normalise(value)) else "No such pending code.")
        return 0
    try:
        identity = await pairing.approve(value)
    except PairingError as exc:
        print(exc)
        return 1
    asked = waiting.get(normalise(value))
    print(f"Approved: user {identity} ({asked.name if asked and asked.name else '?'}) may now use the bot.")
    return 0


async def _revoke(gateway: Any, value: str) -> int:
    """``pairing revoke USER``: an identity (discord:456), a number (a Telegram user id) or a unique prefix."""
    from core.store.gateway import identity_of
    from hermes_cli.ids import IdError, resolve

    try:
        ref = identity_of(value)
    except ValueError as exc:
        ref = value.strip()
        if not ref:
            print(exc)
            return 2
    users = [(user_id, name or "?") for user_id, name, _ in await gateway.users()]
    known = {user_id for user_id, _ in users}
    users += [(identity, f"linked to {person}") for identity, person, _ in await gateway.links() if identity not in known]
    try:
        user = resolve(ref, users, what="paired user", listing="pairing users")
    except IdError as exc:
        print(exc if exc.matches else f"{ref} was not paired (configured ids are changed in config.toml).")
        return 1
    print(f"Revoked user {user}." if await gateway.revoke_user(user) else f"{user} was not paired.")
    return 0


async def _cron(args: argparse.Namespace) -> int:
    from core.config import load_config
    from core.store import SessionStore
    from core.store.jobs import JobStore
    from core.store.schedule import ScheduleError, fmt_time, local_zone, parse_schedule

    config = load_config()
    action = args.cron_action or "list"
    async with SessionStore.open() as store:
        jobs = JobStore(store)
        if action == "add":
            tz = args.tz or config.cron.timezone or local_zone()
            try:
                schedule = parse_schedule(args.schedule, tz=tz)
            except ScheduleError as exc:
                print(exc)
                return 2
            project = Path(args.project).expanduser().resolve()
            if not project.is_dir():
                print(f"{project} is not a directory.")
                return 2
            try:
                deliver = _destinations(args.deliver, config)
            except ValueError as exc:
                print(f"--deliver: {exc}")
                return 2
            try:
                chat = _job_chat(args.chat, config)
            except ValueError as exc:
                print(f"--chat: {exc}")
                return 2
            job = await jobs.add_job(
                name=args.name or args.prompt[:40],
                schedule=schedule,
                timezone=tz,
                prompt=args.prompt,
                project=str(project),
                mode=args.mode,
                chat_key=chat,
                deliver=deliver,
            )
            where = f"chat {chat}" if chat is not None else "no chat (set --chat, or [gateway] owner to a Telegram id)"
            print(f"Added job {job.id}: {schedule.describe()}, next run {fmt_time(job.next_run_at, tz)}; results go to {where}.")
            print(f"Delivery: {', '.join(_targets(job, config))}.")
            _warn_without_scheduler()
            return 0
        if action == "list":
            found = await jobs.list_jobs()
            if args.json:
                return emit([_job_row(job, config) for job in found])
            print(
                f"Catch-up policy: after downtime, one run per job if its latest missed slot is under "
                f"{int(config.cron.catch_up_grace)}s old; older ones are reported as missed, never run in a burst."
            )
            if not found:
                print("No jobs.")
            for job in found:
                state = "paused" if job.paused else f"next {fmt_time(job.next_run_at, job.timezone)}"
                made = f"user {job.owner_id}" if job.owner_id is not None else "the owner"
                print(
                    f"{job.id}  {job.name}  [{job.parsed.describe()}, {job.mode}]  {state}  chat {job.chat_key}  by {made}  {job.project}"
                )
                print(f"  delivers to: {', '.join(_targets(job, config))}")
            return 0
        if action == "runs":
            run_job = None
            if args.job_id is not None:
                run_job = await _job_id(store, jobs, args.job_id, with_runs=True)
                if run_job is None:
                    return 1
            found_runs = await jobs.runs(run_job, limit=max(1, args.limit))
            if args.json:
                return emit([_run_row(r, await jobs.deliveries(r.id)) for r in found_runs])
            if not found_runs:
                print("No runs yet.")
            for r in found_runs:
                extra = f" ({r.error})" if r.error else ""
                print(
                    f"{r.id}  job {r.job_id}  slot {_when(r.scheduled_at)}  {r.status}{' catch-up' if r.catch_up and r.status != 'missed' else ''}"
                    f"  delivery {r.delivery_status} x{r.delivery_attempts}{extra}"
                )
                for d in await jobs.deliveries(r.id):
                    why = f" ({d.error})" if d.error else ""
                    print(f"  -> {d.target}: {d.status}{f' x{d.attempts}' if d.attempts else ''}{why}")
                if r.result:
                    print("  " + r.result.replace("\n", "\n  "))
            return 0
        job_id = await _job_id(store, jobs, args.job_id)
        if job_id is None:
            return 1
        if action == "remove":
            await jobs.remove_job(job_id)
            print("Removed.")
        elif action == "run":
            await jobs.request_run(job_id)
            print("Queued: a running hermes-gateway starts it within one scheduler tick.")
            _warn_without_scheduler()
        else:
            await jobs.set_paused(job_id, action == "pause")
            print("Paused." if action == "pause" else "Resumed.")
        return 0


async def _job_id(store: Any, jobs: Any, ref: str, *, with_runs: bool = False) -> str | None:
    """The job ``ref`` names (its id or a unique prefix), or None after saying why on stderr.
    ``with_runs`` also accepts the id of a removed job whose runs are kept."""
    from hermes_cli.ids import IdError, resolve

    candidates = [(job.id, job.name) for job in await jobs.list_jobs()]
    if with_runs:
        known = {id_ for id_, _ in candidates}
        rows = await store.select("SELECT DISTINCT job_id FROM cron_runs ORDER BY job_id")
        candidates += [(row[0], "(removed)") for row in rows if row[0] not in known]
    try:
        return resolve(ref, candidates, what="job", listing="cron list")
    except IdError as exc:
        print(exc, file=sys.stderr)
        return None


def _job_chat(given: str | None, config: Any) -> str | None:
    """The place key a new job's results go to: ``--chat`` (a place key, or a Telegram chat id), else
    the owner's Telegram chat (a Telegram private chat has its user's id), else none. ValueError says
    what ``--chat`` takes."""
    from core.store.gateway import place_key_of

    if given is not None:
        return place_key_of(given)
    owner = config.gateway.owner
    if owner is None:
        return None
    platform, _, native = str(owner).rpartition(":")
    return f"telegram:{native}:0" if platform in ("", "telegram") else None


def _destinations(given: list[str] | None, config: Any) -> list[str] | None:
    """``--deliver`` values as stored specs (None: the ``[cron] deliver`` defaults); a ValueError says what is wrong."""
    from core.store.jobs import parse_destination

    if not given:
        return None
    if given == ["none"]:
        return []
    specs = []
    for text in given:
        if text == "none":
            raise ValueError("'none' cannot be combined with other destinations")
        found = parse_destination(text, base=Path.cwd())
        if found.named and found.value not in config.cron.webhooks:
            known = ", ".join(sorted(config.cron.webhooks)) or "none are configured"
            raise ValueError(
                f"no webhook named {found.value!r} in [cron.webhooks] ({known}); add [cron.webhooks.{found.value}] with its url"
            )
        specs.append(found.spec)
    return specs


def _targets(job: Any, config: Any) -> list[str]:
    """Where a job's results go, for people: the store always, its chat, then its destinations."""
    shown = ["the store"] + ([f"chat {job.chat_key}"] if job.chat_key is not None else [])
    shown += [d.spec for d in job.destinations(config.cron.deliver)]
    if job.deliver is None and config.cron.deliver:
        shown[-1] += " ([cron] deliver defaults)"
    return shown


def _job_row(job: Any, config: Any) -> dict[str, Any]:
    """A job in ``cron list --json``."""
    return {
        "id": job.id,
        "name": job.name,
        "kind": job.kind,
        "schedule": job.schedule,
        "description": job.parsed.describe(),
        "timezone": job.timezone,
        "prompt": job.prompt,
        "project": job.project,
        "mode": job.mode,
        "paused": bool(job.paused),
        "chat_key": job.chat_key,
        "owner_id": job.owner_id,
        "deliver": [d.spec for d in job.destinations(config.cron.deliver)],
        "deliver_defaults": job.deliver is None,
        "created_at": iso(job.created_at),
        "next_run_at": iso(job.next_run_at),
        "last_run_at": iso(job.last_run_at),
    }


def _run_row(r: Any, deliveries: list[Any]) -> dict[str, Any]:
    """A run in ``cron runs --json``."""
    return {
        "id": r.id,
        "job_id": r.job_id,
        "scheduled_at": iso(r.scheduled_at),
        "status": r.status,
        "catch_up": bool(r.catch_up),
        "started_at": iso(r.started_at),
        "finished_at": iso(r.finished_at),
        "session_id": r.session_id,
        "error": r.error,
        "result": r.result,
        "delivery_status": r.delivery_status,
        "delivery_attempts": r.delivery_attempts,
        "delivery_error": r.delivery_error,
        "deliveries": [
            {"target": d.target, "status": d.status, "attempts": d.attempts, "error": d.error, "delivered_at": iso(d.delivered_at)}
            for d in deliveries
        ],
    }
