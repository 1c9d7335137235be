"""What every part of the ACP server shares: the connection, the configuration, and the agent core built on first use."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config import Config
from core.host.local import Host
from hermes_acp.handshake import not_ready
from surface_support.configuration import read_config

if TYPE_CHECKING:
    from core.agent.loop import Agent
    from core.logs import RedactingFilter
    from core.store import SessionStore
    from hermes_acp.transport import StdioTransport

__all__ = ["Backend"]

log = logging.getLogger(__name__)


class Backend:
    """The client connection and its capabilities, the configuration (re-read on demand), the store and the agent."""

    def __init__(self, *, transport: StdioTransport | None = None, redactor: RedactingFilter | None = None) -> None:
        self.transport = transport
        self.redactor = redactor
        self.conn: Any = None
        self.client_caps: Any = None
        self.config: Config | None = None
        self.config_error: str | None = None
        self.agent: Agent | None = None  # built on the first session
        self.store: SessionStore | None = None
        self.watch: asyncio.Task[None] | None = None

    def load_config(self) -> None:
        self.config, self.config_error = read_config(self.redactor)

    def ready_error(self) -> str | None:
        return not_ready(self.config, self.config_error)

    async def core(self) -> Agent:
        """The agent core, built once a model is configured (heavy imports happen here)."""
        if self.agent is not None:
            return self.agent
        from acp import RequestError

        if (problem := self.ready_error()) is not None:
            raise RequestError.auth_required({"details": problem})
        from core.agent.builder import build_agent
        from core.store import SessionStore
        from toolsets import toolset

        config = self.config
        assert config is not None
        self.store = await SessionStore.open()
        self.agent = build_agent(config, "acp", toolset=toolset, store=self.store)
        from surface_support.approval_watch import watch_foreign_answers

        # Questions of this process may be answered elsewhere (hermes-mcp, the gateway).
        self.watch = asyncio.create_task(watch_foreign_answers(self.agent.broker, self.store))
        return self.agent

    def host(self, cwd: Path) -> Host:
        """The host of a session in ``cwd`` (``[projects]`` decides; this machine by default).

        Raises ACP's invalid-params error when the project's host cannot be had."""
        from acp import RequestError

        from core.config import ConfigError
        from core.host.select import host_for

        try:
            return host_for(self.config, cwd, secrets=self.config.secrets if self.config else [])
        except ConfigError as exc:
            raise RequestError.invalid_params({"cwd": str(exc)}) from None

    async def aclose(self) -> None:
        """Release the agent's model client, stop watching answers given elsewhere, close the store."""
        if self.agent is not None:
            try:
                await self.agent.model.aclose()
            except Exception:
                log.debug("model close failed", exc_info=True)
        if self.watch is not None:
            self.watch.cancel()
        if self.store is not None:
            await self.store.close()
