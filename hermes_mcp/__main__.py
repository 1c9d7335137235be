"""``hermes-mcp``: the MCP server Claude Desktop, Cursor and other MCP clients spawn.

stdio by default: stdout carries JSON-RPC only (see ``hermes_mcp.stdio``). The client's
``initialize`` is answered from ``hermes_mcp.handshake`` while the SDK and the server load in
a background thread, so that the answer takes milliseconds instead of half a second.
``--http HOST:PORT`` serves streamable HTTP instead (loopback only, unless a bearer token is
set in ``HERMES_MCP_TOKEN``, and then every request must carry it).

Only the standard library is imported before the first answer.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import threading
from typing import Any

__all__ = ["main"]

TOKEN_ENV = "HERMES_MCP_TOKEN"


class _Loader(threading.Thread):
    """Imports the SDK and builds the server off the main thread, which is reading stdin."""

    def __init__(self, allow_auto: bool) -> None:
        super().__init__(name="hermes-mcp-loader", daemon=True)
        self._allow_auto = allow_auto
        self.server: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.server = _build(self._allow_auto)
        except BaseException as exc:  # re-raised in the main thread
            self.error = exc

    def result(self) -> Any:
        self.join()
        if self.error is not None:
            raise self.error
        return self.server


def _build(allow_auto: bool) -> Any:
    from core.config import ConfigError, load_config
    from core.logs import setup_logging

    try:
        level = load_config().log_level
    except ConfigError:
        level = "info"
    redactor = setup_logging("mcp", level)
    from hermes_mcp.app import build_server
    from hermes_mcp.runtime import Runtime

    return build_server(Runtime(redactor, allow_auto=allow_auto))


async def _serve_stdio(server: Any, reader: io.BufferedReader, replay: list[bytes | bytearray | None], out_fd: int, drop_id: Any) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    from hermes_mcp.resources import watch_skills
    from hermes_mcp.stdio import Lines, Writer

    writer = Writer(out_fd, drop_id)
    try:
        async with stdio_server(stdin=Lines(reader, replay, writer.write_message), stdout=writer) as (read, write):  # type: ignore[arg-type]
            async with anyio.create_task_group() as group:
                group.start_soon(watch_skills, server.runtime, server.notifier)
                await server.lowlevel.run(read, write, server.lowlevel.create_initialization_options())
                group.cancel_scope.cancel()
    finally:
        await server.runtime.aclose()


def _stdio(allow_auto: bool) -> int:
    import asyncio

    from hermes_mcp import handshake
    from hermes_mcp.stdio import protect_stdio, read_line

    protocol_in, protocol_out = protect_stdio()
    loader = _Loader(allow_auto)
    loader.start()
    reader = open(protocol_in, "rb", closefd=False)
    first = read_line(reader)  # None: over-long, answered once the SDK serves
    drop_id = None
    if first and not os.environ.get("HERMES_MCP_NO_FAST_INIT"):
        answer = handshake.initialize_answer(first)
        if answer is not None:
            view = memoryview(answer)
            while view:
                view = view[os.write(protocol_out, view):]
            drop_id = handshake.initialize_request_id(first)
    if first == b"":
        return 0  # the client went away before saying anything
    server = loader.result()
    try:
        asyncio.run(_serve_stdio(server, reader, [first], protocol_out, drop_id))
    except KeyboardInterrupt:
        pass
    return 0


def _parse_address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (for example 127.0.0.1:8765), got {value!r}")
    return host, int(port)


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _http(address: tuple[str, int], allow_auto: bool) -> int:
    import asyncio

    host, port = address
    token = os.environ.get(TOKEN_ENV) or None
    if not _loopback(host) and token is None:
        print(
            f"hermes-mcp: refusing to serve on {host}, which is not loopback, without a bearer token. "
            f"Set {TOKEN_ENV} (clients then send 'Authorization: Bearer <token>'), or use 127.0.0.1.",
            file=sys.stderr,
        )
        return 2
    if token is not None and len(token) < 16:
        print(f"hermes-mcp: {TOKEN_ENV} is too short; use at least 16 random characters.", file=sys.stderr)
        return 2
    from hermes_mcp.http import serve_http

    server = _build(allow_auto)
    try:
        asyncio.run(serve_http(server, host, port, token))
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    from core.state_home import ensure_private_home

    ensure_private_home()
    parser = argparse.ArgumentParser(
        prog="hermes-mcp",
        description="MCP server for Claude Desktop, Cursor and other MCP clients: the Hermes agent, its history, "
        "skills and memory. Speaks JSON-RPC on stdio unless --http is given.",
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        type=_parse_address,
        help=f"serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (loopback only unless {TOKEN_ENV} is set)",
    )
    parser.add_argument(
        "--allow-auto", action="store_true", help="let clients start tasks in mode 'auto' (no approvals at all)"
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    args = parser.parse_args(argv)
    if args.version:
        from hermes_mcp.handshake import server_version

        print(f"hermes-mcp {server_version()}")
        return 0
    if args.http is not None:
        return _http(args.http, args.allow_auto)
    return _stdio(args.allow_auto)


if __name__ == "__main__":
    sys.exit(main())
