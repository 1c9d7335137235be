"""The installed hermes-editor version, found without importing ``importlib.metadata``.

Standard library only and cheap: the surfaces put it in their first answer to a client.
"""

from __future__ import annotations

import os
import sys

__all__ = ["version"]

_version: str | None = None


def version() -> str:
    """The installed hermes-editor version (read once); "0.0.0" for a bare checkout."""
    global _version
    if _version is None:
        _version = _dist_info_version() or _metadata_version()
    return _version


def _dist_info_version() -> str | None:
    # importlib.metadata takes ~30 ms to import and scan; the dist-info directory's name holds
    # the version, and finding it is a listdir of the few sys.path entries.
    prefix, suffix = "hermes_editor-", ".dist-info"
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.startswith(prefix) and name.endswith(suffix):
                return name[len(prefix) : -len(suffix)]
    return None


def _metadata_version() -> str:
    try:
        from importlib.metadata import version as dist_version

        return dist_version("hermes-editor")
    except Exception:  # not installed as a distribution (a bare checkout)
        return "0.0.0"
