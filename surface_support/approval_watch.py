"""Answers given in another process reach the question waiting in this one.

A question is a row in the shared store's approvals table. Any process may answer it with
``SessionStore.resolve_approval`` (the first answer wins, atomically), but the turn that
waits holds an in-process future in its own ``ApprovalBroker``. This module closes the gap:
it polls the rows of this broker's open questions and, when one was answered elsewhere
(another editor window, ``hermes-mcp``'s ``approval_respond``, the gateway), resolves the
future with that answer.

The store records whether an answer allowed or denied and whether it was "always"; an
"always" answer becomes a rule here, where the question was asked, when the question offered it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from core.events import Decision
from core.policy.approvals import ApprovalBroker

if TYPE_CHECKING:
    from core.store import ApprovalRecord, SessionStore

__all__ = ["POLL_SECONDS", "decision_for", "settle_foreign_answers", "watch_foreign_answers"]

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0

_DECISIONS = {
    "allowed": Decision.ALLOW_ONCE,
    "denied": Decision.REJECT_ONCE,
    "cancelled": Decision.CANCELLED,
    "expired": Decision.CANCELLED,
}


def decision_for(record: ApprovalRecord) -> Decision | None:
    """The decision a stored answer stands for; None while the question is open."""
    decision = _DECISIONS.get(record.status)
    if record.always and decision is Decision.ALLOW_ONCE:
        return Decision.ALLOW_ALWAYS
    if record.always and decision is Decision.REJECT_ONCE:
        return Decision.REJECT_ALWAYS
    return decision


async def settle_foreign_answers(broker: ApprovalBroker, store: SessionStore) -> int:
    """One pass: resolve each open question of ``broker`` whose row was answered elsewhere.

    Returns how many were resolved.
    """
    settled = 0
    for request in broker.pending:
        future = request.future
        if future is None or future.done():
            continue
        record = await store.get_approval(request.id)
        decision = decision_for(record) if record is not None else None
        # Checked again after the await: an answer in this process may have landed meanwhile.
        if record is None or decision is None or future.done():
            continue
        log.info("approval %s answered by %s (%s)", request.id, record.decided_by or "another process", record.status)
        future.set_result(decision)
        settled += 1
    return settled


async def watch_foreign_answers(broker: ApprovalBroker, store: SessionStore, *, interval: float = POLL_SECONDS) -> None:
    """Poll until cancelled. The store is read only while this broker has open questions."""
    while True:
        await asyncio.sleep(interval)
        if not broker.pending:
            continue
        try:
            await settle_foreign_answers(broker, store)
        except asyncio.CancelledError:
            raise
        except Exception:  # a store hiccup must not stop the watch
            log.debug("could not poll approvals", exc_info=True)
