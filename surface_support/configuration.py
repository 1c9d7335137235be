"""The configuration as a long-running surface reads it: a bad file is an error to show, not a crash."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.config import Config, ConfigError, load_config

if TYPE_CHECKING:
    from core.logs import RedactingFilter

__all__ = ["read_config"]


def read_config(redactor: RedactingFilter | None = None) -> tuple[Config | None, str | None]:
    """The configuration on disk and no error, or no configuration and the error that says what to
    fix. Its secrets join ``redactor``, so that the log never shows them."""
    try:
        config = load_config()
    except ConfigError as exc:
        return None, str(exc)
    if redactor is not None:
        redactor.add(config.secrets)
    return config, None
