"""What the ``[matrix]`` section must say, and what the adapter keeps in the state home.

The state home holds, for a password login, the device the account logged in as (``matrix.json``:
the next start reuses it rather than adding a device per start) and, with ``encryption = true``,
nio's store of end-to-end keys (``matrix/``, private to the user).
"""

from __future__ import annotations

import re
from pathlib import Path

from core.config import MatrixConfig, home
from core.locked_json import locked_json
from hermes_gateway.platform import PlatformConfigError

__all__ = ["check_section", "crypto_store", "remember_device", "remembered_device"]


def check_section(section: MatrixConfig, *, encryption_available: bool) -> tuple[str, str]:
    """The homeserver's URL and the bot's user id; ``PlatformConfigError`` naming the key to fix."""
    url = _homeserver_url(section)
    user_id = _user_id(section)
    if section.access_token is None and section.password is None:
        raise PlatformConfigError(
            "[matrix] needs the bot's credentials: set access_token (or the MATRIX_ACCESS_TOKEN variable), or password"
        )
    if section.encryption and not encryption_available:
        raise PlatformConfigError(
            "[matrix] encryption = true needs matrix-nio's end-to-end support: install it with "
            "pip install 'matrix-nio[e2e]', or set encryption = false"
        )
    return url, user_id


def _homeserver_url(section: MatrixConfig) -> str:
    value = (section.api_base_url or section.homeserver or "").strip().rstrip("/")
    if not value:
        raise PlatformConfigError(
            '[matrix] homeserver is not set: write the homeserver\'s address, e.g. homeserver = "https://matrix.example.org"'
        )
    if "://" not in value:
        value = f"https://{value}"
    if not value.startswith(("https://", "http://")):
        raise PlatformConfigError(f"[matrix] homeserver must be an https:// address, not {value!r}")
    return value


def _user_id(section: MatrixConfig) -> str:
    value = (section.user_id or "").strip()
    if not re.fullmatch(r"@[^:\s]+:\S+", value):
        raise PlatformConfigError(
            f'[matrix] user_id must be the bot\'s full Matrix id, e.g. user_id = "@hermes:example.org" (got {value!r})'
        )
    return value


def crypto_store() -> str:
    """Where the end-to-end keys live: ``matrix/`` in the state home, private to the user."""
    path = home() / "matrix"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return str(path)


def _state_file() -> Path:
    return home() / "matrix.json"


def remembered_device(user_id: str) -> str:
    """The device this account logged in as before (a password login reuses it: no pile of devices)."""
    with locked_json(_state_file()) as state:
        return str((state.get("devices") or {}).get(user_id) or "")


def remember_device(user_id: str, device_id: str) -> None:
    with locked_json(_state_file()) as state:
        state.setdefault("devices", {})[user_id] = device_id
