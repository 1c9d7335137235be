"""The ``--json`` form of the listing commands: one JSON array on stdout, times as ISO 8601."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ["add_json_flag", "emit", "iso"]


def add_json_flag(parser: argparse.ArgumentParser, help: str = "print one JSON array of objects instead of text") -> None:
    """Add ``--json`` to a listing command."""
    parser.add_argument("--json", action="store_true", help=help)


def iso(epoch: float | None) -> str | None:
    """``epoch`` as an ISO 8601 UTC time (seconds), or None."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def emit(rows: list[dict[str, Any]]) -> int:
    """Print ``rows`` as one JSON document and return exit status 0."""
    sys.stdout.write(json.dumps(rows, ensure_ascii=False, indent=2) + "\n")
    return 0
