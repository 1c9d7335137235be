"""What the CLI prints or exports: configured secrets (and their encodings) and credential shapes never show."""

from __future__ import annotations

import functools

__all__ = ["redact"]


@functools.cache
def _configured() -> None:
    from core.config import ConfigError, load_config

    try:
        load_config()  # registers the configured secrets with core.redaction
    except ConfigError:
        pass


def redact(text: str) -> str:
    """``text`` without the configured secret values and without credential-shaped strings."""
    from core.learning.screening import redact_secrets
    from core.redaction import scrub

    _configured()
    return redact_secrets(scrub(text))
