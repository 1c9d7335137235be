"""One way to build the agent core from the configuration, for each surface.

Every surface (hermes-acp, hermes-mcp, the gateway's chat and cron agents) calls
:func:`build_agent`, so a setting in config.toml reaches every surface the same way. What
differs between surfaces is data in :data:`SURFACES`, not code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from core.agent.loop import Agent
from core.config import Config
from core.models.base import Model
from core.policy.approvals import ApprovalBroker
from core.store import SessionStore, Surface
from core.tools.context import ToolSettings
from core.tools.registry import Tool

__all__ = ["SURFACES", "SurfaceName", "SurfaceSpec", "build_agent"]

SurfaceName = Literal["acp", "mcp", "gateway", "cron"]


@dataclass(frozen=True, slots=True)
class SurfaceSpec:
    """What one surface's agent gets that another's does not."""

    toolset: str
    # Recorded with each session in the store (sessions started by cron runs belong to the gateway).
    store_name: Surface
    # Seconds a question waits for a person; None: ``[approvals] timeout``. A cron run has nobody
    # watching it live, so its questions give up sooner.
    approval_timeout: float | None = None


SURFACES: dict[str, SurfaceSpec] = {
    "acp": SurfaceSpec(toolset="editor", store_name="acp"),
    "mcp": SurfaceSpec(toolset="mcp", store_name="mcp"),
    "gateway": SurfaceSpec(toolset="gateway", store_name="gateway"),
    "cron": SurfaceSpec(toolset="cron", store_name="gateway", approval_timeout=60.0),
}


def build_agent(
    config: Config,
    surface: SurfaceName,
    *,
    toolset: Callable[[str], list[Tool]],
    store: SessionStore,
    broker: ApprovalBroker | None = None,
    model: Model | None = None,
) -> Agent:
    """The agent of ``surface``, every setting taken from ``config``.

    ``toolset`` resolves a toolset name to its tools (``toolsets.toolset``: core may not import
    toolsets). ``model`` shares one already built (the gateway's two agents share a client);
    by default the configured model and its fallbacks are built here (ConfigError when none is set).
    """
    from core.agent.subagents import Subagents
    from core.agent.vision import Sight
    from core.models import build_model, build_summary_model
    from core.models.vision import accepts_images, build_vision_model
    from core.tools.mcp_client import shared_pool

    spec = SURFACES.get(surface)
    if spec is None:
        raise ValueError(f"unknown surface {surface!r}; expected one of: {', '.join(SURFACES)}")
    if broker is None:
        timeout = spec.approval_timeout if spec.approval_timeout is not None else config.approvals.timeout
        broker = ApprovalBroker(store, timeout=timeout)
    vision, problem = build_vision_model(config)
    sight = Sight(sees=lambda label: accepts_images(config, label), vision=vision, problem=problem, max_tokens=min(config.max_tokens, 4096))
    agent = Agent(
        model=model if model is not None else build_model(config),
        tools=toolset(spec.toolset),
        store=store,
        broker=broker,
        surface=spec.store_name,
        max_steps=config.max_steps,
        max_tokens=config.max_tokens,
        learning=config.learning,
        context_window=config.context_window(),
        summary_model=build_summary_model(config) if config.learning.search_summary else None,
        tool_settings=ToolSettings.of(config),
        mcp=shared_pool(config.mcp_servers),
        sight=sight,
    )
    Subagents(agent, config.delegate)  # the delegate tool's runner
    return agent
