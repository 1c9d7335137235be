"""The one list of sensitive paths: what makes something run later, and what holds secrets.

Names are compared case-insensitively (macOS and Windows file systems ignore case, so
``.GIT/hooks`` is the real ``.git/hooks`` there); callers pass paths with links resolved.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from pathlib import Path

__all__ = ["PROTECTED_NAMES", "is_protected_path", "is_secret_path", "protected_entry", "protected_reason", "within"]

# Writing these makes git, the editor, CI or the shell run code later: they ask in every mode.
PROTECTED_NAMES = frozenset({".git", ".vscode", ".idea", ".husky", ".devcontainer", ".envrc", ".gitattributes", ".gitmodules"})
_PROTECTED_PAIRS = ((".github", "workflows"),)

# Files that commonly hold credentials: always ask, whatever the mode or rules.
_SECRET_PATTERNS = (
    ".env",
    ".env.*",
    ".envrc",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_dsa*",
    "id_ed25519*",
    "id_ecdsa*",
    "*.p12",
    "*.pfx",
    "*.keystore",
    "*.jks",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".my.cnf",
    ".htpasswd",
    ".git-credentials",
    "credentials*",
    "*secret*",
    ".vault-token",
    ".boto",
    ".s3cfg",
)
_NOT_SECRETS = {".env.example", ".env.sample", ".env.template", ".env.dist"}
# Directories that hold credentials or the repository itself (hooks run code; config can hold tokens).
_SECRET_DIRS = {".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", "gcloud", ".git", ".password-store", "keyrings"}
_SECRET_PAIRS = ((".config", "gh"), (".config", "hub"), (".config", "op"), (".cargo", "credentials"), (".cargo", "credentials.toml"))


def within(path: Path, roots: Iterable[Path]) -> bool:
    """True when ``path`` (already resolved) is one of ``roots`` (resolved) or lies under one."""
    return any(path == root or root in path.parents for root in roots)


def _lower_parts(path: Path) -> list[str]:
    return [part.lower() for part in path.parts]


def _has_pair(parts: list[str], pairs: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    for first, second in pairs:
        for i in range(len(parts) - 1):
            if parts[i] == first and parts[i + 1] == second:
                return first, second
    return None


def protected_reason(path: Path) -> str | None:
    """Why writing ``path`` would make something run later, or None."""
    parts = _lower_parts(path)
    for part in parts:
        if part in PROTECTED_NAMES:
            return f"{path} is under {part}, which git, the editor or the shell runs code from"
    if pair := _has_pair(parts, _PROTECTED_PAIRS):
        return f"{path} is a CI workflow ({'/'.join(pair)}), which runs code on the next push"
    return None


def protected_entry(path: Path) -> Path | None:
    """The outermost protected folder or file that holds ``path`` (``.git`` for ``.git/hooks/x``,
    ``.github/workflows`` for a workflow): what a grant to write it must open."""
    parts = path.parts
    for i, part in enumerate(parts):
        low = part.lower()
        if low in PROTECTED_NAMES:
            return Path(*parts[: i + 1])
        if i + 1 < len(parts) and (low, parts[i + 1].lower()) in _PROTECTED_PAIRS:
            return Path(*parts[: i + 2])
    return None


def is_protected_path(path: Path) -> bool:
    """True for paths whose contents make something run later (``.git/``, ``.vscode/`` ...)."""
    return protected_reason(path) is not None


def is_secret_path(path: Path) -> bool:
    """True for files that commonly hold credentials (.env, keys, ~/.ssh, .git internals ...)."""
    parts = _lower_parts(path)
    if any(part in _SECRET_DIRS for part in parts) or _has_pair(parts, _SECRET_PAIRS):
        return True
    name = path.name.lower()
    return any(fnmatch.fnmatch(name, pattern) for pattern in _SECRET_PATTERNS) and name not in _NOT_SECRETS
