"""The ACP agent: sessions, prompts, permissions and cancel, over the agent-client-protocol SDK.

The protocol methods are here; they delegate to the backend (connection, configuration, agent core),
the live sessions (``SessionOps``) and the prompt helpers (``Turns``).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from core.config import config_path
from core.events import PermissionNeeded, StopReason, TurnEnded
from core.messages import UserMessage
from hermes_acp import startup_gc
from hermes_acp.backend import Backend
from hermes_acp.commands import parse_command, session_toolsets
from hermes_acp.handshake import (
    RELOAD_METHOD,
    SETUP_METHOD,
    audio_supported,
    images_supported,
    initialize_result,
    new_session_result,
)
from hermes_acp.live import iso
from hermes_acp.options import DEFAULT_THOUGHT, SessionChoices, mode_state, thought_levels
from hermes_acp.replay import Replay, send_replay
from hermes_acp.session_ops import SessionOps
from hermes_acp.turns import Turns
from hermes_acp.wire import send_update, send_updates

if TYPE_CHECKING:
    from acp.interfaces import Client
    from acp.schema import (
        AcpMcpServer,
        AudioContentBlock,
        AuthenticateResponse,
        ClientCapabilities,
        CloseSessionResponse,
        EmbeddedResourceContentBlock,
        ForkSessionResponse,
        HttpMcpServer,
        ImageContentBlock,
        Implementation,
        InitializeResponse,
        ListSessionsResponse,
        LoadSessionResponse,
        McpServerStdio,
        NewSessionResponse,
        PromptResponse,
        ResourceContentBlock,
        ResumeSessionResponse,
        SetSessionConfigOptionResponse,
        SetSessionModeResponse,
        SseMcpServer,
        TextContentBlock,
    )

    from core.logs import RedactingFilter
    from hermes_acp.transport import StdioTransport

    McpServers = list[HttpMcpServer | SseMcpServer | AcpMcpServer | McpServerStdio]
    PromptBlock = TextContentBlock | ImageContentBlock | AudioContentBlock | ResourceContentBlock | EmbeddedResourceContentBlock

__all__ = ["HermesAgent"]

log = logging.getLogger(__name__)

LIST_PAGE = 50


class HermesAgent:
    """Implements the agent side of ACP. Methods it does not define answer -32601."""

    def __init__(
        self,
        *,
        transport: StdioTransport | None = None,
        redactor: RedactingFilter | None = None,
        given_session_ids: Iterable[str] = (),
    ) -> None:
        self._backend = Backend(transport=transport, redactor=redactor)
        self._ops = SessionOps(self._backend)
        self._turns = Turns(self._backend, self._ops)
        self._terminal_auth = False
        self._given_ids: list[str] = list(given_session_ids or ())

    def on_connect(self, conn: Client) -> None:
        self._backend.conn = conn

    # --- initialize / auth -------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **_: Any,
    ) -> InitializeResponse:
        from acp.schema import InitializeResponse

        self._backend.client_caps = client_capabilities
        auth_caps = getattr(client_capabilities, "auth", None)
        self._terminal_auth = bool(getattr(auth_caps, "terminal", False) if not isinstance(auth_caps, dict) else auth_caps.get("terminal"))
        self._backend.load_config()
        config = self._backend.config
        result = initialize_result(
            protocol_version,
            terminal_auth=self._terminal_auth,
            images=images_supported(config),
            audio=audio_supported(config),
            config_file=config_path(),
        )
        return InitializeResponse.model_validate(result)

    async def authenticate(self, method_id: str, **_: Any) -> AuthenticateResponse:
        from acp import RequestError
        from acp.schema import AuthenticateResponse

        if method_id not in (SETUP_METHOD, RELOAD_METHOD):
            raise RequestError.invalid_params({"methodId": f"unknown auth method {method_id!r}"})
        self._backend.load_config()
        if self._backend.ready_error() is not None:
            raise RequestError.auth_required({"details": self._backend.ready_error()})
        return AuthenticateResponse()

    # --- sessions ----------------------------------------------------------------------

    async def new_session(
        self, cwd: str, additional_directories: list[str] | None = None, mcp_servers: McpServers | None = None, **_: Any
    ) -> NewSessionResponse:
        from acp.schema import NewSessionResponse

        # The first session/new may already have been answered, with this id (hermes_acp.handshake).
        given = self._given_ids.pop(0) if self._given_ids else None
        try:
            path, roots = self._ops.check_cwd(cwd, mcp_servers, additional_directories)
            agent = await self._backend.core()
            session = await agent.new_session(path, self._backend.host(path), roots=roots, session_id=given)
            live = await self._ops.adopt(session, SessionChoices(model=agent.model.name))
            await self._ops.save_choices(live)
            if mcp_servers:
                await self._ops.connect_mcp(live, mcp_servers)
        except Exception as exc:
            if given is not None:
                self._ops.failed[given] = _details(exc)
                log.error("session %s, already announced to the client, could not be created: %s", given, self._ops.failed[given])
            raise
        self._ops.after_answer(live)
        log.info("session %s created in %s", session.id, path)
        return NewSessionResponse.model_validate(new_session_result(session.id, self._ops.config, live.choices))

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: McpServers | None = None, additional_directories: list[str] | None = None, **_: Any
    ) -> LoadSessionResponse:
        """Replay the whole stored conversation, then answer."""
        from acp.schema import LoadSessionResponse

        # Not the history: the replay streams it from the store, and the next turn reads it.
        live = await self._ops.reopen(session_id, cwd, mcp_servers, additional_directories, read_history=False)
        started = time.perf_counter()
        subagents = await self._ops.subagent_replay(live)
        replay = Replay(self._ops.agent.tools_for(live.session), live.session.cwd, subagents, host=live.session.host)
        sent = await send_replay(self._ops.store, session_id, replay, partial(send_updates, self._backend.conn, session_id))
        log.info("session %s replayed: %d updates in %.0f ms", session_id, sent, (time.perf_counter() - started) * 1000)
        await self._ops.announce(live)
        return LoadSessionResponse(modes=mode_state(live.choices.mode), config_options=self._ops.options(live))

    async def resume_session(
        self, session_id: str, cwd: str, additional_directories: list[str] | None = None, mcp_servers: McpServers | None = None, **_: Any
    ) -> ResumeSessionResponse:
        """Reattach without replaying (the client still shows the conversation)."""
        from acp.schema import ResumeSessionResponse

        live = await self._ops.reopen(session_id, cwd, mcp_servers, additional_directories)
        await self._ops.announce(live)
        return ResumeSessionResponse(modes=mode_state(live.choices.mode), config_options=self._ops.options(live))

    async def fork_session(
        self, session_id: str, cwd: str, additional_directories: list[str] | None = None, mcp_servers: McpServers | None = None, **_: Any
    ) -> ForkSessionResponse:
        """A new session that starts with a copy of this one's conversation."""
        from acp import RequestError
        from acp.schema import ForkSessionResponse

        path, roots = self._ops.check_cwd(cwd, mcp_servers, additional_directories)
        agent = await self._backend.core()
        source = self._ops.sessions.get(session_id)
        if source is not None:
            await self._ops.wait_idle(source)
        session = await agent.fork_session(session_id, self._backend.host(path), cwd=path)
        if session is None:
            raise RequestError.invalid_params({"sessionId": f"no session {session_id!r} to fork"})
        session.roots = roots
        record = await self._ops.store.get_session(session_id)
        live = await self._ops.adopt(session, self._ops.stored_choices(record))
        await self._ops.save_choices(live)
        if mcp_servers:
            await self._ops.connect_mcp(live, mcp_servers)
        self._ops.after_answer(live)
        return ForkSessionResponse.model_validate(new_session_result(session.id, self._ops.config, live.choices))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **_: Any) -> ListSessionsResponse:
        """Stored sessions, newest first, optionally for one directory, paged by an opaque cursor."""
        from acp import RequestError
        from acp.schema import ListSessionsResponse, SessionInfo

        await self._backend.core()
        before = None
        if cursor:
            try:
                before = float(base64.urlsafe_b64decode(cursor.encode()).decode())
            except (ValueError, UnicodeDecodeError):
                raise RequestError.invalid_params({"cursor": "not a cursor this server returned"}) from None
        records = await self._ops.store.list_sessions(cwd=cwd, limit=LIST_PAGE + 1, before=before, subagents=False)
        page = records[:LIST_PAGE]
        next_cursor = None
        if len(records) > LIST_PAGE:
            next_cursor = base64.urlsafe_b64encode(repr(page[-1].updated_at).encode()).decode()
        return ListSessionsResponse(
            sessions=[SessionInfo(session_id=r.id, cwd=r.cwd, title=r.title, updated_at=iso(r.updated_at)) for r in page],
            next_cursor=next_cursor,
        )

    async def close_session(self, session_id: str, **_: Any) -> CloseSessionResponse:
        """Stop the session's work, shut its MCP servers down and forget it (the store keeps it)."""
        from acp.schema import CloseSessionResponse

        live = self._ops.sessions.pop(session_id, None)
        if live is not None:
            await self._ops.shutdown(live)
        return CloseSessionResponse()

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> SetSessionModeResponse:
        from acp.schema import SetSessionModeResponse

        live = self._ops.live(session_id)
        await self._ops.set_mode(live, mode_id, announce_mode=False)
        return SetSessionModeResponse()

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool, **_: Any) -> SetSessionConfigOptionResponse:
        from acp import RequestError
        from acp.schema import SetSessionConfigOptionResponse

        live = self._ops.live(session_id)
        if config_id == "mode":
            await self._ops.set_mode(live, str(value), announce_options=False)
        elif config_id == "model":
            offered = [o.value for o in self._ops.options(live)[0].options]
            if value not in offered:
                raise RequestError.invalid_params({"value": f"model must be one of: {', '.join(offered)}"})
            await self._ops.set_model(live, str(value), announce=False)
        elif config_id == "thought_level":
            levels = thought_levels(self._ops.config, live.choices.model)
            if value != DEFAULT_THOUGHT and value not in levels:
                raise RequestError.invalid_params({"value": f"thought_level must be one of: default, {', '.join(levels)}"})
            live.choices.thought_level = str(value)
            live.session.reasoning_effort = None if value == DEFAULT_THOUGHT else str(value)
            await self._ops.save_choices(live)
        else:
            raise RequestError.invalid_params({"configId": f"unknown option {config_id!r}; options are model, mode, thought_level"})
        return SetSessionConfigOptionResponse(config_options=self._ops.options(live))

    async def prompt(self, session_id: str, prompt: list[PromptBlock], **_: Any) -> PromptResponse:
        try:
            return await self._prompt(session_id, prompt)
        finally:
            startup_gc.resume()  # the first answer is out: the collector resumes (see hermes_acp.startup_gc)

    async def _prompt(self, session_id: str, prompt: list[PromptBlock]) -> PromptResponse:
        from acp.schema import PromptResponse

        live = self._ops.live(session_id)
        agent = await self._backend.core()
        if live.mcp_ready is not None and not live.mcp_ready.done():
            await asyncio.wait([live.mcp_ready])
        first = next((b.text for b in prompt if getattr(b, "type", None) == "text"), "")
        command = parse_command(first, live.session.cwd, session_toolsets(live.session)) if first.lstrip().startswith("/") else None
        if command is not None:
            reply = await self._turns.command(live, *command)
            if reply is None:
                await self._ops.refresh_commands(live)
                return PromptResponse(stop_reason="end_turn")
            message = UserMessage.of(reply)
        else:
            message = await self._turns.user_message(prompt, live)
        asks: set[asyncio.Task] = set()
        stop: StopReason = "end_turn"
        error: str | None = None
        try:
            async for event in agent.run_turn(live.session, message):
                if isinstance(event, PermissionNeeded):
                    task = asyncio.create_task(self._turns.ask(session_id, event.request))
                    asks.add(task)
                    task.add_done_callback(asks.discard)
                    continue
                if isinstance(event, TurnEnded):
                    stop, error = event.stop_reason, event.error
                    continue
                update = self._ops.update_for(event)
                if update is not None:
                    await send_update(self._backend.conn, session_id, update)
        finally:
            for task in asks:
                task.cancel()
        await self._ops.show_ended(live)  # background commands that ended after the turn's last request
        await self._ops.show_mcp(live)  # MCP servers that went down or came back during the turn's last step
        await self._ops.refresh_commands(live)
        # ACP has no stop reason for a failed turn: the error is told in the thread, and here for
        # clients that act on it (hermes-editor chat's exit status).
        return PromptResponse(stop_reason=stop, field_meta={"hermes": {"error": error}})

    async def cancel(self, session_id: str, **_: Any) -> None:
        live = self._ops.sessions.get(session_id)
        if live is not None and self._backend.agent is not None:
            log.info("session %s: cancel", session_id)
            self._backend.agent.cancel(live.session)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """No extension methods: answers -32601."""
        from acp import RequestError

        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        """Extension notifications are ignored."""

    def stop_turns(self) -> None:
        """Cancel every running turn and queued prompt (the client has gone)."""
        if self._backend.agent is not None:
            for live in self._ops.sessions.values():
                self._backend.agent.cancel(live.session)

    async def aclose(self) -> None:
        """Stop running turns and release MCP servers, the model clients and the store (stdin closed)."""
        await self._ops.aclose()
        await self._backend.aclose()


def _details(exc: Exception) -> str:
    """What a failed request says: a protocol error's data, or the exception's text."""
    data = getattr(exc, "data", None)
    if isinstance(data, dict) and data:
        return "; ".join(f"{k}: {v}" for k, v in data.items())
    return str(exc) or type(exc).__name__
