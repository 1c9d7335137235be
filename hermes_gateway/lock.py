"""One gateway per bot token: an exclusive ``flock`` on a file named for the bot, plus a status file.

Telegram answers a second long poller on the same token with 409 Conflict, and two
schedulers would compete for the same chats; the lock turns that into a clear message at
start-up. The lock is released by the kernel when the process dies, so a crash never leaves
a stale lock behind. A gateway with no platform configured (scheduled jobs only) holds the
lock named ``scheduler``. The status file (``$HERMES_EDITOR_HOME/gateway/<bot>.json``, or ``scheduler.json``) is what
``hermes-editor gateway status`` reads; it never holds the token.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from core.config import home

__all__ = ["SCHEDULER_KEY", "AlreadyRunning", "GatewayLock", "bot_key", "gateway_dir"]

SCHEDULER_KEY = "scheduler"


class AlreadyRunning(Exception):
    """Another process holds this bot's lock."""


def gateway_dir() -> Path:
    return home() / "gateway"


def bot_key(token: str) -> str:
    """A file name for the bot: its numeric id (public) when the token has the usual shape."""
    head = token.split(":", 1)[0]
    return f"bot-{head}" if head.isdigit() else "bot-" + hashlib.sha256(token.encode()).hexdigest()[:16]


class GatewayLock:
    """Hold the lock for the process's life; write the status file next to it."""

    def __init__(self, token: str | None) -> None:
        self.key = bot_key(token) if token else SCHEDULER_KEY
        directory = gateway_dir()
        directory.mkdir(parents=True, exist_ok=True)
        self.lock_path = directory / f"{self.key}.lock"
        self.status_path = directory / f"{self.key}.json"
        self._fd: int | None = None
        self.started_at = time.time()

    def acquire(self) -> None:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            what = "for this bot; one process per bot token" if self.key != SCHEDULER_KEY else "with only the scheduler"
            raise AlreadyRunning(
                f"another hermes-gateway (pid {holder}) is already running {what} (see 'hermes-editor gateway status')."
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def write_status(self, **fields: Any) -> None:
        data = {"pid": os.getpid(), "started_at": self.started_at, "heartbeat": time.time(), **fields}
        tmp = self.status_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, self.status_path)

    def release(self, **fields: Any) -> None:
        if self._fd is None:
            return
        try:
            self.write_status(state="stopped", **fields)
        except OSError:
            pass
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None
