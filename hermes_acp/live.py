"""One ACP session as this process holds it, and small helpers the server modules share."""

from __future__ import annotations

import asyncio
import datetime
from dataclasses import dataclass, field
from typing import Any

from hermes_acp.options import SessionChoices

__all__ = ["LiveSession", "cost_text", "iso", "mcp_spec"]


@dataclass(slots=True)
class LiveSession:
    """A session open in this process: the core session, the user's choices, its MCP servers."""

    session: Any  # core.agent.loop.Session
    choices: SessionChoices
    mcp: Any = None  # core.tools.mcp_client.McpConnections
    mcp_ready: asyncio.Task | None = None
    # Set once the client knows the session id (after the session/new answer is on the wire).
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    # What the offered skills and project commands were read from (re-announced when it changes).
    commands_stamp: tuple[tuple[str, int, int], ...] = ()


def mcp_spec(server):
    """An ACP MCP server description as the core's spec; None for transports we do not speak."""
    from acp.schema import HttpMcpServer, McpServerStdio, SseMcpServer

    from core.tools.mcp_client import McpServerSpec

    if isinstance(server, (HttpMcpServer, SseMcpServer)):
        transport = "http" if isinstance(server, HttpMcpServer) else "sse"
        headers = tuple((h.name, h.value) for h in server.headers or [])
        return McpServerSpec(server.name, transport, url=server.url, headers=headers)
    if isinstance(server, McpServerStdio):
        env = tuple((e.name, e.value) for e in server.env or [])
        return McpServerSpec(server.name, "stdio", command=server.command, args=tuple(server.args or []), env=env)
    return None


def iso(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).isoformat().replace("+00:00", "Z")


def cost_text(session) -> str:
    """``/cost``: the session's tokens and cost, its subagents' included."""
    from surface_support.usage import subagents_cost, token_lines

    usage = session.billed()
    lines = token_lines(usage, session.subagents_usage)
    unknown = 'Cost: unknown price for this model; set [pricing."provider:model"] input = ..., output = ... in config.toml (USD per million tokens)'
    lines.append(f"Cost: ${usage.cost_usd:.4f}{subagents_cost(session.subagents_usage)}" if usage.cost_usd is not None else unknown)
    return "\n".join(lines)
