"""Conversations: each chat (and forum topic) is one agent session in one configured project.

A turn streams into one Telegram message, edited at a bounded rate; when the turn ends the
reply is rendered and split (``telegram_io.send_long``). Questions from the approval policy
become inline buttons bound to the request id, the chat and the user who sent the prompt:
a press by anyone else is refused, a late press is told the question is gone, and the core's
broker denies on timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from telegram import InlineKeyboardButton, InlineKeyboardMarkup
from telegram.constants import ChatAction
from telegram.error import TelegramError

from core.events import ApprovalRequest, Decision, Notice, PermissionNeeded, TextDelta, ToolStarted, TurnEnded
from core.messages import UserMessage
from core.policy.approvals import as_mode
from hermes_gateway.access import not_yours
from hermes_gateway.render import LIMIT
from hermes_gateway.telegram_io import Target, edit_text, send_long, send_text

if TYPE_CHECKING:
    from core.agent.loop import Agent, Session
    from core.config import Config
    from core.models.base import Model
    from core.policy.approvals import ApprovalBroker
    from core.store.gateway import GatewayStore
    from hermes_gateway.access import SessionAccess
    from hermes_gateway.parts import Projects

__all__ = ["ApprovalButtons", "Conversation", "Conversations"]

log = logging.getLogger(__name__)

_CHOICES = {"o": Decision.ALLOW_ONCE, "a": Decision.ALLOW_ALWAYS, "d": Decision.REJECT_ONCE}
_SAID = {"o": "Allowed once", "a": "Always allowed", "d": "Denied"}
TYPING_EVERY = 4.0


@dataclass(slots=True)
class _Asked:
    request: ApprovalRequest
    target: Target
    user_id: int
    message_id: int | None = None


class ApprovalButtons:
    """In-chat questions: ``ap|<approval id>|<o|a|d>`` (under 64 bytes of callback data)."""

    def __init__(self, bot: Any, broker: ApprovalBroker) -> None:
        self._bot = bot
        self._broker = broker
        self._asked: dict[str, _Asked] = {}

    async def ask(self, request: ApprovalRequest, target: Target, user_id: int) -> None:
        lines = [f"🔐 Approval needed: {request.title}"]
        if request.reason:
            lines.append(f"Why: {request.reason}")
        if request.command:
            lines.append(f"```\n{request.command[:1500]}\n```")
        for diff in request.diffs[:3]:
            lines.append(f"Changes {diff.path}")
        buttons = [InlineKeyboardButton("Allow once", callback_data=f"ap|{request.id}|o")]
        if request.offer_always:
            buttons.append(InlineKeyboardButton("Allow always", callback_data=f"ap|{request.id}|a"))
        buttons.append(InlineKeyboardButton("Deny", callback_data=f"ap|{request.id}|d"))
        asked = _Asked(request, target, user_id)
        self._asked[request.id] = asked
        message = await send_text(self._bot, target, "\n".join(lines), reply_markup=InlineKeyboardMarkup([buttons]))
        asked.message_id = message.message_id

    async def press(self, query: Any, approval_id: str, choice: str) -> None:
        """A button press, already past the allowlist gate; binding checked here."""
        asked = self._asked.get(approval_id)
        future = asked.request.future if asked else None
        if asked is None or future is None or future.done():
            self._asked.pop(approval_id, None)
            await query.answer("This request has expired or was already answered.", show_alert=True)
            await _drop_keyboard(query)
            return
        chat_id = query.message.chat.id if query.message else None
        if query.from_user is None or query.from_user.id != asked.user_id or chat_id != asked.target.chat_id:
            log.warning(
                "approval %s: press by user %s refused (bound to %s)", approval_id, getattr(query.from_user, "id", None), asked.user_id
            )
            await query.answer("Only the person who asked for this can answer it.", show_alert=True)
            return
        decision = _CHOICES.get(choice)
        if decision is None or (decision is Decision.ALLOW_ALWAYS and not asked.request.offer_always):
            await query.answer("That choice is not offered for this request.", show_alert=True)
            return
        won = await self._broker.answer(approval_id, decision, by=f"telegram:{query.from_user.id}")
        self._asked.pop(approval_id, None)
        if not won:
            await query.answer("This request has expired or was already answered.", show_alert=True)
            await _drop_keyboard(query)
            return
        await query.answer(_SAID[choice])
        await self._settle(asked, _SAID[choice])

    async def expire_session(self, session_id: str) -> None:
        """The turn ended: questions still shown for it can no longer be answered."""
        for approval_id, asked in list(self._asked.items()):
            if asked.request.session_id == session_id and (asked.request.future is None or asked.request.future.done()):
                self._asked.pop(approval_id, None)
                await self._settle(asked, "Expired")

    async def _settle(self, asked: _Asked, outcome: str) -> None:
        if asked.message_id is None:
            return
        try:
            await edit_text(self._bot, asked.target, asked.message_id, f"🔐 {asked.request.title} — {outcome}", html=False)
        except TelegramError:
            log.debug("could not update the approval message", exc_info=True)


async def _drop_keyboard(query: Any) -> None:
    try:
        await query.edit_message_reply_markup(reply_markup=None)
    except TelegramError:
        pass


class _Stream:
    """One reply being written: a draft message edited at most every ``interval`` seconds."""

    def __init__(self, bot: Any, target: Target, interval: float) -> None:
        self.bot, self.target, self.interval = bot, target, interval
        self.text: list[str] = []
        self.status = ""
        self.message_id: int | None = None
        self._last = 0.0

    async def update(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        body = "".join(self.text)
        # While streaming, show the tail: the whole reply is sent, split, at the end.
        draft = body[-(LIMIT - 200) :] if len(body) > LIMIT - 200 else body
        draft = (draft + ("\n\n" if draft else "") + self.status).strip() or "…"
        try:
            if self.message_id is None:
                sent = await self.bot.send_message(text=draft, **self.target.kwargs())
                self.message_id = sent.message_id
            else:
                await edit_text(self.bot, self.target, self.message_id, draft, html=False)
        except TelegramError:
            log.debug("draft update failed", exc_info=True)

    async def finish(self, footer: str = "") -> None:
        body = "".join(self.text).strip()
        if footer:
            body = f"{body}\n\n{footer}" if body else footer
        await send_long(self.bot, self.target, body or "(no reply)", first_message_id=self.message_id)


@dataclass(eq=False)
class Conversation:
    """One chat's (or topic's) state: project, session, mode, the turn in flight."""

    target: Target
    project: str
    mode: str = "ask"
    session: Session | None = None
    # The model picked with /model ("provider:model"); None: the configured default. New sessions keep it.
    model: str | None = None
    turn: asyncio.Task[None] | None = None
    busy_since: float | None = None
    attachments: list[Any] = field(default_factory=list)


class Conversations:
    """Every conversation of this gateway; bindings persist in the store across restarts."""

    def __init__(
        self,
        config: Config,
        agent: Agent,
        bot: Any,
        gateway_store: GatewayStore,
        projects: Projects,
        access: SessionAccess,
        default_mode: str = "ask",
    ) -> None:
        self._config = config
        self._agent = agent
        self._bot = bot
        self._gateway_store = gateway_store
        self._projects = projects
        self._access = access
        self._default_mode = default_mode
        self._by_key: dict[str, Conversation] = {}
        self._models: dict[str, Model] = {}
        self.approvals = ApprovalButtons(bot, agent.broker)
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

        closer = asyncio.create_task(close(), name=f"close-{conversation.target.key}")
        self._closing.add(closer)
        closer.add_done_callback(self._closing.discard)

    async def get(self, target: Target) -> Conversation:
        found = self._by_key.get(target.key)
        if found is not None:
            return found
        binding = await self._gateway_store.binding(target.key)
        projects = self._projects.paths
        project = binding.project if binding.project in projects else next(iter(projects))
        conversation = Conversation(target, project, binding.mode or self._default_mode)
        if binding.session_id:
            conversation.session = await self._open(conversation, binding.session_id)
        self._by_key[target.key] = conversation
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

    async def set_model(self, conversation: Conversation, label: str, user_id: int | None) -> Session:
        """Switch the chat's session to ``label`` (already resolved) and remember it with the session,
        as an editor's model picker does. Starts a session when the chat has none."""
        self._model(label)  # built first: a failure leaves the chat as it was
        conversation.model = None if label == self.default_model else label
        session = conversation.session or await self.new_session(conversation, user_id)
        self._apply_model(conversation, session)
        await self._agent.store.update_session(session.id, model=label, meta={"model": label})
        return session

    async def save(self, conversation: Conversation) -> None:
        from core.store.gateway import ChatBinding

        sid = conversation.session.id if conversation.session else None
        await self._gateway_store.bind(ChatBinding(conversation.target.key, conversation.project, sid, conversation.mode))

    async def new_session(self, conversation: Conversation, user_id: int | None) -> Session:
        """A fresh session in the chat's project, started by ``user_id`` (it is theirs)."""
        from core.host.select import host_for

        path = Path(self._projects.paths[conversation.project])
        session = await self._agent.new_session(path, host_for(self._config, path), mode=as_mode(conversation.mode))
        if conversation.model is not None:
            self._apply_model(conversation, session)
            await self._agent.store.update_session(session.id, model=conversation.model, meta={"model": conversation.model})
        if user_id is not None:
            await self._gateway_store.record_starter(session.id, user_id, chat_key=conversation.target.key, origin="chat")
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

    def start_turn(self, conversation: Conversation, message: UserMessage, user_id: int) -> None:
        """Run a prompt in the background: the handler returns, so button presses keep flowing."""
        previous = conversation.turn

        async def run() -> None:
            if previous is not None and not previous.done():
                await asyncio.wait([previous])  # one turn at a time per chat, in order
            await self._turn(conversation, message, user_id)

        conversation.turn = asyncio.create_task(run(), name=f"turn-{conversation.target.key}")

    async def _turn(self, conversation: Conversation, message: UserMessage, user_id: int) -> None:
        session = conversation.session
        if session is not None and not await self._access.may_continue(user_id, session.id, conversation.target.key):
            # A binding from before sessions had owners, or a session the owner brought here.
            await send_text(self._bot, conversation.target, not_yours(session.id[:8]))
            return
        session = session or await self.new_session(conversation, user_id)
        stream = _Stream(self._bot, conversation.target, self._config.telegram.edit_interval)
        typing = asyncio.create_task(self._typing(conversation.target))
        conversation.busy_since = time.time()
        footer = ""
        try:
            # Tools acting in this turn (the cron tool) act for the user who sent the prompt.
            await self._gateway_store.set_turn_user(conversation.target.key, user_id)
            async for event in self._agent.run_turn(session, message):
                if isinstance(event, TextDelta):
                    stream.text.append(event.text)
                    stream.status = ""
                    await stream.update()
                elif isinstance(event, ToolStarted):
                    stream.status = f"⚙️ {event.title}"
                    await stream.update()
                elif isinstance(event, PermissionNeeded):
                    await self.approvals.ask(event.request, conversation.target, user_id)
                elif isinstance(event, Notice) and event.level != "info":
                    await send_text(self._bot, conversation.target, f"⚠️ {event.text}")
                elif isinstance(event, TurnEnded):
                    if event.stop_reason == "cancelled":
                        footer = "⏹ Stopped."
                    elif event.stop_reason == "max_tokens":
                        footer = "(The reply was cut off at the model's output limit.)"
        except Exception:
            log.exception("turn failed in chat %s", conversation.target.key)
            footer = "Internal error; the conversation is saved, try again."
        finally:
            typing.cancel()
            conversation.busy_since = None
        # Questions of this turn that were not answered (timed out, cancelled) say so first.
        await self.approvals.expire_session(session.id)
        try:
            await stream.finish(footer)
        except Exception:
            log.exception("could not deliver the reply in chat %s", conversation.target.key)
        self._watch_idle(conversation, session)
        await self._tell_idle(conversation, session)  # what ended during the turn's last step

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
            watcher = asyncio.create_task(self._when_ended(job, conversation, session), name=f"watch-{conversation.target.key}")
            self._watchers.add(watcher)
            watcher.add_done_callback(self._watchers.discard)

    async def _when_ended(self, job: Any, conversation: Conversation, session: Session) -> None:
        try:
            await job.wait()
            await self._tell_idle(conversation, session)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.debug("watching a background command in chat %s failed", conversation.target.key, exc_info=True)
        finally:
            self._watched.discard(id(job))

    async def _tell_idle(self, conversation: Conversation, session: Session) -> None:
        from core.host.processes import take_ended

        if conversation.session is not session or conversation.busy_since is not None:
            return  # the running turn tells it, with the note for the model
        lines = [ended.notice for ended in take_ended(getattr(session.host, "jobs", {}), "user")]
        if session.mcp is not None:
            lines += [notice.text for notice in session.mcp.changes(session.extra_tools)]
        for line in lines:
            await send_text(self._bot, conversation.target, f"⚠️ {line}")

    async def _typing(self, target: Target) -> None:
        while True:
            try:
                await self._bot.send_chat_action(action=ChatAction.TYPING, **target.kwargs())
            except TelegramError:
                pass
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
