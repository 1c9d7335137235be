"""Conversations: each chat place (a chat, a thread, a topic) is one agent session in one configured project.

A turn streams into one message, edited at the platform's rate (``Limits.edit_interval``); when
the turn ends the reply is split for the platform and numbered (``conversation.send_long``).
Platforms that cannot edit get the whole reply at the end, with "typing" shown meanwhile. A reply
that is done within a moment goes out as one message: the first draft waits ``FIRST_DRAFT_AFTER``
and "typing" ``TYPING_AFTER``, so a quick answer costs one platform call instead of three.
Questions from the approval policy go through ``conversation.Questions``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.events import Notice, PermissionNeeded, TextDelta, ToolStarted, TurnEnded
from core.messages import UserMessage
from core.policy.approvals import as_mode
from hermes_gateway.access import not_yours
from hermes_gateway.platform import send_long
from hermes_gateway.questions import Questions

if TYPE_CHECKING:
    from core.agent.loop import Agent, Session
    from core.config import Config
    from core.learning.personality import Personality
    from core.models.base import Model
    from core.store.gateway import GatewayStore
    from hermes_gateway.access import SessionAccess
    from hermes_gateway.parts import Projects
    from hermes_gateway.platform import Place, Platform

__all__ = ["Conversation", "Conversations"]

log = logging.getLogger(__name__)

TYPING_EVERY = 4.0
TYPING_AFTER = 0.5  # seconds into a turn before "typing" is shown (a reply by then needs none)
FIRST_DRAFT_AFTER = 1.0  # seconds into a reply before its first draft (or the edit interval, if shorter)


class _Stream:
    """One reply being written: a draft message edited at most every ``interval`` seconds (on
    platforms that edit; elsewhere the reply is sent whole at the end).

    A draft goes out in the background, one at a time: the turn reads on while the platform
    answers, so its round trips never delay the reply (the next draft carries the newer text).
    """

    def __init__(self, platform: Platform, place: Place) -> None:
        self.platform, self.place = platform, place
        self.interval = platform.limits.edit_interval
        self.text: list[str] = []
        self.status = ""
        self.message_id: str | None = None
        self._last = 0.0
        self._sending: asyncio.Task[None] | None = None
        # No draft before this: a reply done by then is sent whole, as one message.
        self._first = time.monotonic() + min(FIRST_DRAFT_AFTER, self.interval)
        self._waiting: asyncio.TimerHandle | None = None

    def update(self, *, force: bool = False) -> None:
        if not self.platform.limits.edits:
            return
        now = time.monotonic()
        if not force and now < self._first:
            if self._waiting is None:  # the first draft goes out then, even if nothing new comes
                self._waiting = asyncio.get_running_loop().call_at(self._first, self.update)
            return
        if self._waiting is not None:  # its time has come (or a forced draft goes first)
            self._waiting.cancel()
            self._waiting = None
        if not force and now - self._last < self.interval:
            return
        if self._sending is not None and not self._sending.done():
            return
        self._last = now
        limit = self.platform.limits.text
        body = "".join(self.text)
        # While streaming, show the tail: the whole reply is sent, split, at the end.
        draft = body[-(limit - 200) :] if len(body) > limit - 200 else body
        draft = (draft + ("\n\n" if draft else "") + self.status).strip() or "…"
        self._sending = asyncio.create_task(self._draft(draft), name=f"draft-{self.place.key}")

    async def _draft(self, text: str) -> None:
        try:
            self.message_id = await self.platform.draft(self.place, self.message_id, text)
        except Exception:
            log.debug("draft update failed", exc_info=True)

    async def settle(self) -> None:
        """Wait for the draft in flight, if any (before anything else is sent to the chat, so the
        chat shows things in the order they happened); a first draft still waiting goes now."""
        if self._waiting is not None:
            self.update(force=True)  # cancels the wait
        if self._sending is not None and not self._sending.done():
            await asyncio.wait([self._sending])

    async def finish(self, footer: str = "") -> str:
        if self._waiting is not None:  # no draft now: the reply goes whole
            self._waiting.cancel()
            self._waiting = None
        await self.settle()  # the reply replaces the draft: its message id is needed
        body = "".join(self.text).strip()
        if footer:
            body = f"{body}\n\n{footer}" if body else footer
        await send_long(self.platform, self.place, body or "(no reply)", first_message_id=self.message_id)
        return body


@dataclass(eq=False)
class Conversation:
    """One chat's (or topic's) state: project, session, mode, the turn in flight."""

    place: Place
    project: str
    mode: str = "ask"
    session: Session | None = None
    # The model picked with /model ("provider:model"); None: the configured default. New sessions keep it.
    model: str | None = None
    turn: asyncio.Task[None] | None = None
    busy_since: float | None = None
    attachments: list[Any] = field(default_factory=list)
    # /voice on: each reply is also sent as speech (not kept across restarts).
    voice: bool = False
    # The person last recorded in the store as this place's turn user (None: not known to be written).
    turn_user: str | None = None


class Conversations:
    """Every conversation of this gateway; bindings persist in the store across restarts."""

    def __init__(
        self,
        config: Config,
        agent: Agent,
        platforms: dict[str, Platform],
        gateway_store: GatewayStore,
        projects: Projects,
        access: SessionAccess,
        default_mode: str = "ask",
    ) -> None:
        self._config = config
        self._agent = agent
        self._platforms = platforms
        self._gateway_store = gateway_store
        self._projects = projects
        self._access = access
        self._default_mode = default_mode
        self._by_key: dict[str, Conversation] = {}
        self._models: dict[str, Model] = {}
        self.questions = Questions(platforms, agent.broker)
        # Waiting for background commands to end, to tell the chat while no turn runs.
        self._watchers: set[asyncio.Task[None]] = set()
        self._watched: set[int] = set()
        # Closing the hosts of sessions the chats moved on from.
        self._closing: set[asyncio.Task[None]] = set()

    def running(self) -> list[Conversation]:
        return [c for c in self._by_key.values() if c.turn is not None and not c.turn.done()]

    async def close_hosts(self) -> None:
        """Close the hosts of the chats' sessions (background commands stop, containers go)."""
        hosts = [c.session.host for c in self._by_key.values() if c.session is not None]
        await asyncio.gather(*(host.aclose() for host in hosts), *self._closing, return_exceptions=True)

    def background_running(self, conversation: Conversation) -> int:
        """How many background commands of the chat's session still run."""
        jobs = getattr(conversation.session.host, "jobs", {}) if conversation.session is not None else {}
        return sum(1 for job in jobs.values() if getattr(job, "ended", None) is None)

    def _leave(self, conversation: Conversation, old: Session | None) -> None:
        """The chat moved on from ``old``: its host is closed (background commands stop, a container
        goes), once the turn running on it, if any, has ended."""
        if old is None or old is conversation.session:
            return
        turn = conversation.turn if conversation.turn is not None and not conversation.turn.done() else None

        async def close() -> None:
            if turn is not None:
                await asyncio.wait([turn])
            try:
                await old.host.aclose()
            except Exception:
                log.warning("closing the host of session %s failed", old.id[:8], exc_info=True)

        closer = asyncio.create_task(close(), name=f"close-{conversation.place.key}")
        self._closing.add(closer)
        closer.add_done_callback(self._closing.discard)

    async def person(self, identity: str) -> str:
        """The person an identity belongs to (itself unless linked with /link)."""
        return await self._gateway_store.person_of(identity)

    def platform(self, conversation: Conversation) -> Platform:
        return self._platforms[conversation.place.platform]

    async def get(self, place: Place) -> Conversation:
        found = self._by_key.get(place.key)
        if found is not None:
            return found
        binding = await self._gateway_store.binding(place.key)
        projects = self._projects.paths
        project = binding.project if binding.project in projects else next(iter(projects))
        conversation = Conversation(place, project, binding.mode or self._default_mode)
        if binding.session_id:
            conversation.session = await self._open(conversation, binding.session_id)
        self._by_key[place.key] = conversation
        return conversation

    async def _open(self, conversation: Conversation, session_id: str) -> Session | None:
        from core.host.select import host_for

        path = Path(self._projects.paths[conversation.project])
        session = await self._agent.open_session(session_id, host_for(self._config, path), mode=as_mode(conversation.mode))
        if session is not None:
            record = await self._agent.store.get_session(session_id)
            stored = (record.meta if record else None) or {}
            label = stored.get("model")
            # A model picked earlier (here or in an editor) and still configured; else the default.
            conversation.model = label if isinstance(label, str) and label != self.default_model and self.resolves(label) else None
            self._apply_model(conversation, session)
        return session

    # -- the model ------------------------------------------------------------------------

    @property
    def default_model(self) -> str:
        return self._agent.model.name

    def model_of(self, conversation: Conversation) -> str:
        """The label of the model this chat's turns use."""
        return conversation.model or self.default_model

    def resolves(self, label: str) -> bool:
        """Whether ``label`` names a model of a configured provider."""
        from core.config import ConfigError

        try:
            return self._config.model_ref(label) is not None
        except ConfigError:
            return False

    def _model(self, label: str) -> Model:
        if label not in self._models:
            from core.models import build_model

            self._models[label] = build_model(self._config.model_copy(update={"model": label}))
        return self._models[label]

    def _apply_model(self, conversation: Conversation, session: Session) -> None:
        label = self.model_of(conversation)
        session.model = None if label == self.default_model else self._model(label)
        session.context_window = self._config.context_window(label) or session.context_window

    async def set_model(self, conversation: Conversation, label: str, user_id: str | None) -> Session:
        """Switch the chat's session to ``label`` (already resolved) and remember it with the session,
        as an editor's model picker does. Starts a session when the chat has none."""
        self._model(label)  # built first: a failure leaves the chat as it was
        conversation.model = None if label == self.default_model else label
        session = conversation.session or await self.new_session(conversation, user_id)
        self._apply_model(conversation, session)
        await self._agent.store.update_session(session.id, model=label, meta={"model": label})
        return session

    @property
    def toolsets(self) -> frozenset[str]:
        """The toolsets active in the chats' sessions (which skills they are offered)."""
        return self._agent.toolsets

    async def set_personality(self, conversation: Conversation, name: str, user_id: str | None) -> tuple[Session, Personality | None]:
        """Switch the chat's session to the personality overlay ``name`` from its next turn, kept with
        the session (PersonalityError for an unknown name, and nothing changes). Starts a session when
        the chat has none."""
        from core.agent.prompt import choose_personality
        from core.learning.personality import resolve

        await asyncio.to_thread(resolve, name)  # an unknown name starts no session
        session = conversation.session or await self.new_session(conversation, user_id)
        return session, await choose_personality(self._agent.store, session.id, session.context, name)

    async def save(self, conversation: Conversation) -> None:
        from core.store.gateway import ChatBinding

        sid = conversation.session.id if conversation.session else None
        await self._gateway_store.bind(ChatBinding(conversation.place.key, conversation.project, sid, conversation.mode))
        conversation.turn_user = None  # a new row has none: the next turn writes it

    async def new_session(self, conversation: Conversation, user_id: str | None) -> Session:
        """A fresh session in the chat's project, started by ``user_id`` (it is theirs)."""
        from core.host.select import host_for

        path = Path(self._projects.paths[conversation.project])
        session = await self._agent.new_session(path, host_for(self._config, path), mode=as_mode(conversation.mode))
        if conversation.model is not None:
            self._apply_model(conversation, session)
            await self._agent.store.update_session(session.id, model=conversation.model, meta={"model": conversation.model})
        if user_id is not None:
            await self._gateway_store.record_starter(session.id, user_id, chat_key=conversation.place.key, origin="chat")
        old, conversation.session = conversation.session, session
        self._leave(conversation, old)
        await self.save(conversation)
        return session

    async def resume(self, conversation: Conversation, session_id: str) -> Session | None:
        session = await self._open(conversation, session_id)
        if session is not None:
            old, conversation.session = conversation.session, session
            self._leave(conversation, old)
            await self.save(conversation)
        return session

    def start_turn(self, conversation: Conversation, message: UserMessage, user_id: str) -> None:
        """Run a prompt in the background: the handler returns, so button presses keep flowing."""
        previous = conversation.turn

        async def run() -> None:
            if previous is not None and not previous.done():
                await asyncio.wait([previous])  # one turn at a time per chat, in order
            await self._turn(conversation, message, user_id)

        conversation.turn = asyncio.create_task(run(), name=f"turn-{conversation.place.key}")

    async def _turn(self, conversation: Conversation, message: UserMessage, user_id: str) -> None:
        platform = self.platform(conversation)
        place = conversation.place
        session = conversation.session
        if session is not None and not await self._access.may_continue(user_id, session.id, place.key):
            # A binding from before sessions had owners, or a session the owner brought here.
            await platform.send(place, not_yours(session.id[:8]))
            return
        session = session or await self.new_session(conversation, user_id)
        stream = _Stream(platform, place)
        typing = asyncio.create_task(self._typing(platform, place))
        conversation.busy_since = time.time()
        footer = ""
        try:
            # Tools acting in this turn (the cron tool) act for the person who sent the prompt
            # (written when it changes: the row keeps it between turns).
            if conversation.turn_user != user_id:
                await self._gateway_store.set_turn_user(place.key, user_id)
                conversation.turn_user = user_id
            async for event in self._agent.run_turn(session, message):
                if isinstance(event, TextDelta):
                    stream.text.append(event.text)
                    stream.status = ""
                    stream.update()
                elif isinstance(event, ToolStarted):
                    stream.status = f"⚙️ {event.title}"
                    stream.update()
                elif isinstance(event, PermissionNeeded):
                    await stream.settle()
                    await self.questions.ask(event.request, place, user_id)
                elif isinstance(event, Notice) and event.level != "info":
                    await stream.settle()
                    await platform.send(place, f"⚠️ {event.text}")
                elif isinstance(event, TurnEnded):
                    if event.stop_reason == "cancelled":
                        footer = "⏹ Stopped."
                    elif event.stop_reason == "max_tokens":
                        footer = "(The reply was cut off at the model's output limit.)"
        except Exception:
            log.exception("turn failed in chat %s", place.key)
            footer = "Internal error; the conversation is saved, try again."
        finally:
            typing.cancel()
            conversation.busy_since = None
        # Questions of this turn that were not answered (timed out, cancelled) say so first.
        await self.questions.expire_session(session.id)
        reply = ""
        try:
            reply = await stream.finish(footer)
        except Exception:
            log.exception("could not deliver the reply in chat %s", place.key)
        if conversation.voice and reply:
            await self._speak(platform, place, reply)
        self._watch_idle(conversation, session)
        await self._tell_idle(conversation, session)  # what ended during the turn's last step

    async def _speak(self, platform: Platform, place: Place, reply: str) -> None:
        """/voice on: the reply also goes as speech."""
        from core.models import speech

        try:
            data, mime, name = await speech.synthesize(self._config, reply)
            await platform.send_file(place, name, data, mime)
        except speech.SpeechError as exc:
            await platform.send(place, f"⚠️ No spoken reply: {exc}")
        except Exception:
            log.warning("could not send the spoken reply in %s", place.key, exc_info=True)

    # -- between turns ------------------------------------------------------------------------

    def _watch_idle(self, conversation: Conversation, session: Session) -> None:
        """Between turns, tell the chat when a background command ends or an MCP server goes down
        or comes back (a running turn tells it itself)."""
        if session.mcp is not None:
            session.mcp.on_change = lambda: self._tell_idle(conversation, session)
        for job in list(getattr(session.host, "jobs", {}).values()):
            if id(job) in self._watched or getattr(job, "ended", True) is not None:
                continue
            self._watched.add(id(job))
            watcher = asyncio.create_task(self._when_ended(job, conversation, session), name=f"watch-{conversation.place.key}")
            self._watchers.add(watcher)
            watcher.add_done_callback(self._watchers.discard)

    async def _when_ended(self, job: Any, conversation: Conversation, session: Session) -> None:
        try:
            await job.wait()
            await self._tell_idle(conversation, session)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.debug("watching a background command in chat %s failed", conversation.place.key, exc_info=True)
        finally:
            self._watched.discard(id(job))

    async def _tell_idle(self, conversation: Conversation, session: Session) -> None:
        from core.host.processes import take_ended

        if conversation.session is not session or conversation.busy_since is not None:
            return  # the running turn tells it, with the note for the model
        lines = [ended.notice for ended in take_ended(getattr(session.host, "jobs", {}), "user")]
        if session.mcp is not None:
            lines += [notice.text for notice in session.mcp.changes(session.extra_tools)]
        platform = self.platform(conversation)
        for line in lines:
            await platform.send(conversation.place, f"⚠️ {line}")

    async def _typing(self, platform: Platform, place: Place) -> None:
        await asyncio.sleep(TYPING_AFTER)
        while True:
            try:
                await platform.typing(place)
            except Exception:
                log.debug("typing indicator failed", exc_info=True)
            await asyncio.sleep(TYPING_EVERY)

    def stop(self, conversation: Conversation) -> bool:
        if conversation.session is None or conversation.turn is None or conversation.turn.done():
            return False
        self._agent.cancel(conversation.session)
        return True

    async def drain(self, grace: float) -> None:
        """On shutdown: let turns in flight finish for ``grace`` seconds, then cancel them (saved)."""
        for watcher in list(self._watchers):
            watcher.cancel()
        running = [c for c in self.running()]
        if not running:
            return
        tasks = [c.turn for c in running if c.turn is not None]
        _, pending = await asyncio.wait(tasks, timeout=grace)
        if pending:
            for conversation in running:
                self.stop(conversation)
            await asyncio.wait(pending, timeout=10)
