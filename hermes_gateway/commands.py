"""Chat commands: /new /sessions /resume /project /mode /model /skill /personality /cost /stop /undo /cron /voice /link /whoami /help.

Every command runs after the authorisation gate, on every platform alike. Projects are chosen
by name from the configured list, never by a path typed in chat.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from core.policy.approvals import MODES
from core.store.schedule import ScheduleError, fmt_time, parse_schedule
from hermes_gateway.access import not_yours
from hermes_gateway.platform import Incoming, Place, send_long

if TYPE_CHECKING:
    from core.config import Config
    from core.store.gateway import GatewayStore
    from core.store.jobs import JobStore
    from hermes_gateway.access import SessionAccess
    from hermes_gateway.chats import Conversations
    from hermes_gateway.parts import Projects
    from hermes_gateway.platform import Platform
    from hermes_gateway.scheduler import Scheduler

__all__ = ["COMMANDS", "Commands"]

COMMANDS = {
    "new": "start a fresh conversation in this chat's project",
    "sessions": "your recent sessions (the owner's: every surface's)",
    "resume": "continue a session by id (from /sessions): /resume ID",
    "project": "show or switch the project: /project NAME",
    "mode": "show or set the approval mode: /mode read-only|ask|accept-edits|auto",
    "model": "show the model and the configured choices, or switch: /model provider:model",
    "skill": "list the skills, or run one: /skill NAME [what to apply it to]",
    "personality": "list the personality overlays, or switch this chat's session from the next turn: /personality NAME|none",
    "cost": "tokens and cost of this chat's session",
    "stop": "stop the reply in progress",
    "undo": "restore the files the last turn changed",
    "cron": "your scheduled jobs: /cron list | add SCHEDULE | PROMPT | pause|resume|remove|run|runs ID",
    "voice": "spoken replies in this chat: /voice on|off",
    "link": "follow your sessions across platforms: /link gives a code, /link CODE on another platform joins it",
    "whoami": "your user id, this chat, project and session",
    "help": "this list",
}


@dataclass(frozen=True, slots=True)
class Asker:
    """Who sent a command: their identity on this platform and the person it belongs to."""

    identity: str
    person: str
    name: str = ""


class Commands:
    """Handlers for the slash commands, one method each."""

    def __init__(
        self,
        config: Config,
        platforms: dict[str, Platform],
        conversations: Conversations,
        access: SessionAccess,
        projects: Projects,
        gateway_store: GatewayStore,
        jobs: JobStore,
        scheduler: Scheduler,
        timezone: str,
    ) -> None:
        self._config = config
        self._platforms = platforms
        self._conversations = conversations
        self._access = access
        self._projects = projects
        self._gateway_store = gateway_store
        self._jobs = jobs
        self._scheduler = scheduler
        self._timezone = timezone

    async def dispatch(self, incoming: Incoming) -> None:
        text = incoming.text.strip()
        word, _, rest = text.partition(" ")
        if "\n" in word:
            word, _, more = word.partition("\n")
            rest = f"{more} {rest}"
        name = word[1:].split("@", 1)[0].lower()
        handler = getattr(self, f"cmd_{name}", None) if name.isidentifier() else None
        target = incoming.place
        if handler is None:
            await self._say(target, f"Unknown command /{name}. Try /help.")
            return
        person = await self._gateway_store.person_of(incoming.sender.id)
        await handler(Asker(incoming.sender.id, person, incoming.sender.name), target, rest.strip())

    async def _say(self, target: Place, text: str) -> None:
        await send_long(self._platforms[target.platform], target, text)

    async def cmd_help(self, update: Asker, target: Place, arg: str) -> None:
        lines = ["Send a message to talk to the agent. Commands:"]
        lines += [f"/{name} — {text}" for name, text in COMMANDS.items()]
        await self._say(target, "\n".join(lines))

    async def cmd_start(self, update: Asker, target: Place, arg: str) -> None:
        await self.cmd_help(update, target, arg)

    async def cmd_whoami(self, update: Asker, target: Place, arg: str) -> None:
        conversation = await self._conversations.get(target)
        session = conversation.session.id if conversation.session else "(none yet)"
        native = update.identity.partition(":")[2]
        linked = f" (linked to {update.person})" if update.person != update.identity else ""
        await self._say(
            target,
            f"User id: {native} ({update.identity}){linked}\nChat: {target.chat}"
            + (f" ({'topic' if target.platform == 'telegram' else 'thread'} {target.thread})" if target.thread else "")
            + f"\nProject: {conversation.project}\nMode: {conversation.mode}\nVoice replies: {'on' if conversation.voice else 'off'}"
            + f"\nSession: {session}",
        )

    async def cmd_new(self, update: Asker, target: Place, arg: str) -> None:
        conversation = await self._conversations.get(target)
        jobs = self._conversations.background_running(conversation)
        self._conversations.stop(conversation)
        session = await self._conversations.new_session(conversation, update.person)
        await self._say(target, f"New conversation in {conversation.project} ({session.id[:8]})." + _jobs_end(jobs))

    async def cmd_project(self, update: Asker, target: Place, arg: str) -> None:
        conversation = await self._conversations.get(target)
        projects = self._projects.paths
        if not arg:
            listing = "\n".join(f"{'→' if n == conversation.project else ' '} {n}  {p}" for n, p in projects.items())
            await self._say(target, f"Projects (switch with /project NAME):\n{listing}")
            return
        if arg not in projects:
            await self._say(target, f"No project named {arg!r}. Configured: {', '.join(projects)}.")
            return
        conversation.project = arg
        jobs = self._conversations.background_running(conversation)
        self._conversations.stop(conversation)
        await self._conversations.new_session(conversation, update.person)
        await self._say(target, f"Now in project {arg} ({projects[arg]}); a new conversation starts." + _jobs_end(jobs))

    async def cmd_mode(self, update: Asker, target: Place, arg: str) -> None:
        conversation = await self._conversations.get(target)
        if not arg:
            await self._say(target, f"Mode: {conversation.mode}. Set with /mode {'|'.join(MODES)}.")
            return
        mode = next((m for m in MODES if m == arg), None)
        if mode is None:
            await self._say(target, f"Unknown mode {arg!r}; one of {', '.join(MODES)}.")
            return
        conversation.mode = mode
        if conversation.session is not None:
            conversation.session.policy.mode = mode
        await self._conversations.save(conversation)
        await self._say(target, f"Mode set to {arg}.")

    async def cmd_model(self, update: Asker, target: Place, arg: str) -> None:
        """The chat's model, and a switch to another of a configured provider (kept with the session)."""
        from core.config import ConfigError

        conversation = await self._conversations.get(target)
        current = self._conversations.model_of(conversation)
        choices = self._config.model_choices()
        listing = "\n".join(f"{'→' if label == current else ' '} `{label}`" for label in dict.fromkeys([current, *choices]))
        if not arg:
            await self._say(
                target,
                f"Model: `{current}`. Switch with /model provider:model; configured choices "
                f"(the default, fallbacks and each provider's models list):\n{listing}",
            )
            return
        spec = arg.split()[0]
        provider, sep, _ = spec.partition(":")
        configured = self._config.providers
        if sep and provider and provider not in configured and len(configured) != 1:
            await self._say(
                target,
                f"No provider named {provider!r} is configured (configured: {', '.join(sorted(configured)) or 'none'}). "
                f"Add [providers.{provider}] to config.toml, or pick one of:\n{listing}",
            )
            return
        try:
            ref = self._config.model_ref(spec)
        except ConfigError as exc:
            reason = str(exc).split(": ", 1)[1] if ": " in str(exc) else str(exc)
            await self._say(target, f"Cannot switch to {spec!r}: {reason}\nConfigured choices:\n{listing}")
            return
        if ref is None:
            await self._say(target, f"Which model? /model provider:model, one of:\n{listing}")
            return
        if conversation.session is not None and not await self._access.may_continue(update.person, conversation.session.id, target.key):
            await self._say(target, not_yours(conversation.session.id[:8]))
            return
        try:
            session = await self._conversations.set_model(conversation, ref.label, update.person)
        except ConfigError as exc:
            await self._say(target, f"Cannot switch to {ref.label}: {exc}")
            return
        note = "" if ref.label in choices else " (not in the configured models lists, but its provider is configured)"
        await self._say(target, f"Model set to `{ref.label}` for this chat's session ({session.id[:8]}){note}.")

    async def cmd_skill(self, update: Asker, target: Place, arg: str) -> None:
        """A turn with the skill's body as the message (as /NAME does in an editor); alone, the skills offered."""
        import asyncio

        from core.messages import UserMessage
        from surface_support.skill_commands import skill_prompt, skills_listing

        conversation = await self._conversations.get(target)
        cwd = Path(self._projects.paths[conversation.project])
        toolsets = self._conversations.toolsets
        name, _, what = arg.partition(" ")
        if not name:
            listing = await asyncio.to_thread(skills_listing, cwd, toolsets, run_hint="Run one with /skill NAME [what to apply it to].")
            await self._say(target, listing)
            return
        prompt = await asyncio.to_thread(skill_prompt, name, what.strip(), cwd, toolsets)
        if prompt is None:
            shown = name if len(name) <= 64 and name.isprintable() else name[:64] + "…"
            await self._say(target, f"No skill named {shown!r} here. /skill lists the skills this chat's project offers.")
            return
        self._conversations.start_turn(conversation, UserMessage.of(prompt), update.person)

    async def cmd_personality(self, update: Asker, target: Place, arg: str) -> None:
        """The personality overlay of this chat's session: listed, switched (from the next turn), or cleared with none."""
        import asyncio

        from core.agent.prompt import personality_listing
        from core.learning.personality import PersonalityError

        conversation = await self._conversations.get(target)
        session = conversation.session
        if not arg:
            current = session.context.personality if session is not None and session.context is not None else None
            await self._say(target, await asyncio.to_thread(personality_listing, current))
            return
        if session is not None and not await self._access.may_continue(update.person, session.id, target.key):
            await self._say(target, not_yours(session.id[:8]))
            return
        try:
            session, chosen = await self._conversations.set_personality(conversation, arg.split()[0], update.person)
        except PersonalityError as exc:
            await self._say(target, f"Personality unchanged: {exc}")
            return
        what = f"Personality `{chosen.name}`" if chosen is not None else "Personality cleared"
        await self._say(target, f"{what} for this chat's session ({session.id[:8]}) from the next message.")

    async def cmd_cost(self, update: Asker, target: Place, arg: str) -> None:
        from core.models.pricing import PRICES_AS_OF, TABLE, price_for, price_hint
        from surface_support.usage import subagents_cost, token_lines

        conversation = await self._conversations.get(target)
        session = conversation.session
        label = self._conversations.model_of(conversation)
        if session is None:
            await self._say(target, f"No session yet in this chat (model `{label}`). Send a message to start one.")
            return
        usage = session.billed()
        lines = [f"Session {session.id[:8]}, model `{label}`", *token_lines(usage, session.subagents_usage)]
        ref = self._config.model_ref(label)
        price = price_for(ref, self._config.pricing) if ref is not None else None
        if usage.cost_usd is not None:
            lines.append(f"Cost: ${usage.cost_usd:.4f}{subagents_cost(session.subagents_usage)}")
        elif usage.input_tokens or usage.output_tokens:
            lines.append(f"Cost: {price_hint(label)}" if price is None else "Cost: not known for the requests made so far")
        if price is not None and ref is not None:
            source = (
                "config.toml [pricing]"
                if ref.label in self._config.pricing or ref.model in self._config.pricing
                else f"list price as of {PRICES_AS_OF}"
                if price in TABLE.values()
                else "local server"
            )
            lines.append(f"Price: ${price.input:g} in, ${price.output:g} out per million tokens ({source})")
        await self._say(target, "\n".join(lines))

    async def cmd_stop(self, update: Asker, target: Place, arg: str) -> None:
        conversation = await self._conversations.get(target)
        stopped = self._conversations.stop(conversation)
        await self._say(target, "Stopping…" if stopped else "Nothing is running.")

    async def cmd_undo(self, update: Asker, target: Place, arg: str) -> None:
        from core.host.checkpoints import Checkpoints

        conversation = await self._conversations.get(target)
        if conversation.session is None:
            await self._say(target, "Nothing to undo yet.")
            return
        if not await self._access.may_continue(update.person, conversation.session.id, target.key):
            await self._say(target, not_yours(conversation.session.id[:8]))
            return
        checkpoints = Checkpoints()
        if not await checkpoints.list(conversation.session.id):
            await self._say(target, "Nothing to undo: no turn of this session has changed files.")
            return
        report = await checkpoints.undo_last(conversation.session.id)
        await self._say(target, report.summary())

    async def cmd_sessions(self, update: Asker, target: Place, arg: str) -> None:
        access = self._access
        user_id = update.person
        records = await access.visible(user_id, limit=10)
        hint = (
            ""
            if self._access.owners
            else ("\n(Sessions from the editor are listed only to the owner: set [gateway] owner to your user id in config.toml.)")
        )
        if not records:
            await self._say(target, "No sessions of yours yet in these projects. Send a message to start one." + hint)
            return
        lines = [
            "Recent sessions (continue one with /resume ID):"
            if access.is_owner(user_id)
            else "Your recent sessions (continue one with /resume ID):"
        ]
        for record in records:
            when = time.strftime("%m-%d %H:%M", time.localtime(record.updated_at))
            lines.append(f"`{record.id[:8]}` {when} [{record.surface}] {record.title or '(untitled)'} — {Path(record.cwd).name}")
        await self._say(target, "\n".join(lines) + hint)

    async def cmd_resume(self, update: Asker, target: Place, arg: str) -> None:
        if not arg:
            await self._say(target, "Which one? /resume ID (see /sessions).")
            return
        prefix = arg.split()[0].lower()
        if not re.fullmatch(r"[0-9a-f]{1,32}", prefix):
            await self._say(target, "A session id is hexadecimal, as /sessions shows it: /resume ID.")
            return
        user_id = update.person
        found = [r for r in await self._gateway_store.sessions_with_prefix(prefix) if self._projects.project_of(r.cwd) is not None]
        if self._access.is_owner(user_id):
            matches = found
        else:
            matches = [r for r in await self._access.visible(user_id, limit=500) if r.id.startswith(prefix)]
        if not matches:
            # Someone else's session: refused before anything of it (title, history) is read.
            await self._say(target, not_yours(prefix[:32]) if found else "No such session in your projects.")
            return
        if len(matches) != 1:
            await self._say(target, "That prefix matches several; give more of the id.")
            return
        record = matches[0]
        conversation = await self._conversations.get(target)
        project = self._projects.project_of(record.cwd)
        if project is None:
            await self._say(target, "That session is not in one of your configured projects.")
            return
        jobs = self._conversations.background_running(conversation)
        self._conversations.stop(conversation)
        conversation.project = project
        session = await self._conversations.resume(conversation, record.id)
        if session is None:
            await self._say(target, "That session no longer exists.")
            return
        resumed = f"Resumed {record.title or record.id[:8]} ({len(session.history)} messages, from {record.surface})."
        await self._say(target, resumed + _jobs_end(jobs))

    async def cmd_voice(self, update: Asker, target: Place, arg: str) -> None:
        """Spoken replies in this chat (each reply also sent as audio)."""
        from core.models import speech

        conversation = await self._conversations.get(target)
        word = arg.split()[0].lower() if arg else ""
        if word not in ("on", "off"):
            state = "on" if conversation.voice else "off"
            await self._say(target, f"Voice replies are {state}. /voice on|off. Voice notes you send are always transcribed.")
            return
        if word == "on" and not speech.speech_configured(self._config):
            await self._say(target, "Spoken replies need text to speech: set [voice] tts_base_url in config.toml (see the README).")
            return
        conversation.voice = word == "on"
        await self._say(target, "Voice replies on: each reply also comes as audio." if conversation.voice else "Voice replies off.")

    async def cmd_link(self, update: Asker, target: Place, arg: str) -> None:
        """Join this identity to the same person on another platform, so sessions and jobs follow."""
        store = self._gateway_store
        if not arg:
            code, expires = await store.issue_link_code(update.identity)
            minutes = max(1, int((expires - time.time()) // 60))
            linked = await store.identities_of(update.person)
            also = f"\nLinked now: {', '.join(linked)}" if len(linked) > 1 else ""
            await self._say(
                target,
                f"Link code: `{code}` (valid {minutes} min, works once). On the other platform, send /link {code} "
                f"to this bot: that identity then follows {update.person}.{also}\n/link off unlinks this identity.",
            )
            return
        word = arg.split()[0]
        if word.lower() == "off":
            done = await store.unlink(update.identity)
            await self._say(target, "Unlinked: this identity is on its own again." if done else "This identity is not linked.")
            return
        if update.identity in self._access.owners:
            # An owner's identity joins only the owner's own: a code from anyone else would hand
            # them the owner's sessions.
            issuer = await store.link_code_person(word.upper())
            if issuer is not None and issuer not in self._access.owners:
                await self._say(target, "An owner's identity can be linked only to the owner's other identities. Nothing was changed.")
                return
        person = await store.redeem_link_code(word.upper(), update.identity)
        if person is None:
            await self._say(target, "No live link code matches (codes last 10 minutes and work once). Send /link on the other platform.")
            return
        await self._say(target, f"Linked: {update.identity} now follows {person}; its sessions and jobs are yours here too.")

    async def cmd_cron(self, update: Asker, target: Place, arg: str) -> None:
        """Jobs belong to whoever made them; the owner ([gateway] owner) sees and controls all."""
        verb, _, rest = arg.partition(" ")
        verb, rest = verb.lower() or "list", rest.strip()
        jobs = self._jobs
        user_id = update.person
        owner = self._access.owners
        if verb == "list":
            found = [job for job in await jobs.list_jobs() if job.controlled_by(user_id, owner)]
            if not found:
                await self._say(target, "No jobs of yours. Add one: /cron add daily at 09:00 | summarise yesterday's commits")
                return
            grace = int(self._config.cron.catch_up_grace)
            lines = [f"Jobs (missed runs catch up once within {grace}s):"]
            for job in found:
                state = "paused" if job.paused else f"next {fmt_time(job.next_run_at, job.timezone)}"
                mine = "" if job.owner_id == user_id else f" (by {job.owner_id})" if job.owner_id is not None else " (made on the machine)"
                lines.append(f"`{job.id}` {job.name} — {job.parsed.describe()}, {state}{mine}")
            await self._say(target, "\n".join(lines))
            return
        if verb == "add":
            schedule_text, sep, prompt = rest.partition("|")
            if not sep or not prompt.strip():
                await self._say(target, "Write it as: /cron add SCHEDULE | PROMPT")
                return
            conversation = await self._conversations.get(target)
            tz = self._timezone
            try:
                schedule = parse_schedule(schedule_text, tz=tz)
            except ScheduleError as exc:
                await self._say(target, str(exc))
                return
            job = await jobs.add_job(
                name=prompt.strip()[:40],
                schedule=schedule,
                timezone=tz,
                prompt=prompt.strip(),
                project=self._projects.paths[conversation.project],
                chat_key=target.key,
                owner_id=user_id,
            )
            await self._say(target, f"Added job `{job.id}`: {schedule.describe()}; next {fmt_time(job.next_run_at, tz)}.")
            return
        if verb in ("pause", "resume", "remove", "run", "runs") and rest:
            await self._say(target, await self._job_action(verb, rest.split()[0], user_id, owner))
            return
        await self._say(target, COMMANDS["cron"])

    async def _job_action(self, verb: str, job_id: str, user_id: str, owner: frozenset[str]) -> str:
        jobs = self._jobs
        job = await jobs.get_job(job_id)
        if job is None:
            return f"No job {job_id}. /cron list shows yours."
        if not job.controlled_by(user_id, owner):
            return (
                f"Job {job_id} is not yours: you can see and control only the jobs you made "
                "(the bot's owner controls all). /cron list shows yours."
            )
        if verb == "runs":
            return runs_text(job, await jobs.runs(job.id, limit=5))
        if verb == "remove":
            return "Removed." if await jobs.remove_job(job_id) else f"No job {job_id}."
        if verb == "run":
            run = await jobs.request_run(job_id)
            self._scheduler.wake()
            return f"Queued a run of {job_id}." if run else f"No job {job_id}."
        done = await jobs.set_paused(job_id, verb == "pause")
        return ("Paused." if verb == "pause" else "Resumed.") if done else f"No job {job_id}."


def runs_text(job, runs) -> str:
    """A job's recent runs and what they said, newest first."""
    if not runs:
        return f"{job.name} ({job.id}) has not run yet."
    lines = [f"Recent runs of {job.name} ({job.id}):"]
    for run in runs:
        when = time.strftime("%m-%d %H:%M", time.localtime(run.scheduled_at))
        said = (run.error or run.result or "").strip().replace("\n", " ")
        lines.append(f"{when} {run.status}" + (f": {said[:300]}" if said else ""))
    return "\n".join(lines)


def _jobs_end(running: int) -> str:
    """What the reply to a chat leaving its session says of that session's background commands."""
    if not running:
        return ""
    if running == 1:
        return " The previous conversation's background command is stopped with it."
    return f" The previous conversation's {running} background commands are stopped with it."
