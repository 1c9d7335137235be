"""MCP servers: those an editor passes with a session and those ``[mcp_servers]`` in config.toml
names. Connect, list their tools, run them as Tools, and reconnect when one drops.

Each remote tool becomes an ordinary :class:`core.tools.registry.Tool` named by
:func:`core.tools.mcp_schema.mcp_tool_name` (``mcp__<server>__<tool>``), so it goes through the one
dispatch path and the one approval policy like any other tool. The mcp SDK is imported inside
functions only: ``import core.tools.mcp_client`` stays cheap, and a session without MCP servers
never pays for the SDK.

Each server lives in its own asyncio task that enters the SDK client and leaves it again:
the SDK's anyio task groups must be exited by the task that entered them, while start(),
tool calls and aclose() arrive from other tasks. The same task watches the connection (a stdio
server's process ending, a ping left unanswered, a call failing for want of a connection) and,
once it drops, reconnects with backoff. Each change is kept as a notice that the sessions using
the server show in their thread (:class:`SessionMcp`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import RootModel

from core.events import Notice, ToolUpdated
from core.redaction import SECRET_ENV_VARS, add_secrets
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.mcp_schema import arguments_model, mcp_tool_name, result_text
from core.tools.registry import Tool, ToolOutput

if TYPE_CHECKING:
    from core.config import McpServerConfig

__all__ = ["McpConnections", "McpPool", "McpServerSpec", "McpTool", "SessionMcp", "probe", "shared_pool"]

log = logging.getLogger(__name__)

START_TIMEOUT = 20.0  # seconds for one server to start and list its tools
CONNECT_TIMEOUT = 60.0  # seconds one connect attempt may take (a first npx run downloads the server)
CLOSE_TIMEOUT = 8.0  # the SDK's stdio shutdown alone may take ~6 s (stdin close, TERM, KILL)
MAX_DESCRIPTION = 1000
MAX_TOOLS_PER_SERVER = 200  # past this a server floods the prompt; the rest are dropped with a problem
MAX_LIST_PAGES = 20
BACKOFF_START = 0.5  # seconds before the first reconnect; doubled after each failed attempt
BACKOFF_MAX = 30.0
PING_INTERVAL = 20.0  # seconds between liveness pings of a connected server
PING_TIMEOUT = 10.0
MAX_NOTICES = 50  # per server; a session that missed more sees the latest

State = Literal["starting", "up", "down", "failed", "closed"]

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
    """One MCP server to connect to; independent of whether the editor or config.toml described it."""

    name: str
    transport: Literal["stdio", "http", "sse"]
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    # Where a stdio server runs when it is not the session's directory (config.toml's ``cwd``).
    cwd: str | None = None
    origin: Literal["editor", "config"] = "editor"
    # Why it can never start as configured (an environment variable it refers to is not set).
    problem: str | None = None

    def __repr__(self) -> str:  # env and header values may be secrets
        return f"McpServerSpec(name={self.name!r}, transport={self.transport!r}, origin={self.origin!r})"

    @classmethod
    def from_config(cls, name: str, config: McpServerConfig, environ: Mapping[str, str] | None = None) -> McpServerSpec:
        """The spec of ``[mcp_servers.NAME]``, ``${VAR}`` references filled in from ``environ``.

        The filled-in values are secrets from then on (scrubbed from logs and tool output).
        """
        problem = None
        env: dict[str, str] = {}
        headers: dict[str, str] = {}
        try:
            env = config.resolved("env", environ)
            headers = config.resolved("headers", environ)
        except ValueError as exc:
            problem = f"{exc} (set it where this program starts, or write the value in config.toml)"
        references = [k for k, v in config.env.items() if "${" in v.get_secret_value()]
        secrets = [env[k] for k in references if k in env]
        for value in headers.values():
            secrets += [value, *value.split()[1:]]
        add_secrets(secrets + config.secret_values())
        return cls(
            name,
            config.kind,
            command=config.command,
            args=tuple(config.args),
            env=tuple(env.items()),
            url=config.url,
            headers=tuple(headers.items()),
            cwd=str(Path(config.cwd).expanduser()) if config.cwd else None,
            origin="config",
            problem=problem,
        )

    @property
    def where(self) -> str:
        """Where it was configured, for messages."""
        return "config.toml" if self.origin == "config" else "the editor"


def _stdio_environment(spec_env: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The environment added for a stdio server: a few safe variables of ours, then its own."""
    env = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ and k not in SECRET_ENV_VARS}
    env.update(dict(spec_env))
    return env


