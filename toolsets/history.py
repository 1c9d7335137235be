"""session_search: find and read past conversations in the store (every surface's)."""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, Field

from core.learning.context import project_root
from core.learning.screening import redact_secrets
from core.messages import ToolResultMessage, searchable_text
from core.store import SessionStore, history
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.registry import tool

__all__ = ["session_search"]


class SessionSearchArgs(BaseModel):
    query: str = Field("", description='words, "a phrase", prefix*')
    scope: Literal["project", "all"] = "project"
    since: str = Field("", description="YYYY-MM-DD")
    until: str = Field("", description="YYYY-MM-DD")
    role: Literal["", "user", "assistant", "tool_result"] = ""
    session_id: str = Field("", description="with seq: read around a hit")
    seq: int = 0
    offset: int = Field(0, ge=0, description="with limit: first character")
    limit: int = Field(0, ge=0, description="with session_id+seq: read that message, this many characters")
    summarize: bool = Field(False, description="also summarise the top sessions (when enabled)")


_SUMMARY_SESSIONS = 3
_SUMMARY_CHARS = 12_000  # of each session's text sent to the summary model
SUMMARY_OFF = "(Summaries are off: set [learning] search_summary = true in config.toml to allow them.)"


@tool(kind="search", read_only=True, title=lambda a: f"Search history: {a.query or a.session_id}")
async def session_search(ctx: ToolContext, args: SessionSearchArgs) -> str:
    """Search past conversations (this project by default); session_id+seq reads around a hit."""
    store = ctx.session_store()
    readable = await _readable(store, ctx)
    if args.session_id:
        if readable is not None and args.session_id not in readable:
            raise ToolError(_NOT_THEIRS.format(args.session_id))
        record = await store.get_session(args.session_id)
        if record is None:
            raise ToolError(f"No session {args.session_id!r}.")
        if args.limit:
            return redact_secrets(await _read_message(store, record.id, args))
        lines = [f"{seq}. {text}" for seq, text in await history.around(store, record.id, args.seq or 1)]
        return redact_secrets(f"Session {record.id} ({record.title or 'untitled'}):\n" + "\n".join(lines))
    if not args.query.strip():
        raise ToolError("Give a query, or session_id and seq.")
    try:
        hits = await history.search(
            store,
            args.query,
            project=str(project_root(ctx.cwd)) if args.scope == "project" else None,
            since=history.to_epoch(args.since or None),
            until=history.to_epoch(args.until or None, end=True),
            role=args.role or None,
            sessions=readable,
            limit=8,
        )
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    transcripts = await _transcripts(store, hits) if hits and args.summarize and ctx.summarize else []
    if not hits:
        return f"No past messages match {args.query!r}" + (" in this project; try scope=all." if args.scope == "project" else ".")
    lines = [
        f"- {time.strftime('%Y-%m-%d', time.localtime(h.created_at))} {h.title or 'untitled'} "
        f"(session_id {h.session_id}, seq {h.seq}, {h.role}): {h.snippet}"
        for h in hits
    ]
    if args.summarize and ctx.summarize is None:
        lines.append(SUMMARY_OFF)
    elif transcripts and ctx.summarize is not None:
        summary = await ctx.summarize(_summary_prompt(args.query, transcripts))
        lines.append("\nSummary of the top sessions:\n" + (summary or "(the model gave no summary)"))
    return redact_secrets("\n".join(lines))


async def _read_message(store: SessionStore, session_id: str, args: SessionSearchArgs) -> str:
    """Characters ``offset`` to ``offset + limit`` of one message's text (a tool's whole output
    can be read back this way after requests carried it cut)."""
    found = await store.messages(session_id, after_seq=max(args.seq - 1, 0), limit=1)
    if not found or found[0].seq != args.seq:
        raise ToolError(f"Session {session_id} has no message {args.seq}.")
    message = found[0].message
    text = message.content if isinstance(message, ToolResultMessage) else searchable_text(message)
    if args.offset > len(text) or (args.offset == len(text) and text):
        raise ToolError(f"Message {args.seq} has {len(text)} characters; offset {args.offset} is past the end.")
    end = min(args.offset + args.limit, len(text))
    what = f"{message.tool_name} output" if isinstance(message, ToolResultMessage) else message.kind
    out = f"Session {session_id}, message {args.seq} ({what}), characters {args.offset + 1}-{end} of {len(text)}:\n"
    out += text[args.offset : end]
    if end < len(text):
        out += f'\n[{len(text) - end} more characters: session_search(session_id="{session_id}", seq={args.seq}, offset={end}, limit={args.limit})]'
    return out


_NOT_THEIRS = (
    "Session {} belongs to another chat user: a chat user other than the owner can read only the sessions they "
    "started. Nothing was read; search without session_id to find theirs."
)


async def _readable(store: SessionStore, ctx: ToolContext) -> set[str] | None:
    """The sessions this call may read: None for all; limited when a chat user other than the owner can read this one."""
    from core.store.gateway import GatewayStore

    return await GatewayStore(store).readable_sessions(ctx.session_id, ctx.settings.owners)


async def _transcripts(store: SessionStore, hits: list[history.Hit]) -> list[tuple[str, str]]:
    """(session id, clipped text) of the sessions of the first hits, best first."""
    ids = list(dict.fromkeys(h.session_id for h in hits))[:_SUMMARY_SESSIONS]
    out = []
    for sid in ids:
        text = "\n".join(history.describe(m.message, 800) for m in await store.messages(sid))
        if len(text) > _SUMMARY_CHARS:
            text = text[: _SUMMARY_CHARS // 2] + "\n[…]\n" + text[-_SUMMARY_CHARS // 2 :]
        out.append((sid, text))
    return out


def _summary_prompt(query: str, transcripts: list[tuple[str, str]]) -> str:
    parts = [
        f"A coding agent searched its past conversations for {query!r}. For each session below, say in two or "
        "three sentences what was asked, what was decided or done, and what bears on the search. Name each by its id."
    ]
    parts += [f"<session id={sid}>\n{text}\n</session>" for sid, text in transcripts]
    return redact_secrets("\n\n".join(parts))
