"""The agent core of one ``hermes-mcp`` process: configuration, the store and the agent, built on first use.

The store opens on first use (history, skills and memory work without a model); the agent
is built when the first task starts, after re-reading the configuration so that a user who
fixes ``config.toml`` does not have to restart their MCP client.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from core.config import Config, ConfigError, config_path
from surface_support.configuration import read_config

if TYPE_CHECKING:
    from core.agent.loop import Agent
    from core.logs import RedactingFilter
    from core.models.base import Model
    from core.store import SessionStore

__all__ = ["Backend", "NotReady"]

log = logging.getLogger(__name__)


class NotReady(Exception):
    """No usable model is configured; the message says how to configure one."""


class Backend:
    """Configuration, store and agent, each built lazily and shared by every request."""

    def __init__(self, redactor: RedactingFilter | None = None) -> None:
        self.redactor = redactor
        self.config: Config | None = None
        self.config_error: str | None = None
        self._store: SessionStore | None = None
        self._agent: Agent | None = None
        self._lock = asyncio.Lock()
        self._watch: asyncio.Task[None] | None = None
        self.load_config()

    def load_config(self) -> Config | None:
        self.config, self.config_error = read_config(self.redactor)
        return self.config

    @property
    def secrets(self) -> list[str]:
        return self.config.secrets if self.config else []

    def redact(self, text: str) -> str:
        """Text safe to show a client: known secrets and credential shapes replaced."""
        if self.redactor is None:
            from core.logs import RedactingFilter

            return RedactingFilter(self.secrets).redact(text)
        return self.redactor.redact(text)

    @property
    def approval_timeout(self) -> float:
        return self.config.approvals.timeout if self.config else 1800.0

    async def store(self) -> SessionStore:
        async with self._lock:
            if self._store is None:
                from core.store import SessionStore

                self._store = await SessionStore.open()
            return self._store

    @property
    def agent_if_built(self) -> Agent | None:
        return self._agent

    async def agent(self) -> Agent:
        """The agent core; raises NotReady when no model is configured."""
        if self._agent is not None:
            return self._agent
        store = await self.store()
        async with self._lock:
            if self._agent is not None:
                return self._agent
            config = self.load_config()
            problem = self._problem(config)
            model = self.stand_in_model(config) if problem is not None else None
            if problem is not None and model is None:
                raise NotReady(problem)
            assert config is not None
            from core.agent.builder import build_agent
            from surface_support.approval_watch import watch_foreign_answers
            from toolsets import toolset

            try:
                agent = build_agent(config, "mcp", toolset=toolset, store=store, model=model)
            except ConfigError as exc:
                raise NotReady(str(exc)) from None
            self._agent = agent
            # Answers given in an editor or the gateway to this process's questions.
            self._watch = asyncio.create_task(watch_foreign_answers(agent.broker, store))
            log.info("agent ready: model %s, tools %s", agent.model.name, ", ".join(self._agent.tools))
            return self._agent

    def stand_in_model(self, config: Config | None) -> Model | None:
        """A model to use although none is usable (``hermes_mcp.runtime``: the client's); None refuses."""
        return None

    def _problem(self, config: Config | None) -> str | None:
        if self.config_error:
            return self.config_error
        if config is None or not config.model:
            return (
                f"No model is configured. Run 'hermes-editor setup' in a terminal, or set model in {config_path()} "
                "(or HERMES_MODEL and a provider key such as OPENAI_API_KEY in this server's env)."
            )
        try:
            config.model_ref()
        except ConfigError as exc:
            return str(exc)
        return None

    async def aclose(self) -> None:
        """Release the model client and the store."""
        if self._watch is not None:
            self._watch.cancel()
        agent: Any = self._agent
        if agent is not None:
            try:
                await agent.model.aclose()
            except Exception:
                log.debug("model close failed", exc_info=True)
        if self._store is not None:
            await self._store.close()
            self._store = None
