"""The ACP host: files through the editor (unsaved buffers included), commands in its terminal.

Whatever the client does not offer falls back to the session's own host. A project that lives
elsewhere (``[projects.NAME] host = "docker"`` or ``"ssh"``) never uses the editor's files or
terminal, which are on this machine: everything goes to its host. ACP carries text only, so
whether a file is binary, and its encoding, come from disk; files in another encoding than
UTF-8 are read and written on disk, where that encoding is kept.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from core.events import TerminalContent
from core.host.local import BackgroundCommand, Emit, Host, LocalHost
from core.host.processes import CommandResult, OutputCapture, next_job_id
from core.host.sandbox import Confinement
from core.host.text_files import TextFile, read_text_file
from core.redaction import SECRET_ENV_VARS

__all__ = ["AcpHost"]

log = logging.getLogger(__name__)

HEAD_POLL = 0.5  # seconds between looks at a running command's output, to keep its head
TERMINAL_KEEP = 1_000_000  # what we ask the editor to keep; we cut it to head and tail ourselves


class AcpHost:
    def __init__(self, conn: Any, session_id: str, capabilities: Any, local: Host) -> None:
        self._conn = conn
        self._session_id = session_id
        fs = getattr(capabilities, "fs", None)
        # Another host than this machine's: the editor's files and terminal are not where the work is.
        self.passthrough = type(local) is not LocalHost
        self.reads_via_client = bool(fs and fs.read_text_file) and not self.passthrough
        self.writes_via_client = bool(fs and fs.write_text_file) and not self.passthrough
        self.terminal_via_client = bool(getattr(capabilities, "terminal", False)) and not self.passthrough
        self._local: Any = local
        self.jobs: dict[str, BackgroundCommand] = {}
        # Called when a background command ends (the server tells the user when no turn runs).
        self.on_job_end: Callable[[BackgroundCommand], Awaitable[None]] | None = None
        self._watchers: set[asyncio.Task[None]] = set()

    @property
    def where(self) -> str | None:
        """The host tool call titles name (None: this machine)."""
        return getattr(self._local, "where", None)

    def display_path(self, path: Path | str) -> str:
        """How ``path`` is shown to the user: the inner host's path for it."""
        shown = getattr(self._local, "display_path", None)
        return shown(path) if callable(shown) else str(path)

    # --- files -------------------------------------------------------------------------

    async def read_text(self, path: Path) -> str:
        return (await self.read_file(path)).text

    async def read_file(self, path: Path) -> TextFile:
        if self.passthrough:
            return await self._local.read_file(path)
        try:
            on_disk: TextFile | None = await asyncio.to_thread(read_text_file, path)
        except FileNotFoundError:
            on_disk = None
        if not self.reads_via_client or (on_disk is not None and on_disk.encoding != "utf-8"):
            if on_disk is None:
                raise FileNotFoundError(str(path))
            return on_disk
        from acp import RequestError

        try:
            response = await self._conn.read_text_file(session_id=self._session_id, path=str(path))
        except RequestError as exc:
            if on_disk is None:
                raise FileNotFoundError(str(path)) from None
            log.warning("editor could not read %s (%s); reading from disk", path, exc)
            return on_disk
        return TextFile(response.content, "utf-8")

    async def write_text(self, path: Path, content: str, *, encoding: str = "utf-8") -> None:
        if not self.writes_via_client or encoding != "utf-8":
            return await self._local.write_text(path, content, encoding=encoding)
        # Editors hand out buffers with "\n"; the file on disk keeps the line endings it had.
        if "\r\n" not in content and "\n" in content and await asyncio.to_thread(_disk_uses_crlf, path):
            content = content.replace("\n", "\r\n")
        path.parent.mkdir(parents=True, exist_ok=True)
        await self._conn.write_text_file(session_id=self._session_id, path=str(path), content=content)

    async def delete(self, path: Path) -> None:
        await self._local.delete(path)  # ACP has no delete; the editor sees the file go

    async def move(self, source: Path, target: Path) -> None:
        await self._local.move(source, target)

    # --- commands ----------------------------------------------------------------------

    async def _create_terminal(self, command: str, cwd: Path, output_limit: int, confinement: Confinement | None) -> str:
        from acp.schema import EnvVariable

        # The editor's terminal has the editor's environment: blank our credentials in it (a
        # sandboxed command gets a clean environment inside the sandbox as well).
        env = [EnvVariable(name=name, value="") for name in SECRET_ENV_VARS if name in os.environ]
        env += [EnvVariable(name="PAGER", value="cat"), EnvVariable(name="GIT_PAGER", value="cat")]
        argv, _ = self._local.command_argv(command, cwd, confinement)
        created = await self._conn.create_terminal(
            session_id=self._session_id, command=argv[0], args=argv[1:], cwd=str(cwd), env=env, output_byte_limit=output_limit
        )
        return created.terminal_id

    async def run_command(
        self, command: str, cwd: Path, *, timeout: float, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> CommandResult:
        if not self.terminal_via_client:
            return await self._local.run_command(
                command, cwd, timeout=timeout, output_limit=output_limit, show=show, confinement=confinement
            )
        conn, sid = self._conn, self._session_id
        keep = max(output_limit, TERMINAL_KEEP)
        terminal_id = await self._create_terminal(command, cwd, keep, confinement)
        timed_out = False
        head = ""

        async def keep_head() -> None:
            # The editor keeps the tail of long output; the head is caught while it is still there.
            nonlocal head
            while True:
                await asyncio.sleep(HEAD_POLL)
                try:
                    seen = await conn.terminal_output(session_id=sid, terminal_id=terminal_id)
                except Exception:
                    return  # only a nicety: the tail still comes at the end
                if seen.truncated:
                    return
                head = seen.output[: output_limit // 2]
                if len(seen.output) >= keep // 2 or seen.exit_status is not None:
                    return

        watcher = asyncio.ensure_future(keep_head())
        try:
            await show([TerminalContent(terminal_id)])
            try:
                exit_status = await asyncio.wait_for(conn.wait_for_terminal_exit(session_id=sid, terminal_id=terminal_id), timeout)
            except TimeoutError:
                timed_out = True
                await conn.kill_terminal(session_id=sid, terminal_id=terminal_id)
                exit_status = None
            output = await conn.terminal_output(session_id=sid, terminal_id=terminal_id)
        except asyncio.CancelledError:
            await asyncio.shield(self._stop(terminal_id))
            raise
        finally:
            watcher.cancel()
            await asyncio.shield(self._release(terminal_id))
        if not output.truncated:
            capture = OutputCapture(output_limit)
            capture.add(output.output.encode("utf-8", errors="replace"))
            text, omitted = capture.text(), capture.omitted
        else:  # the editor dropped the start: the head we caught while it ran, if any
            tail = output.output[-(output_limit // 2) :]
            text, omitted = f"{head}\n[... output omitted ...]\n{tail}" if head else f"[... earlier output dropped ...]\n{tail}", -1
        status = output.exit_status or exit_status
        return CommandResult(
            exit_code=getattr(status, "exit_code", None),
            signal=getattr(status, "signal", None),
            output=text,
            truncated=bool(output.truncated) or omitted != 0,
            timed_out=timed_out,
            omitted=omitted,
        )

    async def start_command(
        self, command: str, cwd: Path, *, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> BackgroundCommand:
        if not self.terminal_via_client:
            job = await self._local.start_command(command, cwd, output_limit=output_limit, show=show, confinement=confinement)
            self._local.jobs.pop(job.id, None)
        else:
            terminal_id = await self._create_terminal(command, cwd, output_limit, confinement)
            await show([TerminalContent(terminal_id)])  # it stays live in the tool call
            job = _TerminalJob(self, next_job_id(), command, terminal_id)
        self.jobs[job.id] = job
        watcher = asyncio.create_task(self._watch(job))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        return job

    async def _watch(self, job: Any) -> None:
        """Wait for a background command to end, then report it (unless it was stopped or read)."""
        try:
            await job.wait()
            still_listed = self.jobs.get(job.id) is job  # not read to its end or stopped meanwhile
            if still_listed and job.ended is not None and self.on_job_end is not None:
                await self.on_job_end(self.jobs[job.id])
        except asyncio.CancelledError:
            raise
        except Exception:
            log.debug("watching background command %s failed", job.id, exc_info=True)

    @property
    def unsandboxed(self) -> str | None:
        """Why commands run outside the sandbox, for a host that says so (None: they do not)."""
        return getattr(self._local, "unsandboxed", None)

    @property
    def remote_files(self) -> Any:
        """Another machine's searches and listings (None: this machine's files)."""
        return getattr(self._local, "remote_files", None)

    @property
    def checkpoint_files(self) -> Any:
        """Another machine's files for checkpoints (None: this machine's)."""
        return getattr(self._local, "checkpoint_files", None)

    async def aclose(self) -> None:
        """Stop background commands and release their terminals."""
        for watcher in list(self._watchers):
            watcher.cancel()
        jobs, self.jobs = list(self.jobs.values()), {}
        await asyncio.gather(*(job.stop() for job in jobs), return_exceptions=True)
        await self._local.aclose()

    async def _stop(self, terminal_id: str) -> None:
        try:
            await self._conn.kill_terminal(session_id=self._session_id, terminal_id=terminal_id)
        except Exception:
            log.debug("kill_terminal failed", exc_info=True)

    async def _release(self, terminal_id: str) -> None:
        try:
            await self._conn.release_terminal(session_id=self._session_id, terminal_id=terminal_id)
        except Exception:
            log.debug("release_terminal failed", exc_info=True)


class _TerminalJob:
    """A background command in an editor terminal; released when it is stopped or seen to end."""

    def __init__(self, host: AcpHost, job_id: str, command: str, terminal_id: str) -> None:
        self.id = job_id
        self.command = command
        self._host = host
        self._terminal_id = terminal_id
        self._seen = ""
        self._released = False
        self._final: CommandResult | None = None
        self._exit: CommandResult | None = None  # as the editor reported it to ``wait``
        self.told: set[str] = set()  # whom its end was announced to (core.host.processes.take_ended)

    @property
    def ended(self) -> CommandResult | None:
        """How it ended (exit code or signal, no output); None while it runs."""
        return self._final or self._exit

    async def wait(self) -> None:
        """Until the editor reports that it has ended (or it is stopped or released)."""
        if self._final is not None or self._released:
            return
        try:
            status = await self._host._conn.wait_for_terminal_exit(session_id=self._host._session_id, terminal_id=self._terminal_id)
        except Exception:
            if not self._released:
                log.debug("wait_for_terminal_exit failed for %s", self._terminal_id, exc_info=True)
            return
        self._exit = CommandResult(exit_code=getattr(status, "exit_code", None), output="", signal=getattr(status, "signal", None))

    def _new(self, output: str) -> str:
        if output.startswith(self._seen):
            new = output[len(self._seen) :]
        else:  # the editor dropped the oldest output: continue after the last bit we saw
            anchor = self._seen[-200:]
            at = output.find(anchor) if anchor else -1
            new = output[at + len(anchor) :] if at >= 0 else "[... earlier output dropped ...]\n" + output
        self._seen = output
        return new

    async def _output(self):
        return await self._host._conn.terminal_output(session_id=self._host._session_id, terminal_id=self._terminal_id)

    async def read(self, wait: float = 0) -> tuple[str, CommandResult | None]:
        if self._final is not None:
            return "", self._final
        deadline = time.monotonic() + wait
        while True:
            output = await self._output()
            new = self._new(output.output)
            if new or output.exit_status is not None or time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.2)
        if output.exit_status is None:
            return new, None
        self._final = _result(output, new)
        await self._release()
        return new, self._final

    async def stop(self) -> CommandResult:
        if self._final is not None:
            await self._release()
            return CommandResult(self._final.exit_code, "", signal=self._final.signal)
        await self._host._stop(self._terminal_id)
        try:
            output = await self._output()
            result = _result(output, self._new(output.output))
        except Exception:
            result = CommandResult(None, "", signal="SIGKILL")
        await self._release()
        self._final = result
        return result

    async def _release(self) -> None:
        if not self._released:
            self._released = True
            await self._host._release(self._terminal_id)


def _result(output: Any, text: str) -> CommandResult:
    status = output.exit_status
    return CommandResult(
        exit_code=getattr(status, "exit_code", None), signal=getattr(status, "signal", None), output=text, truncated=bool(output.truncated)
    )


def _disk_uses_crlf(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(65536)
    except OSError:
        return False
    crlf = head.count(b"\r\n")
    return bool(crlf) and crlf * 2 >= head.count(b"\n")
