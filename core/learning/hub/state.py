"""``skills/.hub.json``: provenance of installed skills and the pins, read and changed under a lock.

The file holds ``{"installed": {name: record}, "pins": {name: {"pinned_at": ...}}}``. A record
says where a skill came from (source, sub-path, ref, resolved commit or content hash), when,
and a hash of each file written, so that an update can tell a local edit from upstream change.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.locked_json import locked_json

__all__ = ["HubError", "hub_path", "is_pinned", "locked", "pin", "pinned", "record", "records", "unpin"]


class HubError(Exception):
    """A skills hub operation that cannot be done; the message says why and what to do."""


def hub_path() -> Path:
    from core.learning.skills import personal_dir

    return personal_dir() / ".hub.json"


def _read() -> dict[str, Any]:
    try:
        data = json.loads(hub_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@contextmanager
def locked() -> Iterator[dict[str, Any]]:
    """The hub file's object under an exclusive lock; what is left in it is written back."""
    with locked_json(hub_path()) as data:
        for key in ("installed", "pins"):
            if not isinstance(data.get(key), dict):
                data[key] = {}
        yield data


def records() -> dict[str, dict[str, Any]]:
    """name -> provenance record of every skill installed from a source."""
    installed = _read().get("installed")
    return installed if isinstance(installed, dict) else {}


def record(name: str) -> dict[str, Any] | None:
    """The provenance record of ``name``, or None when it was not installed from a source."""
    found = records().get(name)
    return found if isinstance(found, dict) else None


def pinned() -> set[str]:
    """Names of every pinned skill."""
    pins = _read().get("pins")
    return set(pins) if isinstance(pins, dict) else set()


def is_pinned(name: str) -> bool:
    """Whether ``name`` is pinned: ``skills update`` refuses it and the curator leaves it alone."""
    return name in pinned()


def pin(name: str) -> None:
    """Pin a personal skill (installed or agent-written); project and bundled skills are refused."""
    from core.learning.skills import find, personal_dir

    if not (personal_dir() / name / "SKILL.md").is_file():
        found = find(name)
        if found is None:
            raise HubError(f"no skill named {name!r}; see hermes-editor skills list")
        raise HubError(f"{name!r} is a {found.origin} skill: only personal skills (installed or agent-written) are pinned")
    with locked() as data:
        data["pins"].setdefault(name, {"pinned_at": time.time()})


def unpin(name: str) -> bool:
    """Unpin ``name``; False when it was not pinned."""
    with locked() as data:
        return data["pins"].pop(name, None) is not None
