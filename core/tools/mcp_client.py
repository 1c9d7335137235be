"""MCP servers a session brings (from the editor): connect, list their tools, run them as Tools.

Each remote tool becomes an ordinary :class:`core.tools.registry.Tool` named ``mcp__<server>__<tool>``,
so it goes through the one dispatch path and the one approval policy like any other tool.
The mcp SDK is imported inside functions only: ``import core.tools.mcp_client`` stays cheap, and a
session without MCP servers never pays for the SDK.

Each server lives in its own asyncio task that enters the SDK client and leaves it again:
the SDK's anyio task groups must be exited by the task that entered them, while start(),
tool calls and aclose() arrive from other tasks.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import threading
from collections import deque
from collections.abc import Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import RootModel

from core.events import ToolUpdated
from core.redaction import SECRET_ENV_VARS
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.mcp_schema import arguments_model, hashed_tool_name, mcp_tool_name, result_text
from core.tools.registry import Tool, ToolOutput

__all__ = ["McpConnections", "McpServerSpec"]

log = logging.getLogger(__name__)

START_TIMEOUT = 20.0  # seconds for one server to start and list its tools
CLOSE_TIMEOUT = 8.0  # the SDK's stdio shutdown alone may take ~6 s (stdin close, TERM, KILL)
MAX_DESCRIPTION = 1000
MAX_TOOLS_PER_SERVER = 200  # past this a server floods the prompt; the rest are dropped with a problem
MAX_LIST_PAGES = 20

# What a stdio server inherits from us besides what its spec sets (the SDK adds HOME, LOGNAME,
# PATH, SHELL, TERM, USER). Locale, temp dirs, and proxy/CA settings so that network servers
# work behind a corporate proxy; never our whole environment, which carries API keys.
_INHERITED_ENV = (
    *("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TEMP", "TMP"),
    *("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"),
    *("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS"),
    *("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"),
)


@dataclass(frozen=True)
class McpServerSpec:
    """One MCP server a session should connect to; independent of how the editor described it."""

    name: str
    transport: Literal["stdio", "http", "sse"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


def _stdio_environment(spec_env: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The environment added for a stdio server: a few safe variables of ours, then its own."""
    env = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ and k not in SECRET_ENV_VARS}
    env.update(dict(spec_env))
    return env


class _StderrTap:
    """A stdio server's stderr: logged line by line (never on our stdout), the last lines kept.

    hermes-acp's stdout is the protocol channel, and a server's startup complaint is the best
    explanation of why it failed, so it goes into the problem report.
    """

    def __init__(self, server: str) -> None:
        read_fd, write_fd = os.pipe()
        self.file = os.fdopen(write_fd, "w")  # handed to the child as its stderr
        self.lines: deque[str] = deque(maxlen=20)
        # A thread, not the event loop: it works the same on every platform and never blocks us.
        self._thread = threading.Thread(target=self._pump, args=(read_fd, server), daemon=True)
        self._thread.start()

    def _pump(self, read_fd: int, server: str) -> None:
        with os.fdopen(read_fd, "rb") as pipe:
            for raw in pipe:
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    self.lines.append(line)
                    log.info("MCP server %r: %s", server, line)

    def release(self) -> None:
        """Drop our copy of the write end (once the child has its own), so EOF can arrive."""
        if not self.file.closed:
            self.file.close()

    async def tail(self, wait: float = 1.0) -> str:
        """The last few lines, after giving a dying child a moment to finish writing."""
        self.release()
        await asyncio.to_thread(self._thread.join, wait)
        return " | ".join(list(self.lines)[-3:])[-300:]


