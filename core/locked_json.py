"""A small JSON file in the state home, read and rewritten under an exclusive lock."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["locked_json"]


@contextmanager
def locked_json(path: Path, *, limit: int = 10_000_000) -> Iterator[dict[str, Any]]:
    """Yield the file's object (empty when missing or unreadable); what the caller leaves in it is
    written back, 0600, before the lock is let go. Several processes may do this at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.read(fd, limit).decode("utf-8", errors="replace")
        try:
            data = json.loads(raw) if raw.strip() else {}
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        yield data
        encoded = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False).encode("utf-8")
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, encoded)
    finally:
        os.close(fd)
