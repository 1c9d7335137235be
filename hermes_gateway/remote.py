"""Remote approvals: an editor's question that waited too long is also sent to the owner's chat.

Off unless ``[gateway] remote_approvals_after`` and ``owner`` are set. The gateway polls the
store for pending questions older than that which are not its own, sends each once (the
``gateway_remote_approvals`` row makes "once" hold across gateways and restarts), and
answers a button press with ``SessionStore.resolve_approval``: the first answer from
anywhere wins, and the waiting ``hermes-acp``/``hermes-mcp`` notices it through
``surface_support.approval_watch``. Only the owner, in the owner's chat, can press these buttons.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from telegram import InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import TelegramError

from hermes_gateway.telegram_io import Target, send_text

if TYPE_CHECKING:
    from core.config import Config
    from core.policy.approvals import ApprovalBroker
    from core.store import SessionStore
    from core.store.gateway import GatewayStore

__all__ = ["RemoteApprovals"]

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0


class RemoteApprovals:
    """Forward stale questions of other surfaces to the owner; apply the owner's answers."""

    def __init__(self, config: Config, brokers: list[ApprovalBroker], bot: Any, store: SessionStore, gateway_store: GatewayStore) -> None:
        self._config = config
        self._brokers = brokers
        self._bot = bot
        self._store = store
        self._gateway_store = gateway_store

    @property
    def enabled(self) -> bool:
        cfg = self._config.gateway
        return cfg.remote_approvals_after is not None and cfg.owner is not None

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
        assert cfg.owner is not None and cfg.remote_approvals_after is not None
        now = time.time()
        own = {r.id for broker in self._brokers for r in broker.pending}
        sent = 0
        for row in await self._store.pending_approvals():
            age = now - row.created_at
            # Older than the approval timeout: its process is gone, nobody waits for it.
            if row.id in own or age < cfg.remote_approvals_after or age > self._config.approvals.timeout:
                continue
            if not await self._gateway_store.mark_remote_sent(row.id, cfg.owner):
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
            buttons = [InlineKeyboardButton("Allow", callback_data=f"rp|{row.id}|o")]
            if row.offers_always:
                buttons.append(InlineKeyboardButton("Always allow", callback_data=f"rp|{row.id}|a"))
            buttons.append(InlineKeyboardButton("Deny", callback_data=f"rp|{row.id}|d"))
            keyboard = InlineKeyboardMarkup([buttons])
            try:
                message = await send_text(self._bot, Target(cfg.owner), "\n".join(lines), reply_markup=keyboard)
                await self._gateway_store.set_remote_message(row.id, message.message_id)
                sent += 1
            except TelegramError:
                log.warning("could not send remote approval %s to the owner", row.id, exc_info=True)
        return sent

    async def press(self, query: Any, approval_id: str, choice: str) -> None:
        """The owner's answer; anyone else (or any other chat) is refused."""
        owner = self._config.gateway.owner
        chat_id = query.message.chat.id if query.message else None
        if query.from_user is None or query.from_user.id != owner or chat_id != owner:
            await query.answer("Only the owner can answer this, in their own chat.", show_alert=True)
            return
        if choice not in ("o", "a", "d"):
            await query.answer("This button is no longer valid.")
            return
        allowed = choice in ("o", "a")
        always = choice == "a"
        if always:
            row = await self._store.get_approval(approval_id)
            if row is None or not row.offers_always:
                await query.answer("This action asks every time; choose Allow or Deny.", show_alert=True)
                return
        won = await self._store.resolve_approval(approval_id, "allowed" if allowed else "denied", f"telegram:{owner}", always=always)
        if not won:
            row = await self._store.get_approval(approval_id)
            status = row.status if row else "gone"
            await query.answer(f"Already answered or expired ({status}).", show_alert=True)
            outcome = f"already {status}"
        else:
            await query.answer(("Always allowed" if always else "Allowed") if allowed else "Denied")
            outcome = ("always allowed" if always else "allowed" if allowed else "denied") + " from Telegram"
        try:
            text = query.message.text if query.message and query.message.text else "Approval"
            await query.edit_message_text(f"{text.splitlines()[0]} — {outcome}")
        except TelegramError:
            pass