class _Connection:
    """One server: a task that owns the SDK client from connect to close."""

    def __init__(self, spec: McpServerSpec, cwd: Path | None) -> None:
        self.spec = spec
        self.cwd = cwd
        self.client: Any = None  # mcp.client.Client while connected
        self.remote_tools: list[Any] = []
        self.truncated = 0
        self.stderr: _StderrTap | None = None
        self.ready: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self.task = asyncio.create_task(self._run(), name=f"mcp-{spec.name}")

    async def _run(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                client = await self._connect(stack)
                self.remote_tools = await self._list_tools(client)
                self.client = client
                self.ready.set_result(None)
                await self._stop.wait()
        except Exception as exc:  # any failure of a server is reported, never raised into the session
            if not self.ready.done():
                self.ready.set_result(exc)
            else:
                log.warning("MCP server %r stopped with an error: %s", self.spec.name, _describe(exc))
        finally:
            self.client = None
            if not self.ready.done():  # cancelled while starting: whoever waits must not hang
                self.ready.set_result(ConnectionAbortedError("closed while starting"))
            if self.stderr is not None:
                self.stderr.release()

    async def _connect(self, stack: AsyncExitStack) -> Any:
        from mcp.client import Client
        from mcp_types import Implementation

        client = Client(
            await self._transport(stack),
            cache=None,  # we list once per session; a response cache only holds memory
            client_info=Implementation(name="hermes-editor", version=_version()),
        )
        try:
            await stack.enter_async_context(client)
        finally:
            if self.stderr is not None:
                self.stderr.release()
        return client

    async def _transport(self, stack: AsyncExitStack) -> Any:
        spec = self.spec
        if spec.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            if not spec.command:
                raise ValueError("no command given")
            self.stderr = _StderrTap(spec.name)
            from core.state_home import user_umask

            environment = _stdio_environment(spec.env)
            command = spec.command
            if "/" in command and not os.path.isabs(command) and self.cwd:
                command = os.path.join(str(self.cwd), command)  # as the server's own cwd would find it
            program = shutil.which(command, path=(environment or {}).get("PATH") or os.environ.get("PATH"))
            if program is None:
                raise FileNotFoundError(spec.command)
            # Our umask keeps the state home private; the server works in the user's files.
            params = StdioServerParameters(
                command="/bin/sh",
                args=["-c", f'umask {user_umask():04o} && exec "$0" "$@"', program, *spec.args],
                env=environment,
                cwd=str(self.cwd) if self.cwd else None,
            )
            return stdio_client(params, errlog=self.stderr.file)
        if not spec.url:
            raise ValueError("no url given")
        headers = dict(spec.headers)
        if spec.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(spec.url, headers=headers)
        if spec.transport == "http":
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            # Headers need a client of our own (the SDK's defaults: 30 s, and 300 s to read a
            # stream). The transport leaves a given client open; the stack closes it afterwards.
            http_client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
            await stack.enter_async_context(http_client)
            return streamable_http_client(spec.url, http_client=http_client)
        raise ValueError(f"unknown transport {spec.transport!r}")

    async def _list_tools(self, client: Any) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None or len(tools) >= MAX_TOOLS_PER_SERVER:
                break
        self.truncated = max(0, len(tools) - MAX_TOOLS_PER_SERVER)
        return tools[:MAX_TOOLS_PER_SERVER]

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call one remote tool; a dead or closed server is a ToolError the model can read."""
        client = self.client
        if client is None:
            raise ToolError(f"MCP server '{self.spec.name}' is not running; {tool} cannot be called.")
        try:
            # No read timeout: a long remote job is the user's to cancel, like any other tool.
            return await client.call_tool(tool, arguments)
        except Exception as exc:
            raise ToolError(f"MCP server '{self.spec.name}' failed to run {tool}: {_describe(exc)}") from exc

    async def close(self) -> None:
        """Stop the owner task: gracefully first (the SDK's bounded shutdown), then by force."""
        self._stop.set()
        if not self.ready.done():
            self.task.cancel()  # still connecting: there is no session to end gracefully
        done, _ = await asyncio.wait({self.task}, timeout=CLOSE_TIMEOUT)
        if not done:
            self.task.cancel()
            await asyncio.wait({self.task}, timeout=2.0)
            if not self.task.done():
                log.warning("MCP server %r did not shut down in time; abandoning it", self.spec.name)
        if self.task.done() and not self.task.cancelled() and self.task.exception() is not None:
            log.warning("MCP server %r failed while closing: %s", self.spec.name, self.task.exception())


class McpConnections:
    """The MCP servers of one session, and their tools."""

    def __init__(self, *, cwd: Path | None = None, start_timeout: float = START_TIMEOUT) -> None:
        """``cwd`` is where stdio servers run (the session's directory)."""
        self._cwd = cwd
        self._start_timeout = start_timeout
        self._connections: list[_Connection] = []
        self._tools: list[Tool] = []

    async def start(self, specs: list[McpServerSpec]) -> list[str]:
        """Connect to every server at once; returns a readable problem for each one that failed.

        Never raises for a server's failure: one broken server never costs the others.
        """
        problems: list[str] = []
        if not specs:
            return problems
        try:
            # ~0.4 s of imports: in a thread, so the loop keeps answering the editor meanwhile.
            await asyncio.to_thread(_import_sdk)
        except ImportError as exc:
            return [_could_not_start(s.name, f"the mcp package is missing ({exc})") for s in specs]
        taken = {c.spec.name for c in self._connections}
        fresh: list[_Connection] = []
        for spec in specs:
            if spec.name in taken:
                problems.append(f"MCP server '{spec.name}' is listed twice; only the first one is used.")
                continue
            taken.add(spec.name)
            connection = _Connection(spec, self._cwd)
            self._connections.append(connection)  # registered now, so aclose() finds it whatever happens
            fresh.append(connection)
        outcomes = await asyncio.gather(*(self._await_ready(c) for c in fresh))
        for connection, problem in zip(fresh, outcomes):
            if problem is not None:
                problems.append(_could_not_start(connection.spec.name, problem))
                if connection in self._connections:  # aclose() may have run meanwhile
                    self._connections.remove(connection)
            elif connection.truncated:
                problems.append(
                    f"MCP server '{connection.spec.name}' offers {len(connection.remote_tools) + connection.truncated} "
                    f"tools; only the first {MAX_TOOLS_PER_SERVER} are used."
                )
        self._tools = self._build_tools()
        return problems

    async def _await_ready(self, connection: _Connection) -> str | None:
        """None when the server is up with its tools listed, else why not (and it is shut down)."""
        try:
            failure = await asyncio.wait_for(asyncio.shield(connection.ready), self._start_timeout)
        except TimeoutError:
            failure = TimeoutError(f"no answer within {self._start_timeout:g} s")
        if failure is None:
            return None
        await connection.close()
        reason = _describe(failure, connection.spec)
        if connection.stderr is not None and (said := await connection.stderr.tail()):
            reason += f" (its stderr: {said})"
        return reason

    def tools(self) -> list[Tool]:
        """The remote tools, in server order then the server's own order (stable across sessions)."""
        return list(self._tools)

    def _build_tools(self) -> list[Tool]:
        tools: list[Tool] = []
        seen: set[str] = set()
        for connection in self._connections:
            for remote in connection.remote_tools:
                name = mcp_tool_name(connection.spec.name, remote.name)
                if name in seen:  # two remote names that sanitise alike
                    name = hashed_tool_name(name, connection.spec.name, remote.name)
                seen.add(name)
                tools.append(_make_tool(connection, remote, name))
        return tools

    async def aclose(self) -> None:
        """Shut every server down (stdio children terminated), bounded in time; never raises."""
        connections, self._connections, self._tools = self._connections, [], []
        results = await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
        for connection, result in zip(connections, results):
            if isinstance(result, Exception):
                log.warning("closing MCP server %r failed: %s", connection.spec.name, result)


def _make_tool(connection: _Connection, remote: Any, name: str) -> Tool:
    """A core Tool that calls ``remote`` on ``connection``."""
    server = connection.spec.name
    annotations = remote.annotations
    read_only = bool(annotations and annotations.read_only_hint)
    display = remote.title or (annotations.title if annotations else None) or remote.name
    description = (remote.description or "").strip() or f"The {remote.name} tool of the MCP server '{server}'."
    if len(description) > MAX_DESCRIPTION:
        description = description[: MAX_DESCRIPTION - 3].rstrip() + "..."

    async def call(ctx: ToolContext, args: RootModel[dict[str, Any]]) -> ToolOutput:
        arguments = args.root
        if read_only:
            await ctx.emit(ToolUpdated(ctx.call_id))  # nothing to approve: the call is under way
        else:
            await ctx.approve_call(f"Call {server}.{remote.name}", detail=_short_json(arguments))
        result = await connection.call(remote.name, arguments)
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or f"{remote.name} reported an error without a message.")
        return ToolOutput(text or "(no output)")

    return Tool(
        name=name,
        description=description,
        args_model=arguments_model(remote.input_schema),
        func=call,
        kind="read" if read_only else "other",
        read_only=read_only,
        toolsets=frozenset({"editor"}),
        title=lambda _args: f"{server}: {display}",
        paths=lambda _args: [],
    )


def _could_not_start(server: str, reason: str) -> str:
    return f"MCP server '{server}' could not start: {reason}; the session goes on without it."


def _short_json(arguments: dict[str, Any], limit: int = 500) -> str:
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(exc: BaseException, spec: McpServerSpec | None = None) -> str:
    """A one-line reason for a failure, from the innermost exception of an SDK task group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError) and spec is not None and spec.command:
        return f"command not found: {spec.command}"
    if isinstance(exc, PermissionError) and spec is not None and spec.command:
        return f"cannot run {spec.command}: permission denied"
    message = getattr(exc, "message", None)  # MCPError carries the server's words here
    text = str(message if isinstance(message, str) else exc).strip()
    text = text or type(exc).__name__
    if spec is not None and spec.url:
        url = _display_url(spec.url)
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status is not None:  # e.g. 401: the headers (a token) are missing or wrong
            text = f"{url} answered HTTP {status}"
        elif type(exc).__name__ in ("ConnectError", "ConnectTimeout"):
            text = f"cannot reach {url}: {text}"
        else:
            text = f"{url}: {text}"
    return text


def _display_url(url: str) -> str:
    """The URL without userinfo, query or fragment: some servers take their API key there."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


def _import_sdk() -> None:
    import mcp.client
    import mcp.client.sse
    import mcp.client.stdio
    import mcp.client.streamable_http  # noqa: F401


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("hermes-editor")
    except Exception:  # an uninstalled checkout still connects
        return "0"
