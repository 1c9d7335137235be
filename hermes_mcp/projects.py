"""Where MCP tasks may work: the client's roots and ``[mcp] projects``, never ``/``, home or above.

The project is the user's choice, not the model's: a tool call may name any ``cwd``, so it
must lie inside a folder the user opened in the client (shared as an MCP root) or listed in
``config.toml``. A subfolder of such a folder is allowed (the session is then confined to the
subfolder, which is narrower). Paths are compared after resolving symlinks and ``..``. The
file system root, the home directory, any folder above it, and the state home (or a folder
holding it) are refused always, even when listed or shared, and a root that is one of them
allows nothing beneath it either. With no roots and nothing configured, everything is refused.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.config import config_path, home
from core.paths import within

__all__ = ["ROOTS_KEY", "ProjectRefused", "allowed_projects", "client_roots", "confine", "forbidden_reason"]

log = logging.getLogger(__name__)


class ProjectRefused(Exception):
    """A folder a task may not work in; the message names it and says what to do."""


def _homes() -> list[Path]:
    """The user's home directory: ``$HOME`` and the account's, resolved."""
    found: list[Path] = []
    candidates = [os.environ.get("HOME")]
    try:
        import pwd

        candidates.append(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError):
        pass
    for raw in candidates:
        if raw:
            path = Path(raw).resolve()
            if path not in found:
                found.append(path)
    return found


def forbidden_reason(path: Path) -> str | None:
    """Why a resolved folder can never be a project, or None."""
    if path == Path(path.anchor):
        return "the root of the file system"
    for user_home in _homes():
        if path == user_home:
            return "your home directory"
        if path in user_home.parents:
            return "a folder that contains your home directory"
    state = home().expanduser().resolve()
    if within(path, [state]):
        return "hermes-editor's state home"
    if path in state.parents:
        return "a folder that contains hermes-editor's state home"
    return None


def _how_to_allow(path: Path) -> str:
    return (
        f'add it to [mcp] projects in {config_path()} (projects = ["{path}"]), '
        "or open the folder as a root (workspace folder) in your MCP client"
    )


def allowed_projects(client_roots: Iterable[Path] | None, configured: Iterable[str]) -> list[Path]:
    """The folders tasks may work in (and below): the usable ones among the roots and the configured."""
    out: list[Path] = []
    for origin, paths in (("client root", client_roots or []), ("[mcp] projects entry", [Path(p).expanduser() for p in configured])):
        for raw in paths:
            path = Path(raw).resolve()
            reason = forbidden_reason(path)
            if reason is not None:
                log.warning("ignoring %s %s: it is %s", origin, path, reason)
                continue
            if path not in out:
                out.append(path)
    return out


def confine(raw: str, allowed: list[Path]) -> Path:
    """The resolved project folder for ``raw``; ProjectRefused unless it lies in ``allowed``."""
    given = Path(raw).expanduser()
    if not given.is_absolute():
        raise ProjectRefused(f"cwd must be an absolute path, got {raw!r}")
    path = given.resolve()
    shown = f"{path} (where {raw} leads)" if str(path) != str(given) else str(path)
    reason = forbidden_reason(path)
    if reason is not None:
        raise ProjectRefused(
            f"{shown} is {reason}: hermes-mcp never works there, even when it is listed. "
            f"Name the project's own folder instead: {_how_to_allow(Path('/path/to/project'))}."
        )
    if not within(path, allowed):
        where = ", ".join(str(p) for p in allowed) if allowed else "none: the client shares no roots and [mcp] projects is empty"
        raise ProjectRefused(f"{shown} is not a project this server may work in (allowed: {where}). To allow it, {_how_to_allow(path)}.")
    if not path.is_dir():
        raise ProjectRefused(f"{raw} is not a directory")
    return path


ROOTS_KEY = "roots"


async def client_roots(ctx: Any) -> list[Path] | Any:
    """The client's ``file://`` roots, resolved; [] when it shares none.

    In the 2026-07-28 era the question rides an ``input_required`` round: the first call
    returns that result (send it back as the tool's result), the repeated call has the answer.
    """
    import json
    import warnings

    import anyio
    from mcp_types import InputRequiredResult, ListRootsRequest
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    caps = ctx.client_capabilities
    if caps is None or caps.roots is None:
        return []
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        responses = ctx.input_responses or {}
        answer = responses.get(ROOTS_KEY) if hasattr(responses, "get") else None
        if answer is None:
            return InputRequiredResult(input_requests={ROOTS_KEY: ListRootsRequest()}, request_state=json.dumps({ROOTS_KEY: True}))
        found = getattr(answer, "roots", None) or []
    else:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # roots are deprecated in the 2026 era, not in this one
                with anyio.fail_after(5):
                    found = (await ctx.session.list_roots()).roots
        except Exception:
            log.info("the client declared roots but did not list them", exc_info=True)
            return []
    return _file_paths(str(root.uri) for root in found)


def _file_paths(uris: Iterable[str]) -> list[Path]:
    from urllib.parse import unquote, urlparse

    out = []
    for raw in uris:
        uri = urlparse(raw)
        if uri.scheme == "file" and uri.netloc in ("", "localhost") and uri.path:
            out.append(Path(unquote(uri.path)).resolve())
    return out
