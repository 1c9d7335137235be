"""The ACP agent: sessions, prompts, permissions and cancel, over the agent-client-protocol SDK."""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import os
import sys
import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from core.approvals import ApprovalBroker, ApprovalRequest, Decision
from core.config import Config, ConfigError, config_path, load_config
from core.events import PermissionNeeded, TitleChanged, TurnEnded, UsageUpdated
from core.host import LocalHost
from core.messages import ImagePart, TextPart, UserMessage
from core.models.base import ModelError
from hermes_acp.commands import INIT_PROMPT, available_commands, help_text, list_skills, parse_command, read_memory
from hermes_acp.host import AcpHost
from hermes_acp.options import DEFAULT_THOUGHT, MODES, SessionChoices, config_options, mode_state, model_choices, thought_levels
from hermes_acp.render import acp_content, update_for
from hermes_acp.replay import replay_updates
from hermes_acp.wire import request_permission, send_update

__all__ = ["HermesAgent"]

log = logging.getLogger(__name__)

SETUP_METHOD = "hermes-setup"
RELOAD_METHOD = "hermes-config"
MAX_RESOURCE_CHARS = 200_000
LIST_PAGE = 50


@dataclass(slots=True)
class _Live:
    """A session open in this process: the core session, the user's choices, its MCP servers."""

    session: Any  # core.agent.Session
    choices: SessionChoices
    mcp: Any = None  # core.mcp_client.McpConnections