class _StderrTap:
    """A stdio server's stderr: logged line by line (never on our stdout), the last lines kept.

    hermes-acp's stdout is the protocol channel, and a server's startup complaint is the best
    explanation of why it failed, so it goes into the problem report. The end of the pipe is
    the first sign that the server's process has ended: ``on_eof`` is called (from the thread).
    """

    def __init__(self, server: str, on_eof: Callable[[], None] | None = None) -> None:
        read_fd, write_fd = os.pipe()
        self.file = os.fdopen(write_fd, "w")  # handed to the child as its stderr
        self.lines: deque[str] = deque(maxlen=20)
        self._on_eof = on_eof
        # A thread, not the event loop: it works the same on every platform and never blocks us.
        self._thread = threading.Thread(target=self._pump, args=(read_fd, server), daemon=True)
        self._thread.start()

    def _pump(self, read_fd: int, server: str) -> None:
        try:
            with os.fdopen(read_fd, "rb") as pipe:
                for raw in pipe:
                    line = raw.decode("utf-8", "replace").rstrip()
                    if line:
                        self.lines.append(line)
                        log.info("MCP server %r: %s", server, line)
        finally:
            if self._on_eof is not None:
                self._on_eof()

    def release(self) -> None:
        """Drop our copy of the write end (once the child has its own), so EOF can arrive."""
        if not self.file.closed:
            self.file.close()

    async def tail(self, wait: float = 1.0) -> str:
        """The last few lines, after giving a dying child a moment to finish writing."""
        self.release()
        await asyncio.to_thread(self._thread.join, wait)
        return " | ".join(list(self.lines)[-3:])[-300:]


class _Permanent(Exception):
    """A server that cannot start as configured: trying again would not help."""


@dataclass(frozen=True, slots=True)
class McpTool(Tool):
    """A remote tool: which server it belongs to, and the connection that runs it."""

    server: str = ""
    connection: Any = None  # _Connection


