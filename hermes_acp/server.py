"""The ACP agent: sessions, prompts, permissions and cancel, over the agent-client-protocol SDK."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from typing import Any

from core.config import Config, ConfigError, config_path, load_config
from core.events import PermissionNeeded, TurnEnded
from core.messages import UserMessage
from hermes_acp.commands import parse_command
from hermes_acp.handshake import RELOAD_METHOD, SETUP_METHOD, images_supported, initialize_result, new_session_result, not_ready
from hermes_acp.live import LiveSession, iso
from hermes_acp.options import DEFAULT_THOUGHT, SessionChoices, mode_state, thought_levels
from hermes_acp.replay import replay_updates
from hermes_acp.session_ops import SessionPlumbing
from hermes_acp.turns import TurnSupport
from hermes_acp.wire import send_update

__all__ = ["HermesAgent"]

log = logging.getLogger(__name__)

LIST_PAGE = 50


class HermesAgent(SessionPlumbing, TurnSupport):
    """Implements the agent side of ACP. Methods it does not define answer -32601."""

    def __init__(self, *, transport=None, redactor=None, given_session_ids=()) -> None:
        self._transport = transport
        self._models: dict[str, Any] = {}
        self._conn: Any = None
        self._client_caps: Any = None
        self._config: Config | None = None
        self._config_error: str | None = None
        self._agent = None  # core.agent.loop.Agent, built on the first session
        self._store = None
        self._sessions: dict[str, LiveSession] = {}
        self._closing: set[asyncio.Task] = set()
        self._watch: asyncio.Task | None = None
        self._redactor = redactor
        self._terminal_auth = False
        self._given_ids: list[str] = list(given_session_ids or ())
        self._failed: dict[str, str] = {}  # given session id -> why it could not be created

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    # --- initialize / auth -------------------------------------------------------------

    async def initialize(self, protocol_version: int, client_capabilities=None, client_info=None, **_: Any):
        from acp.schema import InitializeResponse

        self._client_caps = client_capabilities
        auth_caps = getattr(client_capabilities, "auth", None)
        self._terminal_auth = bool(getattr(auth_caps, "terminal", False) if not isinstance(auth_caps, dict) else auth_caps.get("terminal"))
        self._load_config()
        result = initialize_result(
            protocol_version, terminal_auth=self._terminal_auth, images=images_supported(self._config), config_file=config_path()
        )
        return InitializeResponse.model_validate(result)

    async def authenticate(self, method_id: str, **_: Any):
        from acp import RequestError
        from acp.schema import AuthenticateResponse

        if method_id not in (SETUP_METHOD, RELOAD_METHOD):
            raise RequestError.invalid_params({"methodId": f"unknown auth method {method_id!r}"})
        self._load_config()
        if self._ready_error() is not None:
            raise RequestError.auth_required({"details": self._ready_error()})
        return AuthenticateResponse()

    def _load_config(self) -> None:
        try:
            self._config = load_config()
            self._config_error = None
        except ConfigError as exc:
            self._config, self._config_error = None, str(exc)
        if self._config is not None and self._redactor is not None:
            self._redactor.add(self._config.secrets)

    def _ready_error(self) -> str | None:
        return not_ready(self._config, self._config_error)

    async def _core(self):
        """The agent core, built once a model is configured (heavy imports happen here)."""
        if self._agent is not None:
            return self._agent
        from acp import RequestError

        if (problem := self._ready_error()) is not None:
            raise RequestError.auth_required({"details": problem})
        from core.agent.builder import build_agent
        from core.store import SessionStore
        from toolsets import toolset

        config = self._config
        assert config is not None
        self._store = await SessionStore.open()
        self._agent = build_agent(config, "acp", toolset=toolset, store=self._store)
        from surface_support.approval_watch import watch_foreign_answers

        # Questions of this process may be answered elsewhere (hermes-mcp, the gateway).
        self._watch = asyncio.create_task(watch_foreign_answers(self._agent.broker, self._store))
        return self._agent

    # --- sessions ----------------------------------------------------------------------

    async def new_session(self, cwd: str, mcp_servers=None, additional_directories=None, **_: Any):
        from acp.schema import NewSessionResponse

        # The first session/new may already have been answered, with this id (hermes_acp.handshake).
        given = self._given_ids.pop(0) if self._given_ids else None
        try:
            path, roots = self._check_cwd(cwd, mcp_servers, additional_directories)
            agent = await self._core()
            session = await agent.new_session(path, self._local(), roots=roots, session_id=given)
            live = await self._adopt(session, SessionChoices(model=agent.model.name))
            await self._save_choices(live)
            if mcp_servers:
                await self._connect_mcp(live, mcp_servers)
        except Exception as exc:
            if given is not None:
                self._failed[given] = _details(exc)
                log.error("session %s, already announced to the client, could not be created: %s", given, self._failed[given])
            raise
        self._after_answer(live)
        log.info("session %s created in %s", session.id, path)
        return NewSessionResponse.model_validate(new_session_result(session.id, self._config, live.choices))

    async def load_session(self, cwd: str, session_id: str, mcp_servers=None, additional_directories=None, **_: Any):
        """Replay the whole stored conversation, then answer."""
        from acp.schema import LoadSessionResponse

        live = await self._reopen(session_id, cwd, mcp_servers, additional_directories)
        started = time.perf_counter()
        updates = replay_updates(live.session.history, self._agent.tools_for(live.session), live.session.cwd)
        for update in updates:
            await send_update(self._conn, session_id, update)
        log.info("session %s replayed: %d updates in %.0f ms", session_id, len(updates), (time.perf_counter() - started) * 1000)
        await self._announce(live)
        return LoadSessionResponse(modes=mode_state(live.choices.mode), config_options=self._options(live))

    async def resume_session(self, session_id: str, cwd: str, mcp_servers=None, additional_directories=None, **_: Any):
        """Reattach without replaying (the client still shows the conversation)."""
        from acp.schema import ResumeSessionResponse

        live = await self._reopen(session_id, cwd, mcp_servers, additional_directories)
        await self._announce(live)
        return ResumeSessionResponse(modes=mode_state(live.choices.mode), config_options=self._options(live))

    async def fork_session(self, session_id: str, cwd: str, mcp_servers=None, additional_directories=None, **_: Any):
        """A new session that starts with a copy of this one's conversation."""
        from acp import RequestError
        from acp.schema import ForkSessionResponse

        path, roots = self._check_cwd(cwd, mcp_servers, additional_directories)
        agent = await self._core()
        source = self._sessions.get(session_id)
        if source is not None:
            await self._wait_idle(source)
        session = await agent.fork_session(session_id, self._local(), cwd=path)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"no session {session_id!r} to fork"})
        session.roots = roots
        record = await self._store.get_session(session_id)
        live = await self._adopt(session, self._stored_choices(record))
        await self._save_choices(live)
        if mcp_servers:
            await self._connect_mcp(live, mcp_servers)
        self._after_answer(live)
        return ForkSessionResponse.model_validate(new_session_result(session.id, self._config, live.choices))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **_: Any):
        """Stored sessions, newest first, optionally for one directory, paged by an opaque cursor."""
        from acp import RequestError
        from acp.schema import ListSessionsResponse, SessionInfo

        await self._core()
        before = None
        if cursor:
            try:
                before = float(base64.urlsafe_b64decode(cursor.encode()).decode())
            except (ValueError, UnicodeDecodeError):
                raise RequestError.invalid_params({"cursor": "not a cursor this server returned"}) from None
        records = await self._store.list_sessions(cwd=cwd, limit=LIST_PAGE + 1, before=before)
        page = records[:LIST_PAGE]
        next_cursor = None
        if len(records) > LIST_PAGE:
            next_cursor = base64.urlsafe_b64encode(repr(page[-1].updated_at).encode()).decode()
        return ListSessionsResponse(
            sessions=[SessionInfo(session_id=r.id, cwd=r.cwd, title=r.title, updated_at=iso(r.updated_at)) for r in page],
            next_cursor=next_cursor,
        )

    async def close_session(self, session_id: str, **_: Any):
        """Stop the session's work, shut its MCP servers down and forget it (the store keeps it)."""
        from acp.schema import CloseSessionResponse

        live = self._sessions.pop(session_id, None)
        if live is not None:
            await self._shutdown(live)
        return CloseSessionResponse()

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any):
        from acp.schema import SetSessionModeResponse

        live = self._live(session_id)
        await self._set_mode(live, mode_id, announce_mode=False)
        return SetSessionModeResponse()

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool, **_: Any):
        from acp import RequestError
        from acp.schema import SetSessionConfigOptionResponse

        live = self._live(session_id)
        if config_id == "mode":
            await self._set_mode(live, str(value), announce_options=False)
        elif config_id == "model":
            offered = [o.value for o in self._options(live)[0].options]
            if value not in offered:
                raise RequestError.invalid_params({"value": f"model must be one of: {', '.join(offered)}"})
            await self._set_model(live, str(value), announce=False)
        elif config_id == "thought_level":
            levels = thought_levels(self._config, live.choices.model)
            if value != DEFAULT_THOUGHT and value not in levels:
                raise RequestError.invalid_params({"value": f"thought_level must be one of: default, {', '.join(levels)}"})
            live.choices.thought_level = str(value)
            live.session.reasoning_effort = None if value == DEFAULT_THOUGHT else str(value)
            await self._save_choices(live)
        else:
            raise RequestError.invalid_params({"configId": f"unknown option {config_id!r}; options are model, mode, thought_level"})
        return SetSessionConfigOptionResponse(config_options=self._options(live))

    async def prompt(self, prompt: list, session_id: str, **_: Any):
        from acp.schema import PromptResponse

        live = self._live(session_id)
        agent = await self._core()
        if live.mcp_ready is not None and not live.mcp_ready.done():
            await asyncio.wait([live.mcp_ready])
        first = next((b.text for b in prompt if getattr(b, "type", None) == "text"), "")
        command = parse_command(first) if first.lstrip().startswith("/") else None
        if command is not None:
            reply = await self._command(live, *command)
            if reply is None:
                return PromptResponse(stop_reason="end_turn")
            message = UserMessage.of(reply)
        else:
            message = await self._user_message(prompt, live)
        asks: set[asyncio.Task] = set()
        stop = "end_turn"
        try:
            async for event in agent.run_turn(live.session, message):
                if isinstance(event, PermissionNeeded):
                    task = asyncio.create_task(self._ask(session_id, event.request))
                    asks.add(task)
                    task.add_done_callback(asks.discard)
                    continue
                if isinstance(event, TurnEnded):
                    stop = event.stop_reason
                    continue
                update = self._update_for(event)
                if update is not None:
                    await send_update(self._conn, session_id, update)
        finally:
            for task in asks:
                task.cancel()
        return PromptResponse(stop_reason=stop)

    async def cancel(self, session_id: str, **_: Any) -> None:
        live = self._sessions.get(session_id)
        if live is not None and self._agent is not None:
            log.info("session %s: cancel", session_id)
            self._agent.cancel(live.session)

    async def aclose(self) -> None:
        """Stop running turns and release MCP servers, the model clients and the store (stdin closed)."""
        for live in list(self._sessions.values()):
            await self._shutdown(live)
        self._sessions.clear()
        if self._closing:
            await asyncio.wait(list(self._closing), timeout=10)
        for model in {id(m): m for m in [*self._models.values(), *([self._agent.model] if self._agent else [])]}.values():
            try:
                await model.aclose()
            except Exception:
                log.debug("model close failed", exc_info=True)
        if self._watch is not None:
            self._watch.cancel()
        if self._store is not None:
            await self._store.close()

    # --- session plumbing ----------------------------------------------------------------


def _details(exc: Exception) -> str:
    """What a failed request says: a protocol error's data, or the exception's text."""
    data = getattr(exc, "data", None)
    if isinstance(data, dict) and data:
        return "; ".join(f"{k}: {v}" for k, v in data.items())
    return str(exc) or type(exc).__name__
