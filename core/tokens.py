"""The bearer token of ``hermes-mcp --http``: ``HERMES_MCP_TOKEN``, or ``mcp-token`` in the state home.

The file is made on first use, 0600 inside a 0700 directory, and appears under its name only
once complete: it is written to a private temporary file and linked into place, so a reader
never sees it half-written and two servers starting at once end up with the same token.
"""

from __future__ import annotations

import os
import secrets
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.state_home import home_path

__all__ = ["MIN_TOKEN_CHARS", "TOKEN_ENV", "McpToken", "TokenError", "ensure_mcp_token", "mcp_token_values", "read_mcp_token", "token_path"]

TOKEN_ENV = "HERMES_MCP_TOKEN"
TOKEN_FILE = "mcp-token"
MIN_TOKEN_CHARS = 16


class TokenError(Exception):
    """The token cannot be used or made; the message says what to do."""


@dataclass(frozen=True, slots=True)
class McpToken:
    value: str
    source: Literal["env", "file"]
    path: Path | None = None
    created: bool = False

    def __repr__(self) -> str:  # never the value
        return f"McpToken(source={self.source!r}, path={self.path!r}, created={self.created})"


def token_path() -> Path:
    return Path(home_path()) / TOKEN_FILE


def _from_env(env: dict[str, str] | os._Environ[str] | None) -> str | None:
    value = (os.environ if env is None else env).get(TOKEN_ENV, "").strip()
    return value or None


def _read_file(path: Path) -> str | None:
    """The token in ``path``, None when there is no file; TokenError when it is unsafe or unusable."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TokenError(f"{path} cannot be read ({exc.strerror}). Delete it; a new token is made at the next start.") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TokenError(f"{path} is not a regular file. Delete it; a new token is made at the next start.")
        if info.st_mode & 0o077:
            raise TokenError(
                f"{path} is readable by other users (mode {stat.S_IMODE(info.st_mode):04o}), so the token may be known to them. "
                "Delete the file (a new token is made at the next start, and clients need the new one), or run chmod 600 on it."
            )
        value = os.read(fd, 4096).decode("utf-8", errors="replace").strip()
    finally:
        os.close(fd)
    if len(value) < MIN_TOKEN_CHARS:
        raise TokenError(f"{path} holds no usable token. Delete it; a new one is made at the next start.")
    return value


def read_mcp_token(env: dict[str, str] | None = None) -> McpToken | None:
    """The token in use, without making one; None when there is none yet."""
    value = _from_env(env)
    if value is not None:
        return McpToken(value, "env")
    path = token_path()
    found = _read_file(path)
    return McpToken(found, "file", path) if found is not None else None


def mcp_token_values() -> list[str]:
    """Every token value there is (the variable's, the file's), read leniently: for redaction only."""
    found = [v for v in [_from_env(None)] if v]
    try:
        with open(token_path(), encoding="utf-8", errors="replace") as file:
            value = file.read(4096).strip()
    except OSError:
        value = ""
    if value and value not in found:
        found.append(value)
    return found


def ensure_mcp_token(env: dict[str, str] | None = None) -> McpToken:
    """The token in use, made (and kept in the state home) when there is none yet."""
    value = _from_env(env)
    if value is not None:
        if len(value) < MIN_TOKEN_CHARS:
            raise TokenError(
                f"{TOKEN_ENV} is too short; use at least {MIN_TOKEN_CHARS} random characters, or unset it to use {token_path()}."
            )
        return McpToken(value, "env")
    path = token_path()
    found = _read_file(path)
    if found is not None:
        return McpToken(found, "file", path)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # mkstemp makes the file 0600 before anything is written to it.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".mcp-token-")
    except OSError as exc:
        raise TokenError(
            f"cannot write the token file in {path.parent} ({exc.strerror}); fix its permissions or set {TOKEN_ENV}."
        ) from None
    created = False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(tmp, path)  # fails if another process made one meanwhile: theirs counts
            created = True
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            os.replace(tmp, path)
            created = True
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    value = _read_file(path)
    if value is None:
        raise TokenError(f"{path} vanished while it was being made; start again.")
    return McpToken(value, "file", path, created)
