"""The ACP host: files through the editor (unsaved buffers included), commands in its terminal.

Whatever the client does not offer falls back to the local host.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from core.events import TerminalContent
from core.host import CommandResult, Emit, LocalHost

__all__ = ["AcpHost"]

log = logging.getLogger(__name__)


class AcpHost:
    def __init__(self, conn: Any, session_id: str, capabilities: Any, local: LocalHost) -> None:
        self._conn = conn
        self._session_id = session_id
        fs = getattr(capabilities, "fs", None)
        self.reads_via_client = bool(fs and fs.read_text_file)
        self.writes_via_client = bool(fs and fs.write_text_file)
        self.terminal_via_client = bool(getattr(capabilities, "terminal", False))
        self._local = local

    async def read_text(self, path: Path) -> str:
        if not self.reads_via_client:
            return await self._local.read_text(path)
        from acp import RequestError

        try:
            response = await self._conn.read_text_file(session_id=self._session_id, path=str(path))
        except RequestError as exc:
            if not path.exists():
                raise FileNotFoundError(str(path)) from None
            log.warning("editor could not read %s (%s); reading from disk", path, exc)
            return await self._local.read_text(path)
        return response.content

    async def write_text(self, path: Path, content: str) -> None:
        if not self.writes_via_client:
            return await self._local.write_text(path, content)
        path.parent.mkdir(parents=True, exist_ok=True)
        await self._conn.write_text_file(session_id=self._session_id, path=str(path), content=content)

    async def run_command(
        self, command: str, cwd: Path, *, timeout: float, output_limit: int, show: Emit
    ) -> CommandResult:
        if not self.terminal_via_client:
            return await self._local.run_command(command, cwd, timeout=timeout, output_limit=output_limit, show=show)
        conn, sid = self._conn, self._session_id
        created = await conn.create_terminal(
            session_id=sid, command="/bin/sh", args=["-c", command], cwd=str(cwd), output_byte_limit=output_limit
        )
        terminal_id = created.terminal_id
        timed_out = False
        try:
            await show([TerminalContent(terminal_id)])
            try:
                exit_status = await asyncio.wait_for(
                    conn.wait_for_terminal_exit(session_id=sid, terminal_id=terminal_id), timeout
                )
            except asyncio.TimeoutError:
                timed_out = True
                await conn.kill_terminal(session_id=sid, terminal_id=terminal_id)
                exit_status = None
            output = await conn.terminal_output(session_id=sid, terminal_id=terminal_id)
        except asyncio.CancelledError:
            await asyncio.shield(self._stop(terminal_id))
            raise
        finally:
            await asyncio.shield(self._release(terminal_id))
        status = output.exit_status or exit_status
        return CommandResult(
            exit_code=getattr(status, "exit_code", None),
            signal=getattr(status, "signal", None),
            output=output.output,
            truncated=bool(output.truncated),
            timed_out=timed_out,
        )

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
