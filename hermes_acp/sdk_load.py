"""Import the ACP SDK with its protocol models built on first use.

``acp.schema`` defines close to three hundred pydantic models. Importing it the plain way builds
the validator and serializer of every one of them, and reads each field's docstring back from the
source file (the SDK sets ``use_attribute_docstrings``, which only fills the descriptions of a
JSON schema, never anything on the wire): most of the SDK's import time, while a session and a
plain turn use a few dozen of those models. Loaded through :func:`load_sdk`, the models of
``acp.schema`` are created with ``defer_build`` (pydantic builds a model's schema the first time
it validates or serializes, exactly as it would have built it at import) and without the docstring
reading. Nothing else changes: every message still goes through the SDK and its models.

Models of other modules created meanwhile (in other threads too) are not affected. Should
pydantic no longer offer the hook used here, the SDK is imported the plain way.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["LAZY_MODULE", "load_sdk"]

LAZY_MODULE = "acp.schema"
_LAZY_CONFIG = {"defer_build": True, "use_attribute_docstrings": False}
_lock = threading.Lock()


def load_sdk() -> None:
    """Import ``acp.agent.connection`` (and with it ``acp.schema``), its models built lazily."""
    with _lock:
        try:
            from pydantic._internal._config import ConfigWrapper

            declared = ConfigWrapper.__dict__["for_model"]
            plain = declared.__func__
        except (ImportError, KeyError, AttributeError):
            import acp.agent.connection

            return

        def for_model(cls: Any, bases: tuple[type[Any], ...], namespace: dict[str, Any], kwargs: dict[str, Any]) -> Any:
            if namespace.get("__module__") != LAZY_MODULE:
                return plain(cls, bases, namespace, kwargs)
            # Class keywords weigh most in a model's config. pydantic takes the config keys out
            # of them; the class's own keywords are treated the same way.
            merged = {**kwargs, **_LAZY_CONFIG}
            wrapper = plain(cls, bases, namespace, merged)
            for key in [k for k in kwargs if k not in merged]:
                del kwargs[key]
            return wrapper

        setattr(ConfigWrapper, "for_model", classmethod(for_model))  # noqa: B010
        try:
            import acp.agent.connection  # noqa: F401
        finally:
            setattr(ConfigWrapper, "for_model", declared)  # noqa: B010