class _Connection:
    """One server: a task that owns the SDK client from connect to close, reconnecting when it drops."""

    def __init__(self, spec: McpServerSpec, cwd: Path | None, *, keep_trying: bool = False) -> None:
        """``keep_trying``: retry with backoff even when the first start fails (config.toml's
        servers, which outlive sessions); otherwise a failed start ends it (the editor's, reported)."""
        self.spec = spec
        self.cwd = cwd
        self.keep_trying = keep_trying
        self.client: Any = None  # mcp.client.Client while connected
        self.remote_tools: list[Any] = []
        self.truncated = 0
        self.stderr: _StderrTap | None = None
        self.state: State = "starting"
        self.reason = ""  # why it is down or failed
        self.ever_up = False
        self.retry_at = 0.0  # loop time of the next attempt while down
        self.tools_version = 0
        # Every server passed in the same list (the editor's), for "the editor's wins" on a name clash.
        self.group: frozenset[str] = frozenset({spec.name})
        self.notices: deque[tuple[int, str]] = deque(maxlen=MAX_NOTICES)
        self.seq = 0
        self.watchers: weakref.WeakSet[SessionMcp] = weakref.WeakSet()  # told of each notice
        self._built: tuple[int, list[McpTool]] = (-1, [])
        self._loop = asyncio.get_running_loop()
        self.ready: asyncio.Future[BaseException | None] = self._loop.create_future()
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._drop_reason = ""
        self._attempt = 0
        self._calls = 0  # in flight: a server busy with a long call is not pinged meanwhile
        self.task = asyncio.create_task(self._run(), name=f"mcp-{spec.name}")

    # --- the owner task -----------------------------------------------------------------

    async def _run(self) -> None:
        delay = BACKOFF_START
        try:
            await asyncio.to_thread(_import_sdk)
            while not self._stop.is_set():
                self._attempt += 1
                self._drop_reason = ""
                self._wake.clear()
                try:
                    async with AsyncExitStack() as stack:
                        try:
                            async with asyncio.timeout(CONNECT_TIMEOUT):
                                client = await self._connect(stack)
                                self.remote_tools = await self._list_tools(client)
                        except TimeoutError:
                            raise TimeoutError(f"no answer within {CONNECT_TIMEOUT:g} s") from None
                        self.tools_version += 1
                        self.client = client
                        self._went_up()
                        delay = BACKOFF_START
                        reason = await self._watch(client)
                        self.client = None
                        if reason is not None:
                            self._went_down(reason)
                except _Permanent as exc:
                    self.client = None
                    self._cannot_start(str(exc))
                    return
                except Exception as exc:
                    self.client = None
                    await self._failed(exc)
                    if self.state == "starting":  # not keep_trying: whoever started it reports it
                        return
                if self._stop.is_set():
                    break
                self.retry_at = self._loop.time() + delay
                try:
                    await asyncio.wait_for(self._stop.wait(), delay)
                    break
                except TimeoutError:
                    pass
                delay = min(delay * 2, BACKOFF_MAX)
        except ImportError as exc:
            self._cannot_start(f"the mcp package is missing ({exc})")
        finally:
            self.client = None
            if not self.ready.done():  # cancelled while starting: whoever waits must not hang
                self.ready.set_result(ConnectionAbortedError("closed while starting"))
            if self.stderr is not None:
                self.stderr.release()
            if self.state != "failed":
                self.state = "closed"

    async def _watch(self, client: Any) -> str | None:
        """Wait until the server drops (returns why) or close() is called (returns None)."""
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), PING_INTERVAL)
            except TimeoutError:
                if self._calls == 0 and not await self._answers(client):
                    self._drop(f"it stopped answering (no reply to a ping within {PING_TIMEOUT:g} s)")
            if self._stop.is_set():
                return None
            if self._drop_reason:
                return self._drop_reason

    def _drop(self, reason: str) -> None:
        """Note that the connection is lost (from any task or, through the loop, any thread)."""
        if not self._drop_reason:
            self._drop_reason = reason
        self.client = None
        self._wake.set()

    def _process_ended(self, attempt: int) -> None:
        """The stdio server's stderr closed: its process has ended (called from the tap's thread)."""

        def drop() -> None:
            if attempt == self._attempt and self.state == "up":
                tail = " | ".join(list(self.stderr.lines)[-2:])[-200:] if self.stderr else ""
                self._drop("its process ended" + (f" (its stderr: {tail})" if tail else ""))

        try:
            self._loop.call_soon_threadsafe(drop)
        except RuntimeError:  # the loop is closed: nobody is left to tell
            pass

    async def _answers(self, client: Any, timeout: float = PING_TIMEOUT) -> bool:
        """Whether the server answers a ping. Any answer counts: servers of the newest protocol
        refuse ping as an unknown method, which still says they are there."""
        try:
            await asyncio.wait_for(client.session.send_ping(), timeout)
        except Exception as exc:
            return _answered(exc)
        return True

    # --- state changes and what sessions are told ----------------------------------------

    def _notice(self, text: str, *, trouble: bool = True) -> None:
        self.seq += 1
        self.notices.append((self.seq, text))
        log.log(logging.WARNING if trouble else logging.INFO, "%s", text)
        for watcher in list(self.watchers):
            watcher.changed()

    def _went_up(self) -> None:
        was, self.state, self.reason = self.state, "up", ""
        if not self.ready.done():
            self.ready.set_result(None)
        count = f"{len(self.remote_tools)} tool{'s' if len(self.remote_tools) != 1 else ''}"
        if was == "down" and self.ever_up:
            self._notice(f"MCP server '{self.spec.name}' is back (reconnected; {count}).", trouble=False)
        elif was == "down" or self.keep_trying:
            self._notice(f"MCP server '{self.spec.name}' is up ({count}).", trouble=False)
        self.ever_up = True
        log.info("MCP server %r connected (attempt %d, %s)", self.spec.name, self._attempt, count)

    def _went_down(self, reason: str) -> None:
        self.state, self.reason = "down", reason
        self._notice(f"MCP server '{self.spec.name}' is down: {reason}. Reconnecting in the background; its tools fail until it is back.")

    def _cannot_start(self, reason: str) -> None:
        self.state, self.reason = "failed", reason
        if not self.ready.done():
            self.ready.set_result(_Permanent(reason))
        self._notice(f"MCP server '{self.spec.name}' cannot start: {reason}.")

    async def _failed(self, exc: Exception) -> None:
        """A connect attempt failed, or a live connection ended with an error."""
        reason = _describe(exc, self.spec)
        if self.stderr is not None and (said := await self.stderr.tail(0.5)):
            reason += f" (its stderr: {said})"
        if self.state == "up":
            self._went_down(self._drop_reason or reason)
        elif self.state == "starting":
            self.reason = reason
            if not self.ready.done():
                self.ready.set_result(exc)
            if self.keep_trying:
                self.state = "down"
                self._notice(f"MCP server '{self.spec.name}' could not start: {reason}. Retrying in the background.")
        elif self._drop_reason:  # the connection this attempt made was lost; this is its teardown
            log.debug("MCP server %r: closing the lost connection: %s", self.spec.name, reason)
        else:
            self.reason = reason
            log.info("MCP server %r: reconnect attempt %d failed: %s", self.spec.name, self._attempt, reason)

    def status_line(self) -> str:
        """One line on the server's state, for a session that starts while it is not up."""
        name = self.spec.name
        if self.state == "down" and not self.ever_up:
            return f"MCP server '{name}' could not start: {self.reason}. Retrying in the background."
        if self.state == "down":
            return f"MCP server '{name}' is down: {self.reason}. Reconnecting in the background; its tools fail until it is back."
        if self.state == "failed":
            return f"MCP server '{name}' cannot start: {self.reason}."
        if self.state == "starting":
            return f"MCP server '{name}' is still starting; its tools join when it is up."
        return f"MCP server '{name}' is {self.state}."

    # --- connecting ----------------------------------------------------------------------

    async def _connect(self, stack: AsyncExitStack) -> Any:
        from mcp.client import Client
        from mcp_types import Implementation

        client = Client(
            await self._transport(stack),
            cache=None,  # we list once per connection; a response cache only holds memory
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
        if spec.problem:
            raise _Permanent(spec.problem)
        if spec.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            if not spec.command:
                raise _Permanent("no command given")
            attempt = self._attempt
            self.stderr = _StderrTap(spec.name, on_eof=lambda: self._process_ended(attempt))
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
            raise _Permanent("no url given")
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
        raise _Permanent(f"unknown transport {spec.transport!r}")

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

    # --- what sessions use -----------------------------------------------------------------

    def tools(self) -> list[McpTool]:
        """The server's tools as last listed (kept while it is down: calls then say why they fail)."""
        if self._built[0] != self.tools_version:
            built: list[McpTool] = []
            seen: set[str] = set()
            for remote in self.remote_tools:
                name = mcp_tool_name(self.spec.name, remote.name)
                if name not in seen:  # a server that lists one name twice
                    seen.add(name)
                    built.append(_make_tool(self, remote, name))
            self._built = (self.tools_version, built)
        return list(self._built[1])

    def unavailable(self, tool: str) -> str:
        """Why ``tool`` cannot be called now, for the model."""
        name = self.spec.name
        if self.state == "down":
            wait = max(0.0, self.retry_at - self._loop.time())
            when = f"next attempt in {wait:.0f} s" if wait >= 1 else "reconnecting now"
            what = "is down" if self.ever_up else "could not start"
            return (
                f"MCP server '{name}' {what} ({self.reason}) and is reconnecting in the background ({when}); "
                f"{tool} cannot be called until it is back. Try again later, or go on without it."
            )
        if self.state == "starting":
            return f"MCP server '{name}' is still starting; {tool} can be called once it is up. Try again in a moment."
        if self.state == "failed":
            return f"MCP server '{name}' cannot start: {self.reason}; {tool} cannot be called."
        return f"MCP server '{name}' is not running; {tool} cannot be called."

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Call one remote tool; a dead, reconnecting or closed server is a ToolError the model can read."""
        client = self.client
        if client is None:
            raise ToolError(self.unavailable(tool))
        self._calls += 1
        try:
            # No read timeout: a long remote job is the user's to cancel, like any other tool.
            return await client.call_tool(tool, arguments)
        except Exception as exc:
            reason = _describe(exc, self.spec)
            # The server's own error is an answer; anything else may be a lost connection: ask it.
            if _answered(exc) or (self.client is client and await self._answers(client, 5.0)):
                raise ToolError(f"MCP server '{self.spec.name}' failed to run {tool}: {reason}") from exc
            if self.state == "up":
                self._drop(f"the connection was lost ({reason})")
            raise ToolError(
                f"MCP server '{self.spec.name}' stopped answering ({reason}); reconnecting in the background. "
                f"{tool} cannot be called until it is back."
            ) from exc
        finally:
            self._calls -= 1

    async def close(self) -> None:
        """Stop the owner task: gracefully first (the SDK's bounded shutdown), then by force."""
        self._stop.set()
        self._wake.set()
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
    """The MCP servers one session brings (the editor's list), and their tools."""

    def __init__(self, *, cwd: Path | None = None, start_timeout: float = START_TIMEOUT) -> None:
        """``cwd`` is where stdio servers run (the session's directory)."""
        self._cwd = cwd
        self._start_timeout = start_timeout
        self._connections: list[_Connection] = []
        self._tools: list[Tool] = []

    async def start(self, specs: list[McpServerSpec]) -> list[str]:
        """Connect to every server at once; returns a readable problem for each one that failed.

        Never raises for a server's failure: one broken server never costs the others. A server
        that started and later drops reconnects by itself.
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
        group = frozenset(s.name for s in specs) | taken
        fresh: list[_Connection] = []
        for spec in specs:
            if spec.name in taken:
                problems.append(f"MCP server '{spec.name}' is listed twice; only the first one is used.")
                continue
            taken.add(spec.name)
            connection = _Connection(spec, Path(spec.cwd) if spec.cwd else self._cwd)
            self._connections.append(connection)  # registered now, so aclose() finds it whatever happens
            fresh.append(connection)
        for connection in self._connections:
            connection.group = group
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
        if isinstance(failure, _Permanent) or connection.reason:
            return connection.reason or str(failure)
        reason = _describe(failure, connection.spec)
        if connection.stderr is not None and (said := await connection.stderr.tail()):
            reason += f" (its stderr: {said})"
        return reason

    def connected(self) -> list[_Connection]:
        """The servers that started, in the order given."""
        return list(self._connections)

    def tools(self) -> list[Tool]:
        """The remote tools, in server order then the server's own order (stable across sessions)."""
        return list(self._tools)

    def _build_tools(self) -> list[Tool]:
        tools: list[Tool] = []
        seen: set[str] = set()
        for connection in self._connections:
            for tool in connection.tools():
                if tool.name not in seen:  # distinct pairs never share a name but for a hash collision
                    seen.add(tool.name)
                    tools.append(tool)
        return tools

    async def aclose(self) -> None:
        """Shut every server down (stdio children terminated), bounded in time; never raises."""
        connections, self._connections, self._tools = self._connections, [], []
        results = await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
        for connection, result in zip(connections, results):
            if isinstance(result, Exception):
                log.warning("closing MCP server %r failed: %s", connection.spec.name, result)


async def probe(spec: McpServerSpec, *, cwd: Path | None = None, timeout: float = START_TIMEOUT) -> tuple[list[McpTool], str | None]:
    """Connect to one server, list its tools and disconnect: (its tools, None), or ([], why not)."""
    try:
        await asyncio.to_thread(_import_sdk)
    except ImportError as exc:
        return [], f"the mcp package is missing ({exc})"
    connections = McpConnections(cwd=cwd, start_timeout=timeout)
    connection = _Connection(spec, Path(spec.cwd) if spec.cwd else cwd)
    connections._connections.append(connection)
    try:
        problem = await connections._await_ready(connection)
        return (connection.tools() if problem is None else []), problem
    finally:
        await connections.aclose()


class McpPool:
    """The servers of ``[mcp_servers]`` in config.toml, for one process.

    A server is connected when a session first needs it and stays connected (reconnecting when
    it drops) for every later session. A stdio server without its own ``cwd`` runs in the
    session's project directory: one process per project directory, shared by its sessions.
    """

    def __init__(self, servers: Mapping[str, McpServerConfig], environ: Mapping[str, str] | None = None) -> None:
        self.specs = [McpServerSpec.from_config(name, config, environ) for name, config in servers.items() if config.enabled]
        self._connections: dict[tuple[str, str | None], _Connection] = {}

    def connections_for(self, cwd: Path) -> list[_Connection]:
        """The connections a session in ``cwd`` uses, started now if they were not yet."""
        found = []
        for spec in self.specs:
            shared = spec.transport != "stdio" or spec.cwd is not None
            key = (spec.name, None if shared else str(cwd))
            connection = self._connections.get(key)
            if connection is None or connection.state == "closed":
                connection = _Connection(spec, Path(spec.cwd) if spec.cwd else cwd, keep_trying=True)
                self._connections[key] = connection
            found.append(connection)
        return found

    async def aclose(self) -> None:
        """Shut every server down, bounded in time; never raises."""
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)


_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, tuple[object, McpPool]]] = weakref.WeakKeyDictionary()


