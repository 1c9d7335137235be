"""``hermes-editor logs [-f] [--surface acp|mcp|gateway] [-n N]``: the surfaces' log files, newest last.

Each surface writes ``$HERMES_EDITOR_HOME/logs/<surface>.log``, rotated to ``.1`` .. ``.3``. A record
starts with its timestamp; the lines of a traceback that follow it belong to it.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hermes_cli.redact import redact

__all__ = ["SURFACES", "register", "run"]

SURFACES = ("acp", "mcp", "gateway")
_BACKUPS = 3
_POLL_SECONDS = 0.2


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``logs`` subcommand."""
    logs = commands.add_parser("logs", help="the last lines of the surfaces' logs; -f follows them")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines (Ctrl-C stops)")
    logs.add_argument("--surface", choices=SURFACES, help="one surface's log (default: all, merged by time)")
    logs.add_argument("-n", "--lines", type=int, default=50, metavar="N", help="how many lines (default 50)")


@dataclass
class _Line:
    stamp: str  # the timestamp of the record this line belongs to ("" before the first record)
    surface: str
    text: str


def _log_dir() -> Path:
    from core.config import home

    return home() / "logs"


def _files(surface: str) -> list[Path]:
    """A surface's log files, oldest first."""
    base = _log_dir() / f"{surface}.log"
    rotated = [Path(f"{base}.{i}") for i in range(_BACKUPS, 0, -1)]
    return [p for p in (*rotated, base) if p.is_file()]


def _stamp(text: str, previous: str) -> str:
    # "2026-12-01 18:41:41,123 INFO name: message": the first 23 characters sort by time.
    head = text[:23]
    if len(head) == 23 and head[4] == "-" and head[10] == " " and head[19] == "," and head[:4].isdigit():
        return head
    return previous


def _read(surface: str, wanted: int) -> list[_Line]:
    """The last ``wanted`` lines of a surface's log, reading rotated files only as far as needed."""
    chunks: list[list[_Line]] = []
    count = 0
    for path in reversed(_files(surface)):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines: list[_Line] = []
        stamp = ""
        for raw in text.splitlines():
            stamp = _stamp(raw, stamp)
            lines.append(_Line(stamp, surface, raw))
        chunks.append(lines)
        count += len(lines)
        if count >= wanted:
            break
    merged = [line for chunk in reversed(chunks) for line in chunk]
    return merged[-wanted:] if wanted > 0 else []


def _show(line: _Line, prefix: bool) -> None:
    text = redact(line.text)
    print(f"{line.surface:<7} | {text}" if prefix else text, flush=True)


def run(args: argparse.Namespace) -> int:
    surfaces = [args.surface] if args.surface else list(SURFACES)
    prefix = len(surfaces) > 1
    wanted = max(0, args.lines)
    try:
        lines = [line for surface in surfaces for line in _read(surface, wanted)]
        lines.sort(key=lambda line: line.stamp)  # stable: each file's own order is kept
        if not lines and not args.follow:
            which = f"{args.surface}.log" if args.surface else "acp.log, mcp.log or gateway.log"
            print(f"No logs yet: nothing in {_log_dir() / which}.", file=sys.stderr)
            return 1
        for line in lines[-wanted:] if wanted else []:
            _show(line, prefix)
        if args.follow:
            _follow(surfaces, prefix)
    except KeyboardInterrupt:
        return 0
    return 0


class _Tail:
    """New complete lines of one file, from its end when first seen; starts over when the file is rotated."""

    def __init__(self, surface: str) -> None:
        self.surface = surface
        self.path = _log_dir() / f"{surface}.log"
        self.inode: int | None = None
        self.offset = 0
        self.partial = b""
        self.stamp = ""
        try:
            info = self.path.stat()
            self.inode, self.offset = info.st_ino, info.st_size
        except OSError:
            pass

    def poll(self) -> list[_Line]:
        try:
            info = self.path.stat()
        except OSError:
            return []
        if info.st_ino != self.inode or info.st_size < self.offset:
            self.inode, self.offset, self.partial = info.st_ino, 0, b""
        if info.st_size == self.offset:
            return []
        try:
            with self.path.open("rb") as file:
                file.seek(self.offset)
                data = file.read()
        except OSError:
            return []
        self.offset += len(data)
        *complete, self.partial = (self.partial + data).split(b"\n")
        lines = []
        for raw in complete:
            text = raw.decode("utf-8", errors="replace")
            self.stamp = _stamp(text, self.stamp)
            lines.append(_Line(self.stamp, self.surface, text))
        return lines


def _follow(surfaces: list[str], prefix: bool) -> None:
    tails = [_Tail(surface) for surface in surfaces]
    while True:
        fresh = [line for tail in tails for line in tail.poll()]
        fresh.sort(key=lambda line: line.stamp)
        for line in fresh:
            _show(line, prefix)
        if not fresh:
            time.sleep(_POLL_SECONDS)