def _iso(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _cost_text(session) -> str:
    usage = session.usage
    lines = [
        f"Input tokens: {usage.input_tokens:,} (cache reads {usage.cache_read_tokens:,}, cache writes {usage.cache_write_tokens:,})",
        f"Output tokens: {usage.output_tokens:,}",
    ]
    lines.append(f"Cost: ${usage.cost_usd:.4f}" if usage.cost_usd is not None else "Cost: not reported by this provider")
    return "\n".join(lines)

_OPTIONS = (
    ("allow_once", "Allow", Decision.ALLOW_ONCE),
    ("allow_always", "Always allow", Decision.ALLOW_ALWAYS),
    ("reject_once", "Reject", Decision.REJECT_ONCE),
    ("reject_always", "Always reject", Decision.REJECT_ALWAYS),
)


def _self_command() -> str:
    """An absolute command that runs this server, for editors that launch set-up themselves."""
    import shutil

    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "hermes-acp"
    if os.sep in argv0:
        return os.path.abspath(argv0)
    return shutil.which(argv0) or argv0


def _version() -> str:
    try:
        return version("hermes-editor")
    except PackageNotFoundError:
        return "0.0.0"


class HermesAgent:
    """Implements the agent side of ACP. Methods it does not define answer -32601."""

    def __init__(self, *, transport=None, redactor=None) -> None:
        self._transport = transport
        self._models: dict[str, Any] = {}
        self._conn: Any = None
        self._client_caps: Any = None
        self._config: Config | None = None
        self._config_error: str | None = None
        self._agent = None  # core.agent.Agent, built on the first session
        self._store = None
        self._sessions: dict[str, _Live] = {}
        self._redactor = redactor
        self._terminal_auth = False

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    # --- initialize / auth -------------------------------------------------------------

    async def initialize(self, protocol_version: int, client_capabilities=None, client_info=None, **_: Any):
        from acp import PROTOCOL_VERSION
        from acp.schema import (
            AgentCapabilities,
            AuthMethodAgent,
            Implementation,
            InitializeResponse,
            McpCapabilities,
            PromptCapabilities,
            SessionCapabilities,
            SessionCloseCapabilities,
            SessionForkCapabilities,
            SessionListCapabilities,
            SessionResumeCapabilities,
            TerminalAuthMethod,
        )

        self._client_caps = client_capabilities
        auth_caps = getattr(client_capabilities, "auth", None)
        self._terminal_auth = bool(getattr(auth_caps, "terminal", False) if not isinstance(auth_caps, dict) else auth_caps.get("terminal"))
        self._load_config()
        methods: list = []
        if self._terminal_auth:
            methods.append(
                TerminalAuthMethod(
                    type="terminal",
                    id=SETUP_METHOD,
                    name="Set up Hermes",
                    description="Choose a provider, API key and model in a terminal (runs hermes-acp --setup).",
                    args=["--setup"],
                )
            )
        methods.append(
            AuthMethodAgent(
                id=RELOAD_METHOD,
                name="Use my config.toml",
                description=f"Run 'hermes-acp --setup' in a terminal or edit {config_path()}, then choose this.",
                field_meta={"terminal-auth": {"command": _self_command(), "args": ["--setup"], "label": "Set up Hermes"}},
            )
        )
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(image=self._images_supported(), audio=False, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=False, sse=False),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities(),
                    fork=SessionForkCapabilities(),
                ),
            ),
            auth_methods=methods,
            agent_info=Implementation(name="hermes-editor", title="Hermes", version=_version()),
        )

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

    def _images_supported(self) -> bool:
        """Images are accepted only when the configured model's provider takes them."""
        if self._config is None or not self._config.model:
            return False
        try:
            ref = self._config.model_ref()
        except ConfigError:
            return False
        return bool(ref and ref.config.resolved_profile(ref.provider).images)

    def _ready_error(self) -> str | None:
        if self._config_error:
            return self._config_error
        if self._config is None or not self._config.model:
            return (
                f"No model is configured. Run 'hermes-acp --setup' in a terminal, or set model in {config_path()} "
                "(or HERMES_MODEL and a provider key such as OPENAI_API_KEY)."
            )
        try:
            self._config.model_ref()
        except ConfigError as exc:
            return str(exc)
        return None

    async def _core(self):
        """The agent core, built once a model is configured (heavy imports happen here)."""
        if self._agent is not None:
            return self._agent
        from acp import RequestError

        if (problem := self._ready_error()) is not None:
            raise RequestError.auth_required({"details": problem})
        from core.agent import Agent
        from core.models import build_model
        from core.store import SessionStore
        from toolsets import toolset

        config = self._config
        assert config is not None
        self._store = await SessionStore.open()
        self._agent = Agent(
            model=build_model(config),
            tools=toolset("editor"),
            store=self._store,
            broker=ApprovalBroker(self._store, timeout=config.approvals.timeout),
            surface="acp",
            max_steps=config.max_steps,
            max_tokens=config.max_tokens,
        )
        return self._agent

    # --- sessions ----------------------------------------------------------------------

    async def new_session(self, cwd: str, mcp_servers=None, additional_directories=None, **_: Any):
        from acp.schema import NewSessionResponse

        path, roots = self._check_cwd(cwd, mcp_servers, additional_directories)
        agent = await self._core()
        session = await agent.new_session(path, self._local(), roots=roots)
        live = await self._adopt(session, SessionChoices(model=agent.model.name))
        await self._save_choices(live)
        if mcp_servers:
            await self._connect_mcp(live, mcp_servers)
        if self._transport is not None:
            self._transport.after_session_answer(session.id, lambda: self._announce(live))
        log.info("session %s created in %s", session.id, path)
        return NewSessionResponse(
            session_id=session.id, modes=mode_state(live.choices.mode), config_options=self._options(live)
        )

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
        if self._transport is not None:
            self._transport.after_session_answer(session.id, lambda: self._announce(live))
        return ForkSessionResponse(
            session_id=session.id, modes=mode_state(live.choices.mode), config_options=self._options(live)
        )

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
            sessions=[
                SessionInfo(session_id=r.id, cwd=r.cwd, title=r.title, updated_at=_iso(r.updated_at)) for r in page
            ],
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
        for model in {id(m): m for m in [*self._models.values(), *( [self._agent.model] if self._agent else [])]}.values():
            try:
                await model.aclose()
            except Exception:
                log.debug("model close failed", exc_info=True)
        if self._store is not None:
            await self._store.close()

    # --- session plumbing ----------------------------------------------------------------

    def _check_cwd(self, cwd: str, mcp_servers, additional_directories) -> tuple[Path, list[Path]]:
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

    def _local(self) -> LocalHost:
        return LocalHost(self._config.secrets if self._config else [])

    async def _adopt(self, session, choices: SessionChoices) -> _Live:
        """Make a core session live here: the editor as host, the chosen model and mode."""
        session.host = AcpHost(self._conn, session.id, self._client_caps, session.host)
        live = _Live(session, choices)
        self._sessions[session.id] = live
        await self._apply_choices(live)
        return live

    async def _reopen(self, session_id: str, cwd: str, mcp_servers, additional_directories) -> _Live:
        from acp import RequestError

        path, roots = self._check_cwd(cwd, mcp_servers, additional_directories)
        agent = await self._core()
        existing = self._sessions.get(session_id)
        if existing is not None:
            await self._wait_idle(existing)
            await self._shutdown(existing)
        session = await agent.open_session(session_id, self._local(), cwd=path)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"no stored session {session_id!r}; list them with session/list"})
        session.roots = roots
        session.policy.roots = roots
        record = await self._store.get_session(session_id)
        live = await self._adopt(session, self._stored_choices(record))
        if mcp_servers:
            await self._connect_mcp(live, mcp_servers)
        return live

    def _stored_choices(self, record) -> SessionChoices:
        meta = (record.meta if record else None) or {}
        default = self._agent.model.name
        model = meta.get("model") or default
        if model not in model_choices(self._config) and model != default:
            model = default  # the stored model is no longer configured
        return SessionChoices(
            model=model,
            mode=meta.get("mode") if meta.get("mode") in MODES else "ask",
            thought_level=meta.get("thought_level") or DEFAULT_THOUGHT,
        )

    async def _apply_choices(self, live: _Live) -> None:
        session, choices = live.session, live.choices
        session.policy.mode = choices.mode
        session.model = None if choices.model == self._agent.model.name else self._model_for(choices.model)
        session.reasoning_effort = None if choices.thought_level == DEFAULT_THOUGHT else choices.thought_level
        session.context_window = self._context_window(choices.model)

    async def _save_choices(self, live: _Live) -> None:
        choices = live.choices
        await self._store.update_session(
            live.session.id,
            model=choices.model,
            meta={"mode": choices.mode, "model": choices.model, "thought_level": choices.thought_level},
        )

    def _model_for(self, label: str):
        if label not in self._models:
            from core.models import build_model

            self._models[label] = build_model(self._config.model_copy(update={"model": label}))
        return self._models[label]

    def _context_window(self, label: str) -> int:
        try:
            ref = self._config.model_ref(label)
        except ConfigError:
            return 0
        return ref.config.resolved_profile(ref.provider).context_window if ref else 0

    def _options(self, live: _Live) -> list:
        return config_options(self._config, live.choices)

    def _live(self, session_id: str) -> _Live:
        from acp import RequestError

        live = self._sessions.get(session_id)
        if live is None:
            raise RequestError.invalid_params(
                {"sessionId": f"unknown session {session_id!r}; create one with session/new or load it with session/load"}
            )
        return live

    async def _announce(self, live: _Live) -> None:
        """Tell the editor which commands this session offers."""
        from acp.schema import AvailableCommandsUpdate

        update = AvailableCommandsUpdate(session_update="available_commands_update", available_commands=available_commands())
        try:
            await send_update(self._conn, live.session.id, update)
        except Exception:
            log.debug("could not send available commands", exc_info=True)

    async def _set_mode(self, live: _Live, mode: str, *, announce_mode: bool = True, announce_options: bool = True) -> None:
        from acp import RequestError
        from acp.schema import ConfigOptionUpdate, CurrentModeUpdate

        if mode not in MODES:
            raise RequestError.invalid_params({"modeId": f"unknown mode {mode!r}; modes are {', '.join(MODES)}"})
        live.choices.mode = mode
        live.session.policy.mode = mode
        await self._save_choices(live)
        sid = live.session.id
        if announce_mode:
            await send_update(self._conn, sid, CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode))
        if announce_options:
            await send_update(self._conn, sid, ConfigOptionUpdate(session_update="config_option_update", config_options=self._options(live)))

    async def _set_model(self, live: _Live, label: str, *, announce: bool = True) -> None:
        from acp import RequestError
        from acp.schema import ConfigOptionUpdate

        try:
            ref = self._config.model_ref(label)
            self._model_for(ref.label)
        except ConfigError as exc:
            raise RequestError.invalid_params({"value": str(exc)}) from None
        live.choices.model = ref.label
        if live.choices.thought_level not in thought_levels(self._config, ref.label):
            live.choices.thought_level = DEFAULT_THOUGHT
        await self._apply_choices(live)
        await self._save_choices(live)
        if announce:
            await send_update(self._conn, live.session.id, ConfigOptionUpdate(session_update="config_option_update", config_options=self._options(live)))

    async def _wait_idle(self, live: _Live) -> None:
        turn = live.session.turn
        if turn is not None and not turn.done():
            self._agent.cancel(live.session)
            await asyncio.wait([turn], timeout=5)

    async def _shutdown(self, live: _Live) -> None:
        await self._wait_idle(live)
        if live.mcp is not None:
            await live.mcp.aclose()
            live.mcp = None

    async def _connect_mcp(self, live: _Live, servers: list) -> None:
        """MCP servers the editor passed join this session's tools (not yet supported: say so)."""
        names = ", ".join(getattr(s, "name", "?") for s in servers)
        text = f"MCP servers ({names}) were offered but are not connected in this version; the session goes on without them."
        log.warning("session %s: %s", live.session.id, text)

    def _update_for(self, event):
        """Surface-level updates (title, usage) on top of the shared rendering."""
        from acp.schema import Cost, SessionInfoUpdate, UsageUpdate

        if isinstance(event, TitleChanged):
            return SessionInfoUpdate(session_update="session_info_update", title=event.title, updated_at=_iso(time.time()))
        if isinstance(event, UsageUpdated):
            cost = Cost(amount=event.total.cost_usd, currency="USD") if event.total.cost_usd is not None else None
            return UsageUpdate(session_update="usage_update", used=event.context_tokens, size=event.context_window or event.context_tokens, cost=cost)
        return update_for(event)

    async def _command(self, live: _Live, name: str, args: str) -> str | None:
        """Run a slash command; returns a prompt for the model when the command is one (/init)."""
        import acp

        session = live.session
        if name == "init":
            return INIT_PROMPT
        if name == "help":
            text = help_text()
        elif name == "cost":
            text = _cost_text(session)
        elif name == "search":
            text = await self._search_text(args)
        elif name == "model":
            if not args:
                text = "Models: " + ", ".join(f"`{m}`" for m in model_choices(self._config)) + f". Current: `{live.choices.model}`."
            else:
                await self._set_model(live, args)
                text = f"Model for this session: `{live.choices.model}`."
        elif name == "mode":
            if args not in MODES:
                text = f"Modes: {', '.join(f'`{m}`' for m in MODES)}. Current: `{live.choices.mode}`."
            else:
                await self._set_mode(live, args)
                text = f"Mode: `{args}` — {MODES[args][1]}."
        elif name == "memory":
            text = read_memory()
        elif name == "skills":
            text = list_skills(session.cwd)
        elif name == "compact":
            try:
                summary = await self._agent.compact(session)
                text = "Compacted: later requests start from this summary.\n\n" + summary if summary else "Nothing to compact yet."
            except ModelError as exc:
                text = exc.user_message()
        elif name == "undo":
            text = "Undo is not available in this version."
        else:  # pragma: no cover - parse_command only returns known names
            text = f"Unknown command /{name}."
        await send_update(self._conn, session.id, acp.update_agent_message_text(text))
        return None

    async def _search_text(self, query: str) -> str:
        if not query:
            return "Usage: `/search <words>`."
        hits = await self._store.search(query, limit=10)
        if not hits:
            return f"No past conversation mentions {query!r}."
        lines = [f"Found in {len(hits)} place(s):"]
        for hit in hits:
            lines.append(f"- **{hit.session_title or 'untitled'}** ({hit.role}, `{hit.session_id[:8]}`): {hit.snippet}")
        return "\n".join(lines)

    # --- helpers -----------------------------------------------------------------------

    async def _ask(self, session_id: str, request: ApprovalRequest) -> None:
        """Ask the editor; the answer goes to the broker (the first answer from anywhere wins)."""
        from acp.schema import PermissionOption, ToolCallUpdate
        from core.events import DiffContent, TextContent

        content = [DiffContent(d.path, d.old_text, d.new_text) for d in request.diffs]
        if request.command:
            content.append(TextContent(f"```sh\n{request.command}\n```"))
        if request.reason and not request.diffs:
            content.append(TextContent(f"Asking because {request.reason}."))
        options = [PermissionOption(option_id=oid, name=name, kind=oid) for oid, name, _ in _OPTIONS]
        decision = Decision.CANCELLED
        try:
            response = await request_permission(
                self._conn,
                session_id,
                ToolCallUpdate(
                    tool_call_id=request.tool_call_id,
                    title=request.title,
                    kind=request.tool_kind,
                    status="pending",
                    content=acp_content(content) or None,
                ),
                options,
            )
            outcome = response.outcome
            if getattr(outcome, "outcome", None) == "selected":
                decision = next((d for oid, _, d in _OPTIONS if oid == outcome.option_id), Decision.REJECT_ONCE)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("permission request failed (%s); treating it as rejected", exc)
            decision = Decision.REJECT_ONCE
        assert self._agent is not None
        await self._agent.broker.answer(request.id, decision, by="acp")

    async def _user_message(self, blocks: list, live: _Live) -> UserMessage:
        """Text, resource links (read) and embedded resources, as one user message."""
        parts: list[TextPart | ImagePart] = []
        images = self._images_supported()
        for block in blocks:
            kind = getattr(block, "type", None)
            if kind == "text":
                parts.append(TextPart(text=block.text))
            elif kind == "image":
                if images:
                    parts.append(ImagePart(media_type=block.mime_type, data=block.data))
                else:
                    parts.append(TextPart(text="[an image was attached, but this model does not accept images]"))
            elif kind == "resource_link":
                parts.append(TextPart(text=await self._linked(block, live.session)))
            elif kind == "resource":
                resource = block.resource
                text = getattr(resource, "text", None)
                mime = getattr(resource, "mime_type", None) or ""
                if text is not None:
                    parts.append(TextPart(text=f'<context uri="{resource.uri}">\n{text[:MAX_RESOURCE_CHARS]}\n</context>'))
                elif mime.startswith("image/") and images:
                    parts.append(ImagePart(media_type=mime, data=resource.blob))
                else:
                    parts.append(TextPart(text=f"[attached binary resource {resource.uri} ({mime or 'unknown type'}) omitted]"))
            else:
                parts.append(TextPart(text=f"[{kind} content is not supported and was omitted]"))
        if not parts:
            parts.append(TextPart(text=""))
        return UserMessage(parts=parts)

    async def _linked(self, block, session) -> str:
        uri = block.uri
        if uri.startswith("file://"):
            from urllib.parse import unquote, urlparse

            path = Path(unquote(urlparse(uri).path))
            if path.is_file():
                try:
                    text = await session.host.read_text(path)
                    return f'<context uri="{uri}">\n{text[:MAX_RESOURCE_CHARS]}\n</context>'
                except (OSError, UnicodeError):
                    pass
        return f"[{block.name}]({uri})"