def shared_pool(servers: Mapping[str, McpServerConfig]) -> McpPool | None:
    """The pool for ``servers`` (one configuration's table), shared by the agents built from it in
    this event loop (the gateway's chat and cron agents); None when no server is enabled."""
    if not any(config.enabled for config in servers.values()):
        return None
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return McpPool(servers)
    pools = _POOLS.setdefault(loop, {})
    found = pools.get(id(servers))
    if found is not None and found[0] is servers:
        return found[1]
    pool = McpPool(servers)
    pools[id(servers)] = (servers, pool)
    return pool


class SessionMcp:
    """What one session sees of MCP servers: config.toml's for its project directory, and the
    editor's (the session's extra tools); which of their tools it offers, and the notices for its
    thread when one goes down or comes back.

    The editor's server wins over config.toml's of the same name, for that session only.
    """

    def __init__(self, pool: McpPool | None, cwd: Path) -> None:
        self._config = pool.connections_for(cwd) if pool is not None else []
        self._seen: dict[int, int] = {}  # id(connection) -> the last notice shown
        self._opened = False
        # Called when one of its servers goes down or comes back, so that a surface can show
        # changes() at once when no turn runs (a running turn shows them at its next step).
        self.on_change: Callable[[], Awaitable[None]] | None = None
        self._told: set[asyncio.Task[None]] = set()
        for connection in self._config:
            connection.watchers.add(self)

    def changed(self) -> None:
        """A server of this session has a new notice: let the surface know, in the background."""
        if self.on_change is None:
            return
        task = asyncio.get_running_loop().create_task(self._tell())
        self._told.add(task)
        task.add_done_callback(self._told.discard)

    async def _tell(self) -> None:
        try:
            if self.on_change is not None:
                await self.on_change()
        except Exception:
            log.debug("telling a session of an MCP server change failed", exc_info=True)

    def _editor(self, extra_tools: Mapping[str, Tool]) -> list[_Connection]:
        found: dict[int, _Connection] = {}
        for tool in extra_tools.values():
            if isinstance(tool, McpTool) and tool.connection is not None:
                found.setdefault(id(tool.connection), tool.connection)
        for connection in found.values():
            connection.watchers.add(self)
        return list(found.values())

    def _active(self, extra_tools: Mapping[str, Tool]) -> tuple[list[_Connection], list[_Connection]]:
        """(config.toml's connections this session uses, the editor's)."""
        editor = self._editor(extra_tools)
        shadowed: set[str] = set().union(*(c.group for c in editor)) if editor else set()
        return [c for c in self._config if c.spec.name not in shadowed], editor

    def tools(self, extra_tools: Mapping[str, Tool]) -> dict[str, Tool]:
        """config.toml's servers' tools for this session (not those of a server the editor also passed)."""
        if not self._config:
            return {}
        config, _ = self._active(extra_tools)
        tools: dict[str, Tool] = {}
        for connection in config:
            for tool in connection.tools():
                tools.setdefault(tool.name, tool)
        return tools

    async def open_turn(self, extra_tools: Mapping[str, Tool], timeout: float = START_TIMEOUT) -> list[Notice]:
        """Notices for the start of a turn. The first turn waits (bounded) for config.toml's
        servers to start and says which are not up; later turns say what changed meanwhile."""
        if self._opened:
            return self.changes(extra_tools)
        self._opened = True
        config, editor = self._active(extra_tools)
        shadowed = {c.spec.name for c in self._config} - {c.spec.name for c in config}
        if shadowed:
            log.info("the editor's MCP servers %s replace config.toml's of the same name", ", ".join(sorted(shadowed)))
        pending = [c.ready for c in config if not c.ready.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        notices = [Notice(c.status_line(), "warning") for c in (*config, *editor) if c.state != "up"]
        for connection in (*config, *editor):
            self._seen[id(connection)] = connection.seq
        return notices

    def changes(self, extra_tools: Mapping[str, Tool]) -> list[Notice]:
        """A notice for each server of this session that went down or came back since last asked
        (nothing before the first turn, which says how each server is)."""
        if not self._opened:
            return []
        notices: list[Notice] = []
        config, editor = self._active(extra_tools)
        for connection in (*config, *editor):
            seen = self._seen.get(id(connection))
            if seen is None:  # first sight: how it started was said when it started
                self._seen[id(connection)] = connection.seq
                continue
            notices += [Notice(text, "warning") for seq, text in connection.notices if seq > seen]
            self._seen[id(connection)] = connection.seq
        return notices


def _make_tool(connection: _Connection, remote: Any, name: str) -> McpTool:
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

    return McpTool(
        name=name,
        description=description,
        args_model=arguments_model(remote.input_schema),
        func=call,
        kind="read" if read_only else "other",
        read_only=read_only,
        toolsets=frozenset({"editor"}),
        title=lambda _args: f"{server}: {display}",
        paths=lambda _args: [],
        server=server,
        connection=connection,
    )


def _answered(exc: BaseException) -> bool:
    """Whether ``exc`` is the server's own error answer (not a lost connection or a timeout)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    return isinstance(exc, MCPError) and exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)


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
