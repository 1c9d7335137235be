"""Secrets are values: the configured ones are scrubbed from everything that leaves a tool.

Whatever way a key got into a text (``/proc/PID/environ``, ``ps eww``, a ``.env`` file, an
error message), the value itself is replaced before the text reaches a model, the store, a log
or an export. The values come from the configuration (``load_config`` registers them) and from
the credential variables of this process's environment.
"""

from __future__ import annotations

import base64
import os
import threading

__all__ = ["SECRET_ENV_VARS", "add_secrets", "scrub", "secret_values"]

REDACTED = "[redacted]"
_MIN_LENGTH = 8  # shorter values would scrub ordinary words
_lock = threading.Lock()
_values: set[str] = set()
_ordered: tuple[str, ...] = ()
_env_loaded = False


def _variants(secret: str) -> set[str]:
    """The value and the encodings a command would print it in (base64, hex)."""
    raw = secret.encode("utf-8", "surrogatepass")
    found = {secret, raw.hex()}
    for cut, start in ((0, 0), (1, 2), (2, 3)):  # base64 of the value at each offset in a longer text
        padded = b"\0" * cut + raw
        piece = base64.b64encode(padded).decode("ascii")[start : 4 * (len(padded) // 3)]
        if len(piece) >= 16:
            found.add(piece)
    return {v for v in found if len(v) >= _MIN_LENGTH}


def add_secrets(values: list[str] | tuple[str, ...] | set[str]) -> None:
    """Remember secret values to scrub (API keys, bot tokens, the MCP token)."""
    global _ordered
    fresh = [v for v in values if v and len(v) >= _MIN_LENGTH and v not in _values]
    if not fresh:
        return
    with _lock:
        for value in fresh:
            _values.add(value)
            _values.update(_variants(value))
        _ordered = tuple(sorted(_values, key=len, reverse=True))


# Our credentials: never in a child's environment (nor in the editor terminal's, see AcpHost).
SECRET_ENV_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "TELEGRAM_BOT_TOKEN",
    "HERMES_MCP_TOKEN",
    # chat platforms' and speech services' secrets (core.config._PLATFORM_SECRETS)
    "DISCORD_BOT_TOKEN",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "SLACK_SIGNING_SECRET",
    "WHATSAPP_ACCESS_TOKEN",
    "WHATSAPP_APP_SECRET",
    "WHATSAPP_VERIFY_TOKEN",
    "MATRIX_ACCESS_TOKEN",
    "MATRIX_PASSWORD",
    "EMAIL_PASSWORD",
    "VOICE_STT_API_KEY",
    "VOICE_TTS_API_KEY",
    # web_search backends' keys
    "BRAVE_API_KEY",
    "TAVILY_API_KEY",
    "EXA_API_KEY",
)


def _load_environment() -> None:
    global _env_loaded
    if _env_loaded:
        return
    _env_loaded = True
    add_secrets([os.environ[name] for name in SECRET_ENV_VARS if os.environ.get(name)])


def secret_values() -> tuple[str, ...]:
    """Every value scrubbed, longest first."""
    _load_environment()
    return _ordered


def scrub(text: str) -> str:
    """``text`` with every secret value (and its base64 and hex forms) replaced."""
    if not text:
        return text
    for value in secret_values():
        if value in text:
            text = text.replace(value, REDACTED)
    return text
