"""Newline-delimited JSON-RPC over stdio, strict about what it accepts.

Unlike a plain reader, it answers what cannot be a request: invalid JSON gets -32700, JSON
that is not an object (or lacks a method and an id) gets -32600, and an over-long line is
skipped with an error. The process keeps serving either way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from json.encoder import encode_basestring
from typing import Any

__all__ = ["StdioTransport"]

log = logging.getLogger(__name__)

MAX_LINE = 64 * 1024 * 1024


class StdioTransport:
    """A message transport for the ACP SDK's Connection, over fds ``read_fd``/``write_fd``."""

    def __init__(
        self,
        read_fd: int,
        write_fd: int,
        *,
        replay: list[bytes] | None = None,
        rest: bytes = b"",
        answered: dict[Any, dict[str, Any]] | None = None,
    ) -> None:
        """``replay`` and ``rest`` are what was read from ``read_fd`` before (whole lines, then
        the bytes after them); ``answered`` maps the ids of requests among them that were already
        answered (by ``hermes_acp.handshake``) to the results sent. The SDK's own answers to them are
        not sent again, and other requests wait until the SDK has handled them."""
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._replay = list(replay or [])
        self._rest = rest
        self._answered = dict(answered or {})
        self._settled: asyncio.Event | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self._after_result: dict[str, list[Callable[[], Coroutine[Any, Any, None]]]] = {}
        # Ids of requests read and not answered yet (see ``answered_all``).
        self._unanswered: set[Any] = set()
        self._all_answered = asyncio.Event()
        self._all_answered.set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        reader = self._reader = asyncio.StreamReader(limit=MAX_LINE)
        self._settled = asyncio.Event()
        if not self._answered:
            self._settled.set()
        if self._rest:
            reader.feed_data(self._rest)
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(self._read_fd, "rb", buffering=0))
        except ValueError:  # stdin is a regular file, not a pipe: read it in a thread
            threading.Thread(target=self._feed_from_file, args=(loop,), daemon=True).start()
        try:
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, os.fdopen(self._write_fd, "wb", buffering=0, closefd=False)
            )
            self._writer = asyncio.StreamWriter(transport, protocol, None, loop)
        except ValueError:  # stdout is a regular file: plain blocking writes serve
            self._writer = None

    def _feed_from_file(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self._reader is not None
        with os.fdopen(self._read_fd, "rb") as handle:
            for line in handle:
                loop.call_soon_threadsafe(self._reader.feed_data, line)
        loop.call_soon_threadsafe(self._reader.feed_eof)

    async def send(self, message: dict[str, Any]) -> None:
        if "method" not in message:
            self._unanswered.discard(message.get("id"))
            if not self._unanswered:
                self._all_answered.set()
        if self._answered and "method" not in message and message.get("id") in self._answered:
            self._settle(message)
            return
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        await self._write(data)
        self._answer_sent(message)

    async def send_updates(self, session_id: str, updates: list[str]) -> None:
        """A ``session/update`` notification for each of ``updates`` (each already its JSON
        text), in one write: a replay sends tens of thousands. The same bytes as ``send``'s."""
        head = '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + encode_basestring(session_id) + ',"update":'
        lines = "".join((head, ("}}\n" + head).join(updates), "}}\n"))
        await self._write(lines.encode("utf-8"))

    async def _write(self, data: bytes) -> None:
        """``data`` to stdout, whole, after whatever was written before it."""
        async with self._lock:
            if self._closed:
                raise ConnectionError("stdout is closed")
            if self._writer is None:
                os.write(self._write_fd, data)
            else:
                self._writer.write(data)
                await self._writer.drain()

    def _answer_sent(self, message: dict[str, Any]) -> None:
        result = message.get("result")
        if isinstance(result, dict) and result.get("sessionId") in self._after_result:
            for callback in self._after_result.pop(result["sessionId"]):
                asyncio.create_task(callback())

    def _settle(self, message: dict[str, Any]) -> None:
        """The SDK's answer to a request answered early: already on the wire, so not sent."""
        early = self._answered.pop(message["id"])
        if "result" not in message:
            log.error("request %r was answered early, but handling it failed: %s", message["id"], message.get("error"))
        elif message["result"] != early:
            log.error("request %r was answered early with %s, but the server answers %s", message["id"], early, message["result"])
        self._answer_sent(message)
        if not self._answered and self._settled is not None:
            self._settled.set()

    def after_session_answer(self, session_id: str, callback: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``callback`` once the answer naming ``session_id`` is on the wire.

        Updates for a new session must follow the answer that tells the client its id.
        """
        self._after_result.setdefault(session_id, []).append(callback)

    async def receive(self) -> dict[str, Any] | None:
        assert self._reader is not None and self._settled is not None
        while True:
            replayed = bool(self._replay)
            line = self._replay.pop(0) if replayed else await self._read_line()
            if line is None:
                return None
            message = await self._parse(line)
            if message is None:
                continue
            if not replayed and "method" in message and not self._settled.is_set():
                # Requests after those answered early wait until the SDK has handled them (the
                # client may already use the session id it was given). Responses never wait.
                await self._settled.wait()
            if "method" in message and "id" in message:
                self._unanswered.add(message["id"])
                self._all_answered.clear()
            return message

    async def answered_all(self, timeout: float) -> bool:
        """Wait until every request read so far has been answered (False after ``timeout`` s).

        When the client closes stdin, what it asked before is still done: a mode it chose is
        saved, not dropped by the shutdown that follows."""
        try:
            await asyncio.wait_for(self._all_answered.wait(), timeout)
        except TimeoutError:
            log.warning("stdin closed with requests still unanswered: %s", sorted(map(str, self._unanswered)))
            return False
        return True

    async def _parse(self, line: bytes) -> dict[str, Any] | None:
        line = line.strip()
        if not line:
            return None
        try:
            message = json.loads(line)
        except (ValueError, UnicodeDecodeError) as exc:
            await self._error(None, -32700, "Parse error", f"the line is not valid JSON: {exc}")
            return None
        problem = _invalid_request(message)
        if problem is not None:
            msg_id = message.get("id") if isinstance(message, dict) and _valid_id(message.get("id")) else None
            await self._error(msg_id, -32600, "Invalid request", problem)
            return None
        return message

    async def close(self) -> None:
        self._closed = True
        if self._writer is not None and not self._writer.is_closing():
            self._writer.close()

    async def _read_line(self) -> bytes | None:
        assert self._reader is not None
        try:
            line = await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial or None
        except asyncio.LimitOverrunError:
            # Drop the whole over-long line, then say so.
            while True:
                try:
                    await self._reader.readuntil(b"\n")
                    break
                except asyncio.LimitOverrunError as exc:
                    await self._reader.readexactly(exc.consumed)
                except asyncio.IncompleteReadError:
                    return None
            await self._error(None, -32600, "Invalid request", f"message longer than {MAX_LINE} bytes")
            return b""
        return line

    async def _error(self, msg_id: Any, code: int, message: str, details: str) -> None:
        log.warning("rejected input: %s", details)
        try:
            await self.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message, "data": {"details": details}}})
        except ConnectionError:
            pass


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, (str, int)) and not isinstance(value, bool))


def _invalid_request(message: Any) -> str | None:
    if not isinstance(message, dict):
        return f"expected a JSON object, got {type(message).__name__}"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "'method' must be a string"
        if "id" in message and not _valid_id(message["id"]):
            return "'id' must be a string, a number or null"
        if "params" in message and message["params"] is not None and not isinstance(message["params"], (dict, list)):
            return "'params' must be an object"
        return None
    if "id" in message and ("result" in message or "error" in message):
        return None  # a response to one of our requests
    return "a message needs a 'method' (request) or an 'id' with 'result'/'error' (response)"
