"""The chat platforms, by name: each an adapter over ``hermes_gateway.platform.Platform``.

Adapters are imported only when their section is configured, so a gateway that runs only
Telegram never imports the Discord library (start-up stays fast).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.config import Config
    from hermes_gateway.platform import Platform

__all__ = ["ADAPTERS", "build", "configured"]

# name -> "module:Class"; the config section has the same name ([discord], [slack] ...).
ADAPTERS: dict[str, str] = {
    "telegram": "hermes_gateway.platforms.telegram:TelegramPlatform",
    "discord": "hermes_gateway.platforms.discord:DiscordPlatform",
    "slack": "hermes_gateway.platforms.slack:SlackPlatform",
    "whatsapp": "hermes_gateway.platforms.whatsapp:WhatsAppPlatform",
    "signal": "hermes_gateway.platforms.signal:SignalPlatform",
    "matrix": "hermes_gateway.platforms.matrix:MatrixPlatform",
    "email": "hermes_gateway.platforms.email:EmailPlatform",
}


def configured(config: Config) -> list[str]:
    """The platforms whose sections have what they need to connect, in ``ADAPTERS`` order."""
    names = []
    for name in ADAPTERS:
        section = getattr(config, name, None)
        if name == "telegram":
            if config.telegram.token is not None:
                names.append(name)
        elif section is not None and section.configured():
            names.append(name)
    return names


def build(name: str, config: Config) -> Platform:
    """The adapter for ``name``; raises ``PlatformConfigError`` when its section is not usable."""
    module_name, _, class_name = ADAPTERS[name].partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, class_name)(config)
