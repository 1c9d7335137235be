"""Scripts that call the agent's tools: a Unix socket the script sends one JSON request per call
to (the agent answers each with the tool's result), and the run of the script itself, whose time
limit does not count the time its tool calls take (an approval may wait for a person).

The socket lives in the script's private temp folder, which is the sandbox's ``/tmp``; the
sandbox has no network, and a Unix socket in a bound folder still connects. Every request
carries a random token the script gets in its environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from core.host.processes import CommandResult, OutputCapture, spawn

__all__ = ["MAX_REQUEST", "ToolBridge", "ToolHandler", "run_script"]

log = logging.getLogger(__name__)

MAX_REQUEST = 4 * 1024 * 1024  # bytes in one request line (a whole file written at once fits)

# (tool name, arguments) -> (succeeded, text)
ToolHandler = Callable[[str, dict[str, Any]], Awaitable[tuple[bool, str]]]


class ToolBridge:
    """The agent's end of the socket: each connection sends request lines, each answered in turn."""

    def __init__(self, directory: Path, handle: ToolHandler) -> None:
        self.path = directory / "tools.sock"
        self.token = secrets.token_hex(16)
        self._handle = handle
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._busy = 0  # calls in flight
        self._busy_since = 0.0
        self._busy_total = 0.0

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path), limit=MAX_REQUEST)
        os.chmod(self.path, 0o600)

    def busy_seconds(self) -> float:
        """Time spent in tool calls so far (calls in flight included); it does not count against the script."""
        now = asyncio.get_running_loop().time()
        return self._busy_total + (now - self._busy_since if self._busy else 0.0)

    def _enter(self) -> None:
        if self._busy == 0:
            self._busy_since = asyncio.get_running_loop().time()
        self._busy += 1

    def _leave(self) -> None:
        self._busy -= 1
        if self._busy == 0:
            self._busy_total += asyncio.get_running_loop().time() - self._busy_since

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            while line := await reader.readline():
                ok, text = await self._answer(line)
                writer.write(json.dumps({"ok": ok, "text": text}).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, ValueError, asyncio.IncompleteReadError) as exc:
            log.debug("tool bridge connection ended: %s", exc)
        finally:
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def _answer(self, line: bytes) -> tuple[bool, str]:
        try:
            request = json.loads(line)
        except ValueError:
            return False, "the request was not JSON"
        if not isinstance(request, dict) or not secrets.compare_digest(str(request.get("token", "")), self.token):
            return False, "the request did not carry this script's token"
        name, args = request.get("tool"), request.get("args", {})
        if not isinstance(name, str) or not isinstance(args, dict):
            return False, 'a request is {"tool": NAME, "args": {...}}'
        self._enter()
        try:
            return await self._handle(name, args)
        finally:
            self._leave()

    async def aclose(self) -> None:
        """Stop listening and cancel calls still in flight (their script has gone)."""
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(OSError):
            self.path.unlink()


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _outcome(proc: asyncio.subprocess.Process, capture: OutputCapture, timed_out: bool) -> CommandResult:
    code = proc.returncode
    # The sandbox (or the supervisor) reports a signal that killed the script as 128 + N.
    if code is not None and 128 < code < 128 + signal.NSIG:
        code = -(code - 128)
    name = None
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
    return CommandResult(
        exit_code=None if name else code,
        output=capture.text(),
        truncated=capture.omitted > 0,
        signal=name,
        timed_out=timed_out,
        omitted=max(capture.omitted, 0),
    )


async def run_script(
    argv: list[str], cwd: Path, env: dict[str, str], *, timeout: float, output_limit: int, bridge: ToolBridge
) -> CommandResult:
    """Run ``argv`` (already confined) in its own process group, output (stdout and stderr) kept to
    ``output_limit`` bytes, head and tail. Past ``timeout`` seconds of its own time (the bridge's
    calls not counted) its group is stopped, politely first; a cancel kills it at once."""
    proc = await spawn(argv, cwd, env)
    capture = OutputCapture(output_limit)

    async def pump() -> None:
        assert proc.stdout is not None
        while data := await proc.stdout.read(65536):
            capture.add(data)

    loop = asyncio.get_running_loop()
    started = loop.time()
    reading = asyncio.ensure_future(pump())
    ending = asyncio.ensure_future(proc.wait())
    timed_out = False
    try:
        while not ending.done():
            left = timeout - (loop.time() - started - bridge.busy_seconds())
            if left <= 0:
                timed_out = True
                break
            await asyncio.wait({ending}, timeout=left)
        if timed_out:
            _kill_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(ending), 2)
            except TimeoutError:
                _kill_group(proc.pid, signal.SIGKILL)
        await ending
        await asyncio.wait({reading}, timeout=1)
        if not reading.done():
            # Something it started still holds its output (outside a sandbox, whose namespace
            # ends with it): the group is still there, so it is the script's to end.
            _kill_group(proc.pid, signal.SIGKILL)
            await asyncio.wait({reading}, timeout=2)
    except BaseException:
        _kill_group(proc.pid, signal.SIGKILL)
        raise
    finally:
        for task in (reading, ending):
            if not task.done():
                task.cancel()
    return _outcome(proc, capture, timed_out)
