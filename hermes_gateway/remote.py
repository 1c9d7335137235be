"""Remote approvals: an editor's question that waited too long is also sent to the owner's chat.

Off unless ``[gateway] remote_approvals_after`` and ``owner`` are set. The gateway polls the
store for pending questions older than that which are not its own, sends each once (the
``gateway_remote_approvals`` row makes "once" hold across gateways and restarts), and
answers a button press with ``SessionStore.resolve_approval``: the first answer from
anywhere wins, and the waiting ``hermes-acp``/``hermes-mcp`` notices it through
``surface_support.approval_watch``. Only an owner, in their own direct chat, can answer these.
The question goes to each configured owner identity on each running platform that can open a
direct chat.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from hermes_gateway.platform import Button, Press, split_identity

if TYPE_CHECKING:
    from core.config import Config
    from core.policy.approvals import ApprovalBroker
    from core.store import SessionStore
    from core.store.gateway import GatewayStore
    from hermes_gateway.platform import Place, Platform

__all__ = ["RemoteApprovals"]

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0


class RemoteApprovals:
    """Forward stale questions of other surfaces to the owner; apply the owner's answers."""

    def __init__(
        self,
        config: Config,
        brokers: list[ApprovalBroker],
        platforms: dict[str, Platform],
        owners: frozenset[str],
        store: SessionStore,
        gateway_store: GatewayStore,
    ) -> None:
        self._config = config
        self._brokers = brokers
        self._platforms = platforms
        self._owners = owners
        self._store = store
        self._gateway_store = gateway_store

    @property
    def enabled(self) -> bool:
        cfg = self._config.gateway
        return cfg.remote_approvals_after is not None and bool(self._places())

    def _places(self) -> list[Place]:
        """The owners' direct chats on the running platforms."""
        places = []
        for owner in sorted(self._owners):
            name, native = split_identity(owner)
            platform = self._platforms.get(name)
            place = platform.direct_place(native) if platform is not None else None
            if place is not None:
                places.append(place)
        return places

    async def loop(self) -> None:
        while True:
            try:
                await self.pass_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("remote approvals pass failed")
            await asyncio.sleep(POLL_SECONDS)

    async def pass_once(self) -> int:
        """Send each question old enough (and not yet sent); returns how many were sent."""
        cfg = self._config.gateway
        if not self.enabled:
            return 0
        assert cfg.remote_approvals_after is not None
        now = time.time()
        own = {r.id for broker in self._brokers for r in broker.pending}
        sent = 0
        for row in await self._store.pending_approvals():
            age = now - row.created_at
            # Older than the approval timeout: its process is gone, nobody waits for it.
            if row.id in own or age < cfg.remote_approvals_after or age > self._config.approvals.timeout:
                continue
            places = self._places()
            if not await self._gateway_store.mark_remote_sent(row.id, places[0].key):
                continue
            session = await self._store.get_session(row.session_id)
            detail = row.detail or {}
            lines = [f"🔐 {session.surface if session else 'editor'} session asks: {row.title}"]
            if session is not None:
                lines.append(f"Session: {session.title or session.id[:8]} ({session.cwd})")
            if detail.get("reason"):
                lines.append(f"Why: {detail['reason']}")
            if detail.get("command"):
                lines.append(f"```\n{str(detail['command'])[:1500]}\n```")
            lines.append(f"(waiting {int(age)}s; the first answer, here or in the editor, wins)")
            buttons = [Button("Allow", f"rp|{row.id}|o")]
            if row.offers_always:
                buttons.append(Button("Always allow", f"rp|{row.id}|a"))
            buttons.append(Button("Deny", f"rp|{row.id}|d"))
            delivered = False
            for place in places:
                platform = self._platforms[place.platform]
                if not platform.limits.buttons:
                    continue  # answered by buttons only: a reply code could be read by whoever reads that inbox
                try:
                    message_id = await platform.send(place, "\n".join(lines), buttons=buttons)
                    if not delivered:
                        await self._gateway_store.set_remote_message(row.id, message_id)
                    delivered = True
                except Exception:
                    log.warning("could not send remote approval %s to the owner on %s", row.id, place.platform, exc_info=True)
            sent += delivered
        return sent

    async def press(self, press: Press, approval_id: str, choice: str) -> None:
        """An owner's answer, in their own direct chat; anyone else (or any other chat) is refused."""
        identity = press.sender.id
        person = await self._gateway_store.person_of(identity)
        owner = identity if identity in self._owners else person if person in self._owners else None
        if owner is None or not press.place.direct or press.place.chat != split_identity(identity)[1]:
            await press.answer("Only the owner can answer this, in their own chat.", True)
            return
        if choice not in ("o", "a", "d"):
            await press.answer("This button is no longer valid.", False)
            return
        allowed = choice in ("o", "a")
        always = choice == "a"
        if always:
            row = await self._store.get_approval(approval_id)
            if row is None or not row.offers_always:
                await press.answer("This action asks every time; choose Allow or Deny.", True)
                return
        won = await self._store.resolve_approval(approval_id, "allowed" if allowed else "denied", identity, always=always)
        if not won:
            row = await self._store.get_approval(approval_id)
            status = row.status if row else "gone"
            await press.answer(f"Already answered or expired ({status}).", True)
            outcome = f"already {status}"
        else:
            await press.answer(("Always allowed" if always else "Allowed") if allowed else "Denied", False)
            outcome = ("always allowed" if always else "allowed" if allowed else "denied") + f" from {press.place.platform.title()}"
        platform = self._platforms.get(press.place.platform)
        if platform is None or press.message_id is None or not platform.limits.edits:
            return
        try:
            row = await self._store.get_approval(approval_id)
            title = row.title if row is not None else "Approval"
            await platform.edit(press.place, press.message_id, f"🔐 {title} — {outcome}")
        except Exception:
            log.debug("could not update the remote approval message", exc_info=True)
