"""Where files and commands live. A tool never opens a file or spawns a process itself.

``LocalHost`` uses this machine's filesystem and processes. Surfaces may provide their own
(the ACP surface reads editor buffers and runs commands in the editor's terminal).
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from core.events import ToolContent

__all__ = ["CommandResult", "Host", "LocalHost", "child_environment", "SECRET_ENV_VARS"]

SECRET_ENV_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "TELEGRAM_BOT_TOKEN",
    "HERMES_MCP_TOKEN",
)


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None
    output: str
    truncated: bool = False
    signal: str | None = None
    timed_out: bool = False


Emit = Callable[[list[ToolContent]], Awaitable[None]]


class Host(Protocol):
    """File and process access for one session."""

    async def read_text(self, path: Path) -> str: ...

    async def write_text(self, path: Path, content: str) -> None: ...

    async def run_command(
        self, command: str, cwd: Path, *, timeout: float, output_limit: int, show: Emit
    ) -> CommandResult: ...


def child_environment(secrets: list[str] = ()) -> dict[str, str]:
    """The environment for commands the agent runs: ours, minus every credential."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV_VARS}
    if secrets:
        env = {k: v for k, v in env.items() if v not in secrets}
    env.setdefault("PAGER", "cat")
    env["GIT_PAGER"] = "cat"
    env.setdefault("NO_COLOR", "1")
    return env


def write_atomic(path: Path, content: str) -> None:
    """Write via a temporary file and rename, keeping the file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class LocalHost:
    """This machine's filesystem and processes."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets = secrets or []

    async def read_text(self, path: Path) -> str:
        return await asyncio.to_thread(_read_text, path)

    async def write_text(self, path: Path, content: str) -> None:
        await asyncio.to_thread(write_atomic, path, content)

    async def run_command(
        self, command: str, cwd: Path, *, timeout: float, output_limit: int, show: Emit
    ) -> CommandResult:
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=str(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=child_environment(self._secrets),
            start_new_session=True,  # its own process group, so cancel can stop all of it
        )
        chunks: list[bytes] = []
        size = 0
        truncated = False

        async def pump() -> None:
            nonlocal size, truncated
            assert proc.stdout is not None
            while data := await proc.stdout.read(65536):
                if size < output_limit:
                    chunks.append(data[: output_limit - size])
                size += len(data)
                truncated = size > output_limit

        timed_out = False
        try:
            await asyncio.wait_for(pump(), timeout)
            await proc.wait()
        except asyncio.TimeoutError:
            timed_out = True
            _kill_group(proc)
            await proc.wait()
        except BaseException:
            _kill_group(proc)
            raise
        output = b"".join(chunks).decode("utf-8", errors="replace")
        code = proc.returncode
        sig = signal.Signals(-code).name if code is not None and code < 0 else None
        return CommandResult(
            exit_code=None if sig else code, output=output, truncated=truncated, signal=sig, timed_out=timed_out
        )


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_text(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        return handle.read()
