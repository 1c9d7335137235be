"""The ACP server's live sessions: adopting, reopening, choices, modes, models, MCP servers."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config import ConfigError
from core.events import TitleChanged, UsageUpdated
from hermes_acp.commands import available_commands, commands_stamp, session_toolsets
from hermes_acp.host import AcpHost
from hermes_acp.live import LiveSession, iso, mcp_spec
from hermes_acp.options import DEFAULT_THOUGHT, MODES, SessionChoices, config_options, thought_levels
from hermes_acp.render import update_for
from hermes_acp.wire import send_update

if TYPE_CHECKING:
    from core.agent.loop import Agent
    from core.config import Config
    from core.store import SessionStore
    from core.store.records import SessionRecord
    from hermes_acp.backend import Backend

__all__ = ["SessionOps"]

log = logging.getLogger(__name__)


class SessionOps:
    """The sessions live in this server, and what the protocol methods do with them."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.sessions: dict[str, LiveSession] = {}
        self.failed: dict[str, str] = {}  # given session id -> why it could not be created
        self._models: dict[str, Any] = {}
        self._closing: set[asyncio.Task[None]] = set()

    @property
    def agent(self) -> Agent:
        agent = self._backend.agent
        assert agent is not None, "sessions exist only once the agent core is built"
        return agent

    @property
    def store(self) -> SessionStore:
        store = self._backend.store
        assert store is not None, "sessions exist only once the agent core is built"
        return store

    @property
    def config(self) -> Config:
        config = self._backend.config
        assert config is not None, "sessions exist only once a configuration has loaded"
        return config

    def check_cwd(self, cwd: str, mcp_servers, additional_directories) -> tuple[Path, list[Path]]:
        from acp import RequestError

        if mcp_servers is None:
            raise RequestError.invalid_params({"mcpServers": "required (use [] for none)"})
        path = Path(cwd)
        if not path.is_absolute():
            raise RequestError.invalid_params({"cwd": f"must be an absolute path, got {cwd!r}"})
        if not path.is_dir():
            raise RequestError.invalid_params({"cwd": f"{cwd} is not a directory"})
        extra = [Path(d) for d in (additional_directories or [])]
        for directory in extra:
            if not directory.is_absolute() or not directory.is_dir():
                raise RequestError.invalid_params({"additionalDirectories": f"{directory} is not an absolute directory"})
        return path, [path.resolve(), *(d.resolve() for d in extra)]

    async def adopt(self, session, choices: SessionChoices) -> LiveSession:
        """Make a core session live here: the editor as host, the chosen model and mode."""
        session.host = AcpHost(self._backend.conn, session.id, self._backend.client_caps, session.host)
        live = LiveSession(session, choices)
        session.host.on_job_end = lambda _job: self.show_ended(live)
        if session.mcp is not None:  # an MCP server going down or coming back is told at once when no turn runs
            session.mcp.on_change = lambda: self.show_mcp(live)
        self.sessions[session.id] = live
        await self._apply_choices(live)
        return live

    async def reopen(self, session_id: str, cwd: str, mcp_servers, additional_directories, *, read_history: bool = True) -> LiveSession:
        """Make a stored session live here (``read_history=False``: its next turn reads its history,
        as a replay streams it from the store instead)."""
        from acp import RequestError

        path, roots = self.check_cwd(cwd, mcp_servers, additional_directories)
        agent = await self._backend.core()
        existing = self.sessions.get(session_id)
        if existing is not None:
            await self.wait_idle(existing)
            await self.shutdown(existing)
        session = await agent.open_session(session_id, self._backend.host(path), cwd=path, read_history=read_history)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"no stored session {session_id!r}; list them with session/list"})
        session.roots = roots
        session.policy.roots = roots
        record = await self.store.get_session(session_id)
        live = await self.adopt(session, self.stored_choices(record))
        live.answered.set()  # the client named this session itself
        if mcp_servers:
            await self.connect_mcp(live, mcp_servers)
        return live

    def stored_choices(self, record: SessionRecord | None) -> SessionChoices:
        meta = (record.meta if record else None) or {}
        default = self.agent.model.name
        model = meta.get("model") or default
        if model not in self.config.model_choices() and model != default:
            model = default  # the stored model is no longer configured
        mode = meta.get("mode")
        return SessionChoices(
            model=model,
            mode=mode if isinstance(mode, str) and mode in MODES else "ask",
            thought_level=meta.get("thought_level") or DEFAULT_THOUGHT,
        )

    async def _apply_choices(self, live: LiveSession) -> None:
        session, choices = live.session, live.choices
        session.policy.mode = choices.mode
        session.model = None if choices.model == self.agent.model.name else self._model_for(choices.model)
        session.reasoning_effort = None if choices.thought_level == DEFAULT_THOUGHT else choices.thought_level
        session.context_window = self.config.context_window(choices.model)

    async def save_choices(self, live: LiveSession) -> None:
        choices = live.choices
        await self.store.update_session(
            live.session.id,
            model=choices.model,
            meta={"mode": choices.mode, "model": choices.model, "thought_level": choices.thought_level},
        )

    def _model_for(self, label: str):
        if label not in self._models:
            from core.models import build_model

            self._models[label] = build_model(self.config.model_copy(update={"model": label}))
        return self._models[label]

    def options(self, live: LiveSession) -> list:
        return config_options(self.config, live.choices)

    def live(self, session_id: str) -> LiveSession:
        from acp import RequestError

        live = self.sessions.get(session_id)
        if live is None and session_id in self.failed:
            raise RequestError.internal_error(
                {"sessionId": f"session {session_id!r} could not be created: {self.failed[session_id]}; start a new session"}
            )
        if live is None:
            raise RequestError.invalid_params(
                {"sessionId": f"unknown session {session_id!r}; create one with session/new or load it with session/load"}
            )
        return live

    def after_answer(self, live: LiveSession) -> None:
        """Once the client has the new session's id: announce commands, allow notices."""

        async def answered() -> None:
            live.answered.set()
            await self.announce(live)

        if self._backend.transport is not None:
            self._backend.transport.after_session_answer(live.session.id, answered)
        else:
            live.answered.set()

    async def announce(self, live: LiveSession) -> None:
        """Tell the editor which commands this session offers (built-ins, skills, project commands)."""
        from acp.schema import AvailableCommandsUpdate

        cwd, toolsets = live.session.cwd, session_toolsets(live.session)
        # Skills and project commands are files: read off the event loop.
        live.commands_stamp, offered = await asyncio.to_thread(lambda: (commands_stamp(cwd), available_commands(cwd, toolsets)))
        update = AvailableCommandsUpdate(session_update="available_commands_update", available_commands=offered)
        try:
            await send_update(self._backend.conn, live.session.id, update)
        except Exception:
            log.debug("could not send available commands", exc_info=True)

    async def refresh_commands(self, live: LiveSession) -> None:
        """After a turn, as the session's context files are checked: re-offer changed skills and project commands."""
        if live.commands_stamp and await asyncio.to_thread(commands_stamp, live.session.cwd) != live.commands_stamp:
            await self.announce(live)

    async def show_ended(self, live: LiveSession) -> None:
        """Tell the user of background commands that ended unread, when no turn runs (a running
        turn tells them itself, with the note for the model, at its next request)."""
        from core.events import Notice
        from core.host.processes import take_ended

        turn = live.session.turn
        if (turn is not None and not turn.done()) or live.session.lock.locked() or self.sessions.get(live.session.id) is not live:
            return
        for ended in take_ended(live.session.host.jobs, "user"):
            await send_update(self._backend.conn, live.session.id, update_for(Notice(ended.notice, "warning")))

    async def show_mcp(self, live: LiveSession) -> None:
        """Tell the user of MCP servers that went down or came back, when no turn runs (a running
        turn tells them itself, at its next step)."""
        turn = live.session.turn
        if (turn is not None and not turn.done()) or live.session.lock.locked() or self.sessions.get(live.session.id) is not live:
            return
        if live.answered.is_set():
            for notice in live.session.mcp.changes(live.session.extra_tools):
                await send_update(self._backend.conn, live.session.id, update_for(notice))

    async def set_mode(self, live: LiveSession, mode: str, *, announce_mode: bool = True, announce_options: bool = True) -> None:
        from acp import RequestError
        from acp.schema import ConfigOptionUpdate, CurrentModeUpdate

        if mode not in MODES:
            raise RequestError.invalid_params({"modeId": f"unknown mode {mode!r}; modes are {', '.join(MODES)}"})
        live.choices.mode = mode
        live.session.policy.mode = mode
        await self.save_choices(live)
        sid = live.session.id
        if announce_mode:
            await send_update(self._backend.conn, sid, CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode))
        if announce_options:
            await send_update(
                self._backend.conn, sid, ConfigOptionUpdate(session_update="config_option_update", config_options=self.options(live))
            )

    async def set_model(self, live: LiveSession, label: str, *, announce: bool = True) -> None:
        from acp import RequestError
        from acp.schema import ConfigOptionUpdate

        try:
            ref = self.config.model_ref(label)
            if ref is None:
                raise ConfigError("no model named")
            self._model_for(ref.label)
        except ConfigError as exc:
            raise RequestError.invalid_params({"value": str(exc)}) from None
        live.choices.model = ref.label
        if live.choices.thought_level not in thought_levels(self.config, ref.label):
            live.choices.thought_level = DEFAULT_THOUGHT
        await self._apply_choices(live)
        await self.save_choices(live)
        if announce:
            await send_update(
                self._backend.conn,
                live.session.id,
                ConfigOptionUpdate(session_update="config_option_update", config_options=self.options(live)),
            )

    async def wait_idle(self, live: LiveSession) -> None:
        turn = live.session.turn
        if turn is not None and not turn.done():
            self.agent.cancel(live.session)
            await asyncio.wait([turn], timeout=5)

    async def shutdown(self, live: LiveSession, *, wait: bool = False) -> None:
        await self.wait_idle(live)
        if hasattr(live.session.host, "aclose"):
            await live.session.host.aclose()  # background commands stop, their terminals are released
        if live.mcp_ready is not None and not live.mcp_ready.done():
            live.mcp_ready.cancel()
        if live.mcp is not None:
            # A stdio server that ignores its closed stdin takes seconds to stop: not the editor's wait.
            closing = asyncio.create_task(live.mcp.aclose())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
            live.mcp = None
            if wait:
                await closing

    async def connect_mcp(self, live: LiveSession, servers: list) -> None:
        """Start the MCP servers the editor passed, in the background; their tools join the session.

        The first prompt waits for them (bounded by the start timeout); a server that fails is
        reported in the thread and the session goes on without it.
        """
        live.mcp_ready = asyncio.create_task(self._start_mcp(live, servers))

    async def _start_mcp(self, live: LiveSession, servers: list) -> None:
        from core.tools.mcp_client import McpConnections

        specs, problems = [], []
        for server in servers:
            spec = mcp_spec(server)
            if spec is None:
                problems.append(
                    f"MCP server '{getattr(server, 'name', '?')}' uses a transport this agent does not support; the session goes on without it."
                )
            else:
                specs.append(spec)
        connections = McpConnections(cwd=live.session.cwd)
        live.mcp = connections
        try:
            problems += await connections.start(specs)
            live.session.extra_tools = {tool.name: tool for tool in connections.tools()}
        except Exception as exc:  # never let a server take the session down
            log.exception("MCP start failed")
            problems.append(f"MCP servers could not be started: {exc}")
        names = ", ".join(sorted(live.session.extra_tools)) or "none"
        log.info("session %s: MCP tools: %s", live.session.id, names)
        if problems:
            await live.answered.wait()
            import acp

            text = "\n".join(f"**MCP:** {problem}" for problem in problems)
            await send_update(self._backend.conn, live.session.id, acp.update_agent_message_text(text + "\n\n"))

    async def subagent_replay(self, live: LiveSession) -> dict[str, list]:
        """For the replay of ``session/load``: each delegate call's subagents (from their stored
        sessions) as content of that call, by call id."""
        from hermes_acp.replay import subagent_content

        found: dict[str, list[tuple[int, list]]] = {}
        for record in await self.store.subagent_sessions(live.session.id):
            history = [m.message for m in await self.store.messages(record.id)]
            number = (record.meta.get("subagent") or {}).get("number")
            found.setdefault(record.parent_call_id or "", []).append((number if isinstance(number, int) else 0, history))
        tools = self.agent.tools_for(live.session)
        return {call: subagent_content(sorted(children, key=lambda c: c[0]), tools) for call, children in found.items()}

    def update_for(self, event):
        """Surface-level updates (title, usage) on top of the shared rendering."""
        from acp.schema import Cost, SessionInfoUpdate, UsageUpdate

        if isinstance(event, TitleChanged):
            return SessionInfoUpdate(session_update="session_info_update", title=event.title, updated_at=iso(time.time()))
        if isinstance(event, UsageUpdated):
            cost = Cost(amount=event.total.cost_usd, currency="USD") if event.total.cost_usd is not None else None
            return UsageUpdate(
                session_update="usage_update", used=event.context_tokens, size=event.context_window or event.context_tokens, cost=cost
            )
        return update_for(event)

    async def aclose(self) -> None:
        """Shut every session down, wait for their MCP servers to stop, release the session models."""
        for live in list(self.sessions.values()):
            await self.shutdown(live)
        self.sessions.clear()
        if self._closing:
            await asyncio.wait(list(self._closing), timeout=10)
        for model in self._models.values():
            try:
                await model.aclose()
            except Exception:
                log.debug("model close failed", exc_info=True)
