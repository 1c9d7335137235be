"""``hermes-acp``: the ACP agent server an editor spawns. stdout carries JSON-RPC only."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

__all__ = ["main"]


def _protect_stdout() -> int:
    """Keep fd 1 for protocol messages only.

    The protocol gets a private copy of stdout; fd 1 itself then points at stderr, so a stray
    print, a library's warning or a child process that inherits stdout cannot corrupt the stream.
    """
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol_fd


async def _serve(protocol_fd: int, redactor) -> None:
    from acp.agent.connection import AgentSideConnection

    from hermes_acp.server import HermesAgent
    from hermes_acp.transport import StdioTransport

    transport = StdioTransport(os.dup(0), protocol_fd)
    await transport.start()
    agent = HermesAgent(transport=transport, redactor=redactor)
    conn = AgentSideConnection(agent, transport, listening=False, use_unstable_protocol=True)
    try:
        await conn.listen()
    finally:
        await asyncio.shield(agent.aclose())
        await asyncio.shield(conn.close())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hermes-acp",
        description="Agent Client Protocol server for editors (Zed, JetBrains, VS Code). Speaks JSON-RPC on stdio.",
    )
    parser.add_argument("--setup", action="store_true", help="configure a provider and model interactively, then exit")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    args = parser.parse_args(argv)
    if args.version:
        from hermes_acp.live import version_string

        print(version_string())
        return 0
    if args.setup:
        from core.setup_wizard import run_setup

        return run_setup()

    protocol_fd = _protect_stdout()
    from core.config import ConfigError, load_config
    from core.logs import setup_logging

    try:
        level = load_config().log_level
    except ConfigError:
        level = "info"
    redactor = setup_logging("acp", level)
    try:
        asyncio.run(_serve(protocol_fd, redactor))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
