"""A small real MCP server for tests, built with the mcp SDK's server API.

Run it as ``python -m tests.fakes.mcp_server`` (stdio), ``--http PORT`` (streamable HTTP on
127.0.0.1) or ``--sse PORT``. ``--crash`` exits at once with a message on stderr, like a server
missing its configuration. Every tool call is appended, as one JSON line, to the file named
by ``$FAKE_MCP_RECORD`` (when set), so tests can check what reached the server.
``--down-while FILE`` exits at start, as ``--crash`` does, while FILE exists: a server that stays
down for as long as a test wants.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Annotated, Literal

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ImageContent, ResourceLink, TextContent, ToolAnnotations
from pydantic import Field

READ_ONLY = ToolAnnotations(read_only_hint=True)
CHANGES = ToolAnnotations(read_only_hint=False, destructive_hint=False)


def record(tool: str, **details: object) -> None:
    """Append one call to the record file, when the test asked for one."""
    path = os.environ.get("FAKE_MCP_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"tool": tool, **details}) + "\n")


def build_server() -> MCPServer:
    """The fake server's tools: a few of each shape a real server returns."""
    server = MCPServer("fake", log_level="WARNING")

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def echo(
        text: Annotated[str, Field(description="what to say back")],
        times: Annotated[int, Field(ge=1, le=5, description="how many times")] = 1,
    ) -> str:
        """Say the text back."""
        record("echo", text=text, times=times)
        return " ".join([text] * times)

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def get_env(name: str) -> str:
        """The value of one environment variable of this server, or (unset)."""
        record("get_env", name=name)
        return os.environ.get(name, "(unset)")

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def pid() -> str:
        """This server's process id."""
        return str(os.getpid())

    @server.tool(annotations=CHANGES, structured_output=False)
    async def write_note(note: str, priority: Literal["low", "high"] = "low") -> str:
        """Save a note (changes the server's state)."""
        record("write_note", note=note, priority=priority)
        return f"saved {note!r}"

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def fail(message: str) -> str:
        """Always fails with the message."""
        record("fail", message=message)
        raise ToolError(message)

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def slow(seconds: float) -> str:
        """Sleep, then answer; records a cancellation when the client gives up."""
        record("slow", phase="started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            record("slow", phase="cancelled")
            raise
        return "done"

    @server.tool(annotations=READ_ONLY)
    async def mixed() -> CallToolResult:
        """Text, an image and a resource link in one result."""
        return CallToolResult(
            content=[
                TextContent(text="here is a picture"),
                ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
                ResourceLink(uri="file:///tmp/report.txt", name="report"),
            ]
        )

    @server.tool(annotations=READ_ONLY)
    async def structured_only() -> CallToolResult:
        """Only structured content, no text."""
        return CallToolResult(content=[], structured_content={"answer": 42, "unit": "things"})

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def big(size: int) -> str:
        """A result of ``size`` characters."""
        return "x" * size

    @server.tool(name="weird.name", structured_output=False)
    async def weird_name() -> str:
        """A name with a dot, and no annotations at all (so: not read-only)."""
        record("weird.name")
        return "weird"

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.mcp_server")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--sse", type=int, metavar="PORT", help="serve SSE on 127.0.0.1:PORT")
    parser.add_argument("--crash", action="store_true", help="exit at once, as a broken server would")
    parser.add_argument("--down-while", metavar="FILE", help="exit at once while FILE exists")
    args = parser.parse_args(argv)
    if args.down_while and os.path.exists(args.down_while):
        print(f"fake mcp server: {args.down_while} exists, staying down", file=sys.stderr)
        sys.exit(3)
    if args.crash:
        print("fake mcp server: missing configuration, giving up", file=sys.stderr)
        sys.exit(3)
    server = build_server()
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    elif args.sse:
        server.run("sse", host="127.0.0.1", port=args.sse)
    else:
        server.run()


if __name__ == "__main__":
    main()
