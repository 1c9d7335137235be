"""Whose sessions a chat user may list, resume and act on.

The owner (``[gateway] owner``) reaches every session of the configured projects, from every
surface. Anyone else reaches only the sessions they started from a chat (and the runs of their
own cron jobs); a chat's current session is also open to the other members of the chat it was
started in (a group shares its conversation). Sessions from the editor, MCP, the machine, and
gateway sessions older than this record belong to the owner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.store.records import SessionRecord
    from hermes_gateway.app import Gateway

__all__ = ["SessionAccess", "not_yours"]


def not_yours(shown: str) -> str:
    """The refusal for a session id (as the user typed it) they may not reach."""
    return (
        f"Session {shown} is not yours: you can see and continue only the conversations you started here "
        "(the bot's owner can reach all). Nothing was changed; /sessions lists yours, /new starts one."
    )


class SessionAccess:
    """Decides, per chat user, which sessions they reach."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway

    def is_owner(self, user_id: int | None) -> bool:
        owner = self._gateway.config.gateway.owner
        return owner is not None and user_id == owner

    async def visible(self, user_id: int | None, limit: int = 10) -> list[SessionRecord]:
        """Sessions of the configured projects that ``user_id`` may resume, newest first."""
        gateway = self._gateway
        if self.is_owner(user_id):
            return await gateway.project_sessions(limit=limit)
        if user_id is None:
            return []
        mine = await gateway.gateway_store.sessions_started_by(user_id)
        return [r for r in mine if gateway.project_of(r.cwd) is not None][:limit]

    async def may_continue(self, user_id: int | None, session_id: str, chat_key: str) -> bool:
        """Whether ``user_id`` may act (a turn, /undo) on the session a chat is in."""
        if self.is_owner(user_id):
            return True
        starter = await self._gateway.gateway_store.starter(session_id)
        if starter is None or user_id is None:
            return False
        return starter.user_id == user_id or (starter.origin == "chat" and starter.chat_key == chat_key)
