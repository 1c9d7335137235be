"""The ACP agent: sessions, prompts, permissions and cancel, over the agent-client-protocol SDK."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from core.approvals import ApprovalBroker, ApprovalRequest, Decision
from core.config import Config, ConfigError, config_path, load_config
from core.events import PermissionNeeded, TurnEnded
from core.host import LocalHost
from core.messages import TextPart, UserMessage
from hermes_acp.host import AcpHost
from hermes_acp.render import acp_content, update_for
from hermes_acp.wire import request_permission, send_update

__all__ = ["HermesAgent"]

log = logging.getLogger(__name__)

SETUP_METHOD = "hermes-setup"
RELOAD_METHOD = "hermes-config"
MAX_RESOURCE_CHARS = 200_000

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

    def __init__(self, *, redactor=None) -> None:
        self._conn: Any = None
        self._client_caps: Any = None
        self._config: Config | None = None
        self._config_error: str | None = None
        self._agent = None  # core.agent.Agent, built on the first session
        self._store = None
        self._sessions: dict[str, Any] = {}
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
                load_session=False,
                prompt_capabilities=PromptCapabilities(image=False, audio=False, embedded_context=True),
                mcp_capabilities=McpCapabilities(http=False, sse=False),
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
        from acp import RequestError
        from acp.schema import NewSessionResponse

        if mcp_servers is None:
            raise RequestError.invalid_params({"mcpServers": "required (use [] for none)"})
        path = Path(cwd)
        if not path.is_absolute():
            raise RequestError.invalid_params({"cwd": f"must be an absolute path, got {cwd!r}"})
        if not path.is_dir():
            raise RequestError.invalid_params({"cwd": f"{cwd} is not a directory"})
        agent = await self._core()
        roots = [path] + [Path(d) for d in (additional_directories or []) if Path(d).is_absolute()]
        local = LocalHost(self._config.secrets if self._config else [])
        session = await agent.new_session(path, local, roots=roots)
        session.host = AcpHost(self._conn, session.id, self._client_caps, local)
        self._sessions[session.id] = session
        if mcp_servers:
            log.info("session %s: %d MCP server(s) offered; not yet connected", session.id, len(mcp_servers))
        log.info("session %s created in %s", session.id, path)
        return NewSessionResponse(session_id=session.id)

    async def prompt(self, prompt: list, session_id: str, **_: Any):
        from acp import RequestError
        from acp.schema import PromptResponse

        session = self._sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"unknown session {session_id!r}; create one with session/new"})
        agent = await self._core()
        message = await self._user_message(prompt, session)
        asks: set[asyncio.Task] = set()
        stop = "end_turn"
        try:
            async for event in agent.run_turn(session, message):
                if isinstance(event, PermissionNeeded):
                    task = asyncio.create_task(self._ask(session_id, event.request))
                    asks.add(task)
                    task.add_done_callback(asks.discard)
                    continue
                if isinstance(event, TurnEnded):
                    stop = event.stop_reason
                    continue
                update = update_for(event)
                if update is not None:
                    await send_update(self._conn, session_id, update)
        finally:
            for task in asks:
                task.cancel()
        return PromptResponse(stop_reason=stop)

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None and self._agent is not None:
            log.info("session %s: cancel", session_id)
            self._agent.cancel(session)

    async def aclose(self) -> None:
        """Stop running turns and release the model client and the store (stdin closed)."""
        if self._agent is not None:
            for session in self._sessions.values():
                self._agent.cancel(session)
            turns = [s.turn for s in self._sessions.values() if s.turn is not None]
            if turns:
                await asyncio.wait(turns, timeout=2)
            try:
                await self._agent.model.aclose()
            except Exception:
                log.debug("model close failed", exc_info=True)
        if self._store is not None:
            await self._store.close()

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

    async def _user_message(self, blocks: list, session) -> UserMessage:
        """Text, resource links (read) and embedded resources, as one user message."""
        parts: list[TextPart] = []
        for block in blocks:
            kind = getattr(block, "type", None)
            if kind == "text":
                parts.append(TextPart(text=block.text))
            elif kind == "resource_link":
                parts.append(TextPart(text=await self._linked(block, session)))
            elif kind == "resource":
                resource = block.resource
                text = getattr(resource, "text", None)
                if text is not None:
                    parts.append(TextPart(text=f'<context uri="{resource.uri}">\n{text[:MAX_RESOURCE_CHARS]}\n</context>'))
                else:
                    parts.append(TextPart(text=f"[attached binary resource {resource.uri} omitted]"))
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
