"""Pairing: how an unknown messaging user becomes an allowed one, with the owner's say-so.

Default deny. An unknown user who writes to the bot gets a one-time code; the owner runs
``hermes-editor pairing approve CODE`` on the machine, which adds the user's identity
(``telegram:123``, ``discord:456``: the platform's id, never a name) to the allowlist. An
identity linked to an allowed person (see ``GatewayStore.redeem_link_code``) is allowed too. Codes come from ``secrets`` (8 characters, no look-alikes such as 0/O, 1/I/L),
expire after an hour, and approvals lock for an hour after repeated wrong codes (guessing is
pointless).

Limits are per user, so that strangers cannot lock anyone out: a user holds one live code
(asking again gives the same one) and gets a new one at most every few minutes. A generous
global cap bounds a flood from many accounts, and it never refuses: the oldest waiting code
makes room, so a newcomer always gets a code, and pushing theirs out takes more fresh accounts
within the hour than the cap.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass

from core.config import Config, PlatformSettings
from core.store.gateway import GatewayStore, PairingCode, identity_of

__all__ = [
    "ALPHABET",
    "CODE_LENGTH",
    "Pairing",
    "PairingError",
    "configured_identities",
    "new_code",
]

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0 O 1 I L
CODE_LENGTH = 8
CODE_TTL = 3600.0
# Codes waiting at once, from everyone; past it the oldest is expired, never a newcomer refused.
MAX_PENDING = 1000
# A user asking again within this window gets the code they already have, not a new one.
REISSUE_AFTER = 300.0
MAX_FAILURES = 5
LOCKOUT = 3600.0


class PairingError(Exception):
    """An approval that cannot be made; the message says why."""


def new_code() -> str:
    """A fresh code from the OS's CSPRNG."""
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalise(code: str) -> str:
    return "".join(code.split()).upper().replace("-", "")


def configured_identities(config: Config) -> set[str]:
    """Who may use the bot by configuration: every platform section's ``allowed_users`` (Telegram's
    are numbers) and the owner's identities."""
    found = {f"telegram:{user}" for user in config.telegram.allowed_users}
    for name in type(config).model_fields:
        section = getattr(config, name)
        if isinstance(section, PlatformSettings):
            found.update(f"{name}:{user}" for user in section.allowed_users)
    return found | config.owner_identities()


@dataclass(frozen=True, slots=True)
class Issued:
    """What an unknown user is told: their code (None when none can be issued now) and why."""

    code: str | None
    expires_at: float | None
    reason: str = ""


class Pairing:
    """The allowlist (configured identities plus paired ones, and those linked to either) and the code lifecycle."""

    def __init__(self, store: GatewayStore, configured: Iterable[str | int] | None = None, *, max_pending: int = MAX_PENDING) -> None:
        # A bare number among the configured ids is a Telegram user id (older configuration).
        self._store = store
        self._configured = {identity_of(c) for c in configured or ()}
        self._max_pending = max_pending

    async def allowed(self, identity: str | None) -> bool:
        """Whether this identity (``discord:456``) may use the bot: it, or the person it is linked
        to, is configured or paired. Names are never consulted."""
        return await self.allowed_person(identity) is not None

    async def allowed_person(self, identity: str | None) -> str | None:
        """The person this identity belongs to (itself unless linked) when it may use the bot
        (see ``allowed``); None when it may not. One look-up serves the gate and the turn."""
        if not identity:
            return None
        person = await self._store.person_of(identity)
        for who in dict.fromkeys((identity, person)):
            if who in self._configured or await self._store.is_user_allowed(who):
                return person
        return None

    async def request(self, identity: str, chat_key: str, name: str | None, *, now: float | None = None) -> Issued:
        """Give an unknown identity a code (asked for at the place ``chat_key``): its live one if it
        has one, else a new one (at most one every few minutes per identity)."""
        now = time.time() if now is None else now
        last = await self._store.code_for_user(identity)
        if last is not None and last.status == "pending" and last.expires_at > now:
            return Issued(last.code, last.expires_at)
        if last is not None and now - last.created_at < REISSUE_AFTER:
            return Issued(None, None, "Too many pairing requests; try again in a few minutes.")
        fresh = PairingCode(new_code(), identity, chat_key, name, "pending", now, now + CODE_TTL)
        issued = await self._store.issue_code(fresh, max_pending=self._max_pending)
        return Issued(issued.code, issued.expires_at)

    async def approve(self, code: str, *, now: float | None = None) -> str:
        """Approve a code on the machine; returns the identity it admitted. Raises PairingError
        (wrong, expired, locked out)."""
        now = time.time() if now is None else now
        if await self._store.recent_failures(now - LOCKOUT) >= MAX_FAILURES:
            raise PairingError(
                f"Too many wrong codes in the last hour; pairing approvals are locked for up to {int(LOCKOUT // 60)} minutes."
            )
        found = await self._store.approve_code(normalise(code), now)
        if found is None:
            raise PairingError("No pending pairing code matches (codes expire after an hour). Ask the user to message the bot again.")
        return found.user_id

    async def pending(self, *, now: float | None = None) -> list[PairingCode]:
        return await self._store.pending_codes(time.time() if now is None else now)
