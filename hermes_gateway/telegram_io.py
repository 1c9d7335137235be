"""Sending to Telegram: chunked, HTML first with a plain-text fallback, never silently dropped.

``fit_chunks`` splits a long text (``render.split_markdown``) so that each chunk still fits once
rendered; ``hermes_gateway.platform.send_long`` numbers and sends them. Each chunk is sent as
HTML and, when Telegram rejects the markup ("can't parse entities"), sent again as plain
text. A failure that is not about markup propagates, so callers (cron delivery) can retry.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from telegram.constants import ParseMode
from telegram.error import BadRequest, RetryAfter, TimedOut

from hermes_gateway.render import LIMIT, split_markdown, to_html

__all__ = ["Target", "edit_text", "fit_chunks", "send_text"]

log = logging.getLogger(__name__)


class Target:
    """Where to send: a chat, and a forum topic in it when there is one."""

    def __init__(self, chat_id: int, thread_id: int | None = None) -> None:
        self.chat_id = chat_id
        self.thread_id = thread_id

    def kwargs(self) -> dict[str, Any]:
        return {"chat_id": self.chat_id, "message_thread_id": self.thread_id} if self.thread_id else {"chat_id": self.chat_id}


def _markup_rejected(exc: BadRequest) -> bool:
    text = str(exc).lower()
    return "parse" in text or "entit" in text or "tag" in text


async def _retrying(call, *args: Any, **kwargs: Any) -> Any:
    """One retry after Telegram's flood control asks us to wait (bounded)."""
    try:
        return await call(*args, **kwargs)
    except RetryAfter as exc:
        wait = exc.retry_after if isinstance(exc.retry_after, (int, float)) else exc.retry_after.total_seconds()
        await asyncio.sleep(min(float(wait), 30.0))
        return await call(*args, **kwargs)


async def send_text(bot: Any, target: Target, markdown: str, *, reply_markup: Any = None) -> Any:
    """One message (``markdown`` must fit): HTML, or plain text when the markup is refused."""
    rendered = to_html(markdown)
    if len(rendered) <= LIMIT:
        try:
            return await _retrying(bot.send_message, text=rendered, parse_mode=ParseMode.HTML, reply_markup=reply_markup, **target.kwargs())
        except BadRequest as exc:
            if not _markup_rejected(exc):
                raise
            log.info("Telegram refused the HTML (%s); sending plain text", exc)
    return await _retrying(bot.send_message, text=markdown[:LIMIT], reply_markup=reply_markup, **target.kwargs())


async def edit_text(bot: Any, target: Target, message_id: int, markdown: str, *, html: bool = True, reply_markup: Any = None) -> None:
    """Replace a message's text (HTML with plain fallback); an unchanged text is not an error.

    An edit that timed out is made once more: it is idempotent (the same text again is "not
    modified"), and it is how a streamed reply's final text arrives."""
    try:
        await _edit_text(bot, target, message_id, markdown, html=html, reply_markup=reply_markup)
    except TimedOut:
        log.info("editing message %s timed out; trying once more", message_id)
        await _edit_text(bot, target, message_id, markdown, html=html, reply_markup=reply_markup)


async def _edit_text(bot: Any, target: Target, message_id: int, markdown: str, *, html: bool, reply_markup: Any) -> None:
    try:
        if html:
            rendered = to_html(markdown)
            if len(rendered) <= LIMIT:
                try:
                    await bot.edit_message_text(
                        text=rendered, chat_id=target.chat_id, message_id=message_id, parse_mode=ParseMode.HTML, reply_markup=reply_markup
                    )
                    return
                except BadRequest as exc:
                    if not _markup_rejected(exc):
                        raise
        await bot.edit_message_text(text=markdown[:LIMIT], chat_id=target.chat_id, message_id=message_id, reply_markup=reply_markup)
    except BadRequest as exc:
        if "not modified" not in str(exc).lower():
            raise


def fit_chunks(markdown: str) -> list[str]:
    """Split for the 4096 limit; a chunk whose HTML grows past it (escapes, tags) is split again,
    smaller, so it can still go as HTML rather than falling back to plain text."""
    out: list[str] = []
    todo = split_markdown(markdown)
    while todo:
        chunk = todo.pop(0)
        rendered = len(to_html(chunk)) + 16  # + the "(12/15)" label
        if rendered <= LIMIT or len(chunk) <= 512:
            out.append(chunk)
            continue
        smaller = max(512, int(len(chunk) * LIMIT / rendered) - 64)
        todo[:0] = split_markdown(chunk, limit=smaller)
    return out
