"""``hermes-mcp``: the MCP server Claude Desktop, Cursor and other MCP clients spawn.

stdio by default: stdout carries JSON-RPC only (see ``hermes_mcp.stdio``). The client's
``initialize`` is answered from ``hermes_mcp.handshake``, and its first ``tools/list``,
``prompts/list`` and ``resources/list`` from ``hermes_mcp.listing``, while the SDK and the
server load in a background thread, so that they take milliseconds instead of half a second.
``--http HOST:PORT`` serves streamable HTTP instead, and every request must carry the bearer
token (``HERMES_MCP_TOKEN``, or ``mcp-token`` in the state home, made on first use). Addresses
other than loopback are served only with a token set explicitly in ``HERMES_MCP_TOKEN``.

Only the standard library is imported before the first answer.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
import threading
from typing import Any

__all__ = ["main"]

TOKEN_ENV = "HERMES_MCP_TOKEN"  # core.tokens.TOKEN_ENV, kept here to import nothing before the first answer
TERMINAL_NOTE = (
    "hermes-mcp: the hermes-editor MCP server for MCP clients (JSON-RPC over stdin/stdout). "
    "Start it from your MCP client (Claude Desktop, Cursor), or serve HTTP with --http HOST:PORT; see the README. Ctrl-C quits."
)


class _Loader(threading.Thread):
    """Imports the SDK and builds the server off the main thread, which is reading stdin."""

    def __init__(self, options: dict[str, bool]) -> None:
        super().__init__(name="hermes-mcp-loader", daemon=True)
        self._options = options
        self.server: Any = None
        self.error: BaseException | None = None
        # Readable once the server is built (or failed): the main thread waits on it with stdin.
        self.done, self._done_w = os.pipe()

    def run(self) -> None:
        try:
            self.server = _build(**self._options)
        except BaseException as exc:  # re-raised in the main thread
            self.error = exc
        finally:
            os.write(self._done_w, b"!")

    def result(self) -> Any:
        self.join()
        if self.error is not None:
            raise self.error
        return self.server


def _build(allow_auto: bool, trust_client_approvals: bool) -> Any:
    from core.config import ConfigError, load_config
    from core.logs import setup_logging

    try:
        level = load_config().log_level
    except ConfigError:
        level = "info"
    redactor = setup_logging("mcp", level)
    # What the early prompts and resources listings read comes first (hermes_mcp.listing).
    from core.learning import memory, skills  # noqa: F401
    from hermes_mcp.app import build_server
    from hermes_mcp.runtime import Runtime

    if trust_client_approvals:
        logging.getLogger("hermes_mcp").warning(
            "--trust-client-approvals: the client, and so its model, may answer this server's approvals"
        )
    return build_server(Runtime(redactor, allow_auto=allow_auto, trust_client_approvals=trust_client_approvals))


async def _serve_stdio(server: Any, reader: io.BufferedReader, replay: list[bytes | bytearray | None], out_fd: int, early: Any) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    from hermes_mcp.listing import EarlyLines, EarlyWriter
    from hermes_mcp.resources import watch_skills
    from hermes_mcp.stdio import Lines, Writer

    # The SDK's answers to what was answered early are compared and dropped (hermes_mcp.listing).
    writer = Writer(out_fd) if early is None else EarlyWriter(out_fd, early)
    lines = Lines(reader, replay, writer.write_message) if early is None else EarlyLines(early, reader, replay, writer.write_message)
    try:
        async with stdio_server(stdin=lines, stdout=writer) as (read, write):  # type: ignore[arg-type]
            async with anyio.create_task_group() as group:
                group.start_soon(watch_skills, server.runtime, server.notifier)
                await server.lowlevel.run(read, write, server.lowlevel.create_initialization_options())
                group.cancel_scope.cancel()
    finally:
        await server.runtime.aclose()


def _stdio(options: dict[str, bool]) -> int:
    import asyncio

    from hermes_mcp.stdio import protect_stdio, read_line

    if os.isatty(0):
        # Started by hand: say what this is; MCP clients start it with pipes and see nothing of this.
        print(TERMINAL_NOTE, file=sys.stderr, flush=True)
    protocol_in, protocol_out = protect_stdio()
    loader = _Loader(options)
    loader.start()
    replay: list[bytes | bytearray | None] = []
    if os.environ.get("HERMES_MCP_NO_FAST_INIT"):
        early = None
        reader = open(protocol_in, "rb", closefd=False)
        replay.append(read_line(reader))  # None: over-long, answered once the SDK serves
    else:
        from hermes_mcp.listing import Early, EarlyInput

        # While the SDK loads, the handshake and the first listings are answered here; every line
        # read is handed to the SDK afterwards, in order (hermes_mcp.handshake, hermes_mcp.listing).
        early = Early(options)
        lines = EarlyInput(protocol_in, loader.done)
        while (line := lines.next_line()) is not None:
            replay.append(line)
            if not line:
                break  # the end of input
            answer, read_on = early.take(line)
            if answer is not None:
                view = memoryview(answer)
                while view:
                    view = view[os.write(protocol_out, view) :]
            if not read_on:
                break
        reader = lines.reader()
    if replay == [b""]:
        return 0  # the client went away before saying anything
    server = loader.result()
    try:
        asyncio.run(_serve_stdio(server, reader, replay, protocol_out, early))
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


def _http(address: tuple[str, int], options: dict[str, bool]) -> int:
    import asyncio

    from core.tokens import TokenError, ensure_mcp_token

    host, port = address
    if not _loopback(host) and not os.environ.get(TOKEN_ENV, "").strip():
        print(
            f"hermes-mcp: refusing to serve on {host}, which is not loopback, without a bearer token set on purpose "
            f"(the traffic is plain HTTP). Set {TOKEN_ENV} to 16+ random characters (clients then send "
            "'Authorization: Bearer <token>'), or use 127.0.0.1.",
            file=sys.stderr,
        )
        return 2
    try:
        token = ensure_mcp_token()
    except TokenError as exc:
        print(f"hermes-mcp: {exc}", file=sys.stderr)
        return 2
    from hermes_mcp.http import serve_http

    server = _build(**options)
    try:
        asyncio.run(serve_http(server, host, port, token))
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    from hermes_mcp.handshake import server_version

    if (sys.argv[1:] if argv is None else argv)[:1] in (["--version"], ["-V"]):
        # Answered before the state home is touched and before anything else loads.
        print(f"hermes-mcp {server_version()}")
        return 0
    from core.state_home import PROFILE_HELP, enter_home

    parser = argparse.ArgumentParser(
        prog="hermes-mcp",
        description="MCP server for Claude Desktop, Cursor and other MCP clients: the Hermes agent, its history, "
        "skills and memory. Speaks JSON-RPC on stdio unless --http is given.",
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        type=_parse_address,
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; every request needs the bearer token "
        f"printed at start (kept in the state home's mcp-token, or set {TOKEN_ENV}; other hosts than loopback "
        f"only with {TOKEN_ENV} set)",
    )
    parser.add_argument("--allow-auto", action="store_true", help="let clients start tasks in mode 'auto' (no approvals at all)")
    parser.add_argument(
        "--trust-client-approvals",
        action="store_true",
        help="add the approval_respond tool, which lets the client's model approve this server's own pending actions "
        "(its own writes and commands) by itself; without it only the user answers: in the client's form, the editor, "
        "the phone, or 'hermes-editor approvals'",
    )
    parser.add_argument("--profile", metavar="NAME", help=PROFILE_HELP + "; made on first use")
    parser.add_argument("-V", "--version", action="version", version=f"hermes-mcp {server_version()}")
    args = parser.parse_args(argv)
    # The profile decides the home: nothing may touch it before (a client's first start makes the profile).
    if (code := enter_home("hermes-mcp", args.profile, create=True)) is not None:
        return code
    options = {"allow_auto": args.allow_auto, "trust_client_approvals": args.trust_client_approvals}
    try:
        if args.http is not None:
            return _http(args.http, options)
        return _stdio(options)
    except KeyboardInterrupt:
        from surface_support.interrupt import end_by_sigint

        return end_by_sigint()


if __name__ == "__main__":
    sys.exit(main())
