"""stdio for ``hermes-mcp``: private copies of fds 0 and 1 carry the protocol, and nothing else.

``protect_stdio`` runs first thing: the protocol gets private duplicates of stdin and stdout,
fd 1 then points at stderr and fd 0 at /dev/null, so a stray ``print``, a library warning or
a child process can neither corrupt the stream nor steal input. The SDK's ``stdio_server``
is then given explicit streams over those private fds: ``Lines`` replays the first line (the
``initialize`` we may already have answered) before reading on, and ``Writer`` drops the
SDK's own answer to that replayed request.

A line longer than ``MAX_LINE`` bytes (as in ``hermes-acp``) is dropped as soon as it passes
the limit, read on to its end in pieces that are not kept, and answered with -32600: memory
stays bounded whatever a client sends.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

__all__ = ["MAX_LINE", "Lines", "Writer", "invalid_message_error", "protect_stdio", "read_line", "too_long_error"]

log = logging.getLogger(__name__)

MAX_LINE = 64 * 1024 * 1024  # bytes in one message line, newline excluded
_PIECE = 1024 * 1024


def protect_stdio() -> tuple[int, int]:
    """Return private (input, output) fds for the protocol; fd 0 becomes /dev/null, fd 1 stderr."""
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for fd in (protocol_in, protocol_out):
        os.set_inheritable(fd, False)  # children never get the protocol pipes
    return protocol_in, protocol_out


def read_line(reader: io.BufferedReader, limit: int = MAX_LINE) -> bytes | bytearray | None:
    """The next line (``b""`` at the end of input), or None for a line over ``limit`` bytes.

    A line is read in pieces of at most a megabyte: a long one grows in place (never twice
    in memory); an over-long one is let go at the limit and the rest read and dropped piece
    by piece.
    """
    step = min(_PIECE, limit + 1)
    piece = reader.readline(step)
    if not piece or piece.endswith(b"\n"):
        return piece  # the usual case: one read, no copy
    line = bytearray(piece)
    while len(line) <= limit:
        piece = reader.readline(step)
        line += piece
        if not piece or piece.endswith(b"\n"):
            newline = piece.endswith(b"\n")
            return line if len(line) - newline <= limit else None
    del line
    while True:
        piece = reader.readline(_PIECE)
        if not piece or piece.endswith(b"\n"):
            return None


def too_long_error(limit: int = MAX_LINE) -> dict[str, Any]:
    """The JSON-RPC error for a line that was skipped for its length (its id is unknown)."""
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": f"Invalid Request: message longer than {limit} bytes"}}


def invalid_message_error(line: bytes | bytearray) -> dict[str, Any] | None:
    """The JSON-RPC error for a line that is not a JSON-RPC message, or None to pass it on.

    The SDK drops such lines silently; JSON-RPC 2.0 wants an answer (-32700 for what does not
    parse, -32600 for what is not a request, notification or response). Deeper checks stay
    with the SDK.
    """
    if not line.strip():
        return None
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error: not valid JSON"}}
    if not isinstance(message, dict):
        what = "batches are not supported" if isinstance(message, list) else "a message must be a JSON object"
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": f"Invalid Request: {what}"}}
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        request_id = None
    if message.get("jsonrpc") != "2.0":
        problem = 'Invalid Request: "jsonrpc" must be "2.0"'
    elif not isinstance(message.get("method"), str) and not ({"result", "error"} & message.keys()):
        problem = "Invalid Request: a request needs a method"
    else:
        return None
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32600, "message": problem}}


class Lines:
    """The protocol's input lines as an async iterable: first the replayed ones, then the rest.

    Lines that are not JSON-RPC messages, and over-long lines (None in ``replay``, as
    ``read_line`` returns them), are answered through ``reject`` and not passed on.
    """

    def __init__(
        self,
        reader: io.BufferedReader,
        replay: list[bytes | bytearray | None],
        reject: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> None:
        self._reader = reader
        self._replay = replay
        self._reject = reject

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        import anyio.to_thread

        replay, self._replay = self._replay, []
        while True:
            if replay:
                line = replay.pop(0)
            else:
                # A worker thread, so that a blocked read never stalls the event loop;
                # abandon_on_cancel lets shutdown proceed while the thread still sits in read().
                line = await anyio.to_thread.run_sync(read_line, self._reader, abandon_on_cancel=True)
            if line is None:
                log.warning("skipped a message line longer than %d bytes", MAX_LINE)
                if self._reject is not None:
                    await self._reject(too_long_error())
                continue
            if not line:
                return
            error = invalid_message_error(line) if self._reject is not None else None
            if error is not None:
                log.info("answered an invalid message with %s", error["error"]["code"])
                await self._reject(error)  # type: ignore[misc]
                continue
            yield line.decode("utf-8", errors="replace")


class Writer:
    """The protocol's output: whole lines, written and flushed one at a time.

    ``drop_id`` names a request already answered before the SDK took over; the SDK's first
    response with that id is discarded (after that, ids pass untouched).
    """

    def __init__(self, fd: int, drop_id: int | str | None = None) -> None:
        self._fd = fd
        self._drop = drop_id
        self.dropped: dict[str, Any] | None = None
        self._lock: Any = None

    async def write(self, text: str) -> None:
        import anyio
        import anyio.to_thread

        if self._drop is not None and self._is_dropped(text):
            return
        data = text.encode("utf-8")
        if self._lock is None:
            self._lock = anyio.Lock()
        # Two writers (the SDK, and answers to invalid lines): whole lines, never interleaved.
        async with self._lock:
            await anyio.to_thread.run_sync(self._write_all, data)

    async def write_message(self, message: dict[str, Any]) -> None:
        """Write one JSON-RPC message of our own."""
        await self.write(json.dumps(message, separators=(",", ":")) + "\n")

    async def flush(self) -> None:
        return None  # every write goes straight to the fd

    def _is_dropped(self, text: str) -> bool:
        try:
            message = json.loads(text)
        except ValueError:
            return False
        if not isinstance(message, dict) or message.get("id") != self._drop or not ({"result", "error"} & message.keys()):
            return False
        self._drop = None
        self.dropped = message
        if "error" in message:
            # We answered initialize ourselves, but the SDK refused it: its state is not initialised.
            log.warning("the SDK rejected the initialize request answered early: %s", message["error"])
        return True

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
