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
    from core.store.gateway import GatewayStore
    from core.store.records import SessionRecord
    from hermes_gateway.parts import Projects

__all__ = ["SessionAccess", "not_yours"]


def not_yours(shown: str) -> str:
    """The refusal for a session id (as the user typed it) they may not reach."""
    return (
        f"Session {shown} is not yours: you can see and continue only the conversations you started here "
        "(the bot's owner can reach all). Nothing was changed; /sessions lists yours, /new starts one."
    )


class SessionAccess:
    """Decides, per chat person, which sessions they reach.

    ``user`` below is a person (``GatewayStore.person_of`` of the sender's identity). An owner is
    a person whose identity, or the person it is linked to, is configured as an owner: linking
    your own identity to someone else's never makes them the owner.
    """

    def __init__(self, owners: frozenset[str], projects: Projects, gateway_store: GatewayStore) -> None:
        self.owners = owners
        self._projects = projects
        self._gateway_store = gateway_store

    def is_owner(self, user: str | None) -> bool:
        return user is not None and user in self.owners

    async def owner_identity(self, identity: str) -> bool:
        """Whether the sender with this identity is an owner (directly, or linked to one)."""
        return identity in self.owners or await self._gateway_store.person_of(identity) in self.owners

    async def visible(self, user: str | None, limit: int = 10) -> list[SessionRecord]:
        """Sessions of the configured projects that ``user`` may resume, newest first."""
        if self.is_owner(user):
            return await self._projects.sessions(limit=limit)
        if user is None:
            return []
        mine = await self._gateway_store.sessions_started_by(user)
        return [r for r in mine if self._projects.project_of(r.cwd) is not None][:limit]

    async def may_continue(self, user: str | None, session_id: str, chat_key: str) -> bool:
        """Whether ``user`` may act (a turn, /undo) on the session a chat is in."""
        if self.is_owner(user):
            return True
        starter = await self._gateway_store.starter(session_id)
        if starter is None or user is None:
            return False
        return starter.user_id == user or (starter.origin == "chat" and starter.chat_key == chat_key)
