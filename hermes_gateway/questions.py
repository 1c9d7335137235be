"""Approval questions in a chat, bound to the request, the place and the person who asked.

On platforms with buttons a question carries **Allow once / Allow always / Deny** (data
``ap|<approval id>|<o|a|d>``); elsewhere it lists the replies that answer it: numbers where the
channel authenticates its senders (Signal, Matrix), one-time codes printed in the question
where it does not (email). A press or reply by anyone else, or in another place, is refused;
a late one is told the question is gone; the core's broker denies on timeout.
"""

from __future__ import annotations

import logging
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.events import ApprovalRequest, Decision
from hermes_gateway.platform import Button, Place, Platform

if TYPE_CHECKING:
    from core.policy.approvals import ApprovalBroker

__all__ = ["Questions"]

log = logging.getLogger(__name__)

_CHOICES = {"o": Decision.ALLOW_ONCE, "a": Decision.ALLOW_ALWAYS, "d": Decision.REJECT_ONCE}
_SAID = {"o": "Allowed once", "a": "Always allowed", "d": "Denied"}
_LABELS = {"o": "Allow once", "a": "Allow always", "d": "Deny"}
# One-time reply codes: no 0/O, 1/I/L.
_CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
_CODE_WORD = re.compile(r"\b[2-9A-Za-z]{6}\b")


@dataclass(slots=True)
class _Asked:
    request: ApprovalRequest
    place: Place
    person: str
    message_id: str | None = None
    # Buttonless platforms: the reply that answers each choice ("1", "K7P2QX").
    replies: dict[str, str] | None = None


class Questions:
    """In-chat approval questions: buttons ``ap|<approval id>|<o|a|d>``, or replies where a
    platform has no buttons. Bound to the request, the place and the person who asked."""

    def __init__(self, platforms: dict[str, Platform], broker: ApprovalBroker) -> None:
        self._platforms = platforms
        self._broker = broker
        self._asked: dict[str, _Asked] = {}

    async def ask(self, request: ApprovalRequest, place: Place, person: str) -> None:
        platform = self._platforms[place.platform]
        lines = [f"🔐 Approval needed: {request.title}"]
        if request.reason:
            lines.append(f"Why: {request.reason}")
        if request.command:
            lines.append(f"```\n{request.command[:1500]}\n```")
        for diff in request.diffs[:3]:
            lines.append(f"Changes {diff.path}")
        choices = ["o", "a", "d"] if request.offer_always else ["o", "d"]
        buttons = [Button(_LABELS[c], f"ap|{request.id}|{c}") for c in choices]
        asked = _Asked(request, place, person)
        if not platform.limits.buttons:
            asked.replies = self._replies(place, choices, numbered=platform.limits.numbered_replies)
            lines.append("")
            lines += [f"Reply {asked.replies[c]} — {_LABELS[c]}" for c in choices]
            if not platform.limits.numbered_replies:
                lines.append("(Each code works once, for this question only.)")
        self._asked[request.id] = asked
        asked.message_id = await platform.send(place, "\n".join(lines), buttons=buttons)

    def _replies(self, place: Place, choices: list[str], *, numbered: bool) -> dict[str, str]:
        if numbered:
            # Numbers are unique among the questions open in this place.
            used = {r for a in self._asked.values() if a.place == place and a.replies for r in a.replies.values()}
            start = 1
            while any(str(n) in used for n in range(start, start + len(choices))):
                start += len(choices)
            return {c: str(start + i) for i, c in enumerate(choices)}
        return {c: "".join(secrets.choice(_CODE_ALPHABET) for _ in range(6)) for c in choices}

    def reply_for(self, place: Place, text: str) -> tuple[str, str] | None:
        """The question and choice a message answers, on a platform without buttons: the whole text
        is the number, or a word of it is a one-time code."""
        open_here = [(aid, a) for aid, a in self._asked.items() if a.place == place and a.replies]
        if not open_here:
            return None
        stripped = text.strip()
        words = {w.upper() for w in _CODE_WORD.findall(text)}
        for approval_id, asked in open_here:
            assert asked.replies is not None
            for choice, reply in asked.replies.items():
                if (reply.isdigit() and stripped == reply) or (not reply.isdigit() and reply in words):
                    return approval_id, choice
        return None

    async def answer(self, approval_id: str, choice: str, place: Place, person: str, identity: str, ack: Any) -> None:
        """A press (or reply), already past the gate; the binding is checked here. ``ack(text, alert)``
        tells the presser."""
        asked = self._asked.get(approval_id)
        future = asked.request.future if asked else None
        if asked is None or future is None or future.done():
            self._asked.pop(approval_id, None)
            await ack("This request has expired or was already answered.", True)
            return
        if person != asked.person or place.key != asked.place.key:
            log.warning("approval %s: answer by %s refused (bound to %s)", approval_id, identity, asked.person)
            await ack("Only the person who asked for this can answer it.", True)
            return
        decision = _CHOICES.get(choice)
        if decision is None or (decision is Decision.ALLOW_ALWAYS and not asked.request.offer_always):
            await ack("That choice is not offered for this request.", True)
            return
        won = await self._broker.answer(approval_id, decision, by=identity)
        self._asked.pop(approval_id, None)
        if not won:
            await ack("This request has expired or was already answered.", True)
            return
        await ack(_SAID[choice], False)
        await self._settle(asked, _SAID[choice])

    async def expire_session(self, session_id: str) -> None:
        """The turn ended: questions still shown for it can no longer be answered."""
        for approval_id, asked in list(self._asked.items()):
            if asked.request.session_id == session_id and (asked.request.future is None or asked.request.future.done()):
                self._asked.pop(approval_id, None)
                await self._settle(asked, "Expired")

    async def _settle(self, asked: _Asked, outcome: str) -> None:
        platform = self._platforms[asked.place.platform]
        if asked.message_id is None or not platform.limits.edits:
            return
        try:
            await platform.edit(asked.place, asked.message_id, f"🔐 {asked.request.title} — {outcome}")
        except Exception:
            log.debug("could not update the approval message", exc_info=True)
