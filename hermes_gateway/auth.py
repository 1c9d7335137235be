"""The authorisation gate: the first handler for every update, before any work.

Messages, edited messages, commands, button presses and group mentions all pass through
here (a ``TypeHandler`` in group -1). An update from a user id that is not on the allowlist
stops there: in a private chat the user is given a pairing code; a button press is refused;
in a group nothing happens unless the bot is addressed. Names are never consulted.

Who is checked is the update's sender (``effective_user``), never a forwarded message's
origin: an allowed user forwarding a stranger's words is the allowed user talking, and a
stranger forwarding an allowed user's message is still a stranger. In webhook mode, updates
without the secret token never reach this gate (python-telegram-bot answers them 403).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from telegram import Update
from telegram.constants import ChatType
from telegram.ext import ApplicationHandlerStop, ContextTypes

if TYPE_CHECKING:
    from hermes_gateway.parts import ChatBot
    from surface_support.pairing import Pairing

__all__ = ["Gate"]

log = logging.getLogger(__name__)


class Gate:
    """Allow or stop each update; unknown private users get a pairing code."""

    def __init__(self, pairing: Pairing, chatbot: ChatBot) -> None:
        self._pairing = pairing
        self._chatbot = chatbot

    async def __call__(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        user = update.effective_user
        user_id = user.id if user is not None else None
        if user is not None and user.is_bot:
            raise ApplicationHandlerStop
        if await self._pairing.allowed(user_id):
            return
        log.info("update from unauthorised user %s refused", user_id)
        query = update.callback_query
        if query is not None:
            await query.answer("You are not authorised to use this bot.", show_alert=True)
            raise ApplicationHandlerStop
        message = update.message
        chat = update.effective_chat
        if message is None or chat is None or user is None:
            raise ApplicationHandlerStop  # edited messages, channel posts, joins: nothing to say
        if chat.type == ChatType.PRIVATE:
            await self._offer_pairing(message, user, chat.id)
        elif self._chatbot.addressed(message):
            await message.reply_text("I only answer people I know. Message me privately to pair.")
        raise ApplicationHandlerStop

    async def _offer_pairing(self, message: Any, user: Any, chat_id: int) -> None:
        issued = await self._pairing.request(user.id, chat_id, user.full_name)
        if issued.code is None:
            await message.reply_text(f"Not authorised. {issued.reason}")
            return
        minutes = max(1, int(((issued.expires_at or time.time()) - time.time()) // 60))
        await message.reply_text(
            "I don't know you yet.\n"
            f"Your user id: {user.id}\n"
            f"Pairing code: {issued.code} (valid {minutes} min)\n\n"
            f"The bot's owner approves it on their machine with:\nhermes-editor pairing approve {issued.code}"
        )
