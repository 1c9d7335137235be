"""Where files and commands live. A tool never opens a file or spawns a process itself.

``LocalHost`` uses this machine's filesystem and processes. Surfaces may provide their own
(the ACP surface reads editor buffers and runs commands in the editor's terminal).

Text files keep their encoding, line endings and mode (``core.host.text_files``); commands run
in their own process group, which ends when we die (``core.host.processes``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from core.events import ToolContent
from core.host.processes import CommandResult, LocalJob, child_environment, next_job_id, run_to_end, spawn
from core.host.sandbox import Confinement, command_argv, command_environment
from core.host.text_files import TextFile, read_text_file, write_atomic
from core.state_home import make_user_dirs

__all__ = ["BackgroundCommand", "Emit", "Host", "LocalHost"]


Emit = Callable[[list[ToolContent]], Awaitable[None]]


class BackgroundCommand(Protocol):
    """A command started with ``background``; it runs until it ends or is stopped."""

    id: str
    command: str

    async def read(self, wait: float = 0) -> tuple[str, CommandResult | None]:
        """Output since the last read (waiting up to ``wait`` s for some), and the result once ended."""
        ...

    async def stop(self) -> CommandResult:
        """Stop it (and its children); the result holds output not read yet."""
        ...


class Host(Protocol):
    """File and process access for one session."""

    jobs: dict[str, BackgroundCommand]

    async def read_text(self, path: Path) -> str: ...

    async def read_file(self, path: Path) -> TextFile: ...

    async def write_text(self, path: Path, content: str, *, encoding: str = "utf-8") -> None: ...

    async def delete(self, path: Path) -> None: ...

    async def move(self, source: Path, target: Path) -> None: ...

    async def run_command(
        self, command: str, cwd: Path, *, timeout: float, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> CommandResult:
        """Run ``command``; inside the sandbox ``confinement`` describes when there is one."""
        ...

    async def start_command(
        self, command: str, cwd: Path, *, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> BackgroundCommand: ...

    async def aclose(self) -> None: ...


def _sweep_session_temps() -> None:
    """Remove the private /tmp of sessions whose server is gone (killed before it could clean up)."""
    base = Path(tempfile.gettempdir())
    try:
        entries = list(base.glob("hermes-tmp-*-*"))
    except OSError:
        return
    for entry in entries:
        pid = entry.name.split("-")[2]
        try:
            if not pid.isdigit() or int(pid) == os.getpid() or entry.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(entry, ignore_errors=True)
        except PermissionError:
            pass


class LocalHost:
    """This machine's filesystem and processes."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets = secrets or []
        self.jobs: dict[str, BackgroundCommand] = {}
        self._temp: str | None = None  # the session's private /tmp inside the sandbox

    def command_argv(self, command: str, cwd: Path, confinement: Confinement | None) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that run ``command`` (inside the sandbox when confined)."""
        env = child_environment(self._secrets)
        if confinement is None:
            return ["/bin/sh", "-c", command], env
        if confinement.temp is None:
            if self._temp is None or not os.path.isdir(self._temp):
                _sweep_session_temps()
                self._temp = tempfile.mkdtemp(prefix=f"hermes-tmp-{os.getpid()}-")
            confinement = dataclasses.replace(confinement, temp=Path(self._temp))
        argv = command_argv(command, cwd, confinement, command_environment(env))
        return argv, env

    async def read_text(self, path: Path) -> str:
        return (await self.read_file(path)).text

    async def read_file(self, path: Path) -> TextFile:
        return await asyncio.to_thread(read_text_file, path)

    async def write_text(self, path: Path, content: str, *, encoding: str = "utf-8") -> None:
        await asyncio.to_thread(write_atomic, path, content, encoding)

    async def delete(self, path: Path) -> None:
        await asyncio.to_thread(os.unlink, path)

    async def move(self, source: Path, target: Path) -> None:
        def move() -> None:
            if target.exists():
                raise FileExistsError(f"{target} already exists")
            make_user_dirs(target.parent)
            os.rename(source, target)

        await asyncio.to_thread(move)

    async def _spawn(self, command: str, cwd: Path, confinement: Confinement | None) -> asyncio.subprocess.Process:
        argv, env = self.command_argv(command, cwd, confinement)
        return await spawn(argv, cwd, env)

    async def run_command(
        self, command: str, cwd: Path, *, timeout: float, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> CommandResult:
        proc = await self._spawn(command, cwd, confinement)
        return await run_to_end(proc, timeout=timeout, output_limit=output_limit)

    async def start_command(
        self, command: str, cwd: Path, *, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> BackgroundCommand:
        proc = await self._spawn(command, cwd, confinement)
        job = LocalJob(next_job_id(), command, proc, output_limit)
        self.jobs[job.id] = job
        return job

    async def aclose(self) -> None:
        """Stop every background command still running."""
        jobs, self.jobs = list(self.jobs.values()), {}
        await asyncio.gather(*(job.stop() for job in jobs), return_exceptions=True)
        if self._temp is not None:
            await asyncio.to_thread(shutil.rmtree, self._temp, True)
            self._temp = None
