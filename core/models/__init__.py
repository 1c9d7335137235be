"""Models: one protocol, two wire adapters, and the retry/fallback wrapper.

Adapters (and their provider SDKs) load on first use; importing this package stays cheap.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from core.config import Config, ConfigError, ModelRef, config_path
from core.messages import Usage
from core.models.base import (
    ErrorKind,
    Model,
    ModelError,
    ModelEvent,
    ModelRequest,
    ResponseDone,
    Retrying,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    ToolSpec,
)
from core.models.pricing import Price, price_for
from core.models.resilient import ResilientModel

if TYPE_CHECKING:
    from collections.abc import Sequence

# Both SDKs carry an optional aiohttp transport, loaded with the SDK when aiohttp is installed
# (it is, for other parts of the project), and never used here: requests go through the SDKs'
# own httpx clients. Marked absent, they are not loaded, and aiohttp with them (about 25 MB and
# a tenth of a second); each SDK then offers that transport as not installed. (None in
# sys.modules is the import system's "not installed"; typeshed types the values as modules.)
_NOT_INSTALLED: dict[str, Any] = dict.fromkeys(("openai._vendor.httpx_aiohttp", "anthropic._vendor.httpx_aiohttp"), None)
for _name, _value in _NOT_INSTALLED.items():
    sys.modules.setdefault(_name, _value)

__all__ = [
    "ErrorKind",
    "Model",
    "ModelError",
    "ModelEvent",
    "ModelRequest",
    "ResilientModel",
    "ResponseDone",
    "Retrying",
    "TextChunk",
    "ThinkingChunk",
    "ToolCallChunk",
    "ToolSpec",
    "Usage",
    "build_model",
    "build_summary_model",
    "model_for",
]


def model_for(ref: ModelRef, *, secrets: Sequence[str] = (), price: Price | None = None) -> Model:
    """The wire adapter for one configured model, chosen by its profile's ``wire``; ``price``
    (``core.models.pricing.price_for``) turns its token counts into a cost."""
    wire = ref.config.resolved_profile(ref.provider).wire
    if wire == "anthropic":
        from core.models.anthropic_messages import AnthropicModel

        return AnthropicModel(ref, secrets=secrets, price=price)
    from core.models.openai_compat import OpenAIChatModel

    return OpenAIChatModel(ref, secrets=secrets, price=price)


def build_model(config: Config) -> Model:
    """The configured model and its fallbacks, wrapped with retries (ConfigError when none is set)."""
    primary = config.model_ref()
    if primary is None:
        raise ConfigError(
            "no model is configured. Set model = \"provider:model\" in config.toml (or HERMES_MODEL), or run 'hermes-editor setup'.",
            path=config_path(),
            key="model",
        )
    refs = [primary]
    for spec in config.fallback_models:
        ref = config.model_ref(spec)
        if ref is not None:
            refs.append(ref)
    models = [model_for(ref, secrets=config.secrets, price=price_for(ref, config.pricing)) for ref in refs]
    return ResilientModel(models, config.retry)


def build_summary_model(config: Config) -> Model | None:
    """The ``[learning] summary_model`` (no fallbacks), or None when unset or unusable (logged):
    callers then use the session's model."""
    spec = config.learning.summary_model
    if not spec:
        return None
    try:
        return build_model(config.model_copy(update={"model": spec, "fallback_models": []}))
    except ConfigError as exc:
        logging.getLogger(__name__).warning("[learning] summary_model ignored: %s", exc)
        return None
