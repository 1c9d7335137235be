"""Logging for every process: stderr and ``$HERMES_EDITOR_HOME/logs/<name>.log``, secrets redacted.

Called once from each entry point; never at import time, never inside constructors.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import sys
from collections.abc import Callable
from io import TextIOWrapper

from core.config import home
from core.redaction import SECRET_ENV_VARS

__all__ = ["RedactingFilter", "setup_logging"]

# Shapes of common credentials, redacted even when we were not told the value.
_KEY_SHAPES = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b)")


class RedactingFilter(logging.Filter):
    """Replaces known secret values and credential-shaped strings in every record."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        super().__init__()
        self.secrets = [s for s in (secrets or []) if s and len(s) >= 6]

    def add(self, secrets: list[str]) -> None:
        self.secrets.extend(s for s in secrets if s and len(s) >= 6 and s not in self.secrets)

    def redact(self, text: str) -> str:
        from core.redaction import scrub

        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return _KEY_SHAPES.sub("[redacted]", scrub(text))  # and every configured secret, however encoded

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.redact(message)
        if record.exc_info and record.exc_info[1] is not None:
            # Format the traceback now so that it, too, is redacted.
            text = logging.Formatter().formatException(record.exc_info)
            clean = f"{clean}\n{self.redact(text)}"
            record.exc_info = None
            record.exc_text = None
        record.msg, record.args = clean, None
        return True


class _PrivateFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log file readable by its owner only: new files 0600, an older looser one tightened."""

    _builtin_open: Callable[..., TextIOWrapper]  # open(), which FileHandler keeps for use during shutdown

    def _open(self) -> TextIOWrapper:
        stream = self._builtin_open(self.baseFilename, self.mode, encoding=self.encoding, errors=self.errors, opener=_private_opener)
        try:
            if os.fstat(stream.fileno()).st_mode & 0o077:
                os.fchmod(stream.fileno(), 0o600)
        except OSError:
            pass  # not ours to change; 'hermes-editor doctor' names it
        return stream


def _private_opener(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


def setup_logging(name: str, level: str = "info") -> RedactingFilter:
    """Send logs to stderr and to the log file; returns the filter so more secrets can be added."""
    redactor = RedactingFilter([v for k, v in os.environ.items() if k in SECRET_ENV_VARS])
    root = logging.getLogger()
    root.handlers.clear()
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(fmt)
    stderr.addFilter(redactor)
    stderr.setLevel(logging.WARNING if os.environ.get("HERMES_QUIET") else root.level)
    root.addHandler(stderr)
    try:
        logdir = home() / "logs"
        logdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        file = _PrivateFileHandler(logdir / f"{name}.log", maxBytes=5_000_000, backupCount=3, encoding="utf-8")
        file.setFormatter(fmt)
        file.addFilter(redactor)
        root.addHandler(file)
    except OSError as exc:
        root.warning("cannot write the log file under %s: %s", home() / "logs", exc)
    # Libraries that log request details (headers included) at debug level stay quiet.
    for noisy in ("httpx", "httpcore", "httpx2", "httpcore2", "openai", "anthropic", "aiosqlite"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return redactor
