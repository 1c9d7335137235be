"""History over MCP: list, search and read the sessions of every surface, a page at a time."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from hermes_mcp.views import (
    RESULT_BUDGET,
    MessageView,
    SearchHitView,
    SearchPage,
    SessionInfo,
    SessionPage,
    SessionsPage,
    clip,
    iso,
    json_size,
)

if TYPE_CHECKING:
    from core.store import SessionRecord, SessionStore

__all__ = ["BadCursor", "list_sessions", "read_session", "search_sessions", "session_info", "transcript_markdown"]

MESSAGE_CHARS = 4_000
ARGUMENT_CHARS = 300
SNIPPET_CHARS = 400


class BadCursor(ValueError):
    """A cursor this server did not hand out."""


def _encode(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


def _decode(cursor: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(cursor.encode()).decode())
    except (ValueError, UnicodeDecodeError):
        raise BadCursor("cursor is not one this server returned; start again without it") from None


def _snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The store's snippet, around its first match, within ``limit`` (one huge token can be megabytes)."""
    if len(text) <= limit:
        return text
    start = max(text.find("[") - limit // 3, 0)
    return ("…" if start else "") + text[start : start + limit] + "…"


def session_info(record: SessionRecord) -> SessionInfo:
    return SessionInfo(
        session_id=record.id,
        title=record.title,
        cwd=record.cwd,
        surface=record.surface,
        model=record.model,
        parent_id=record.parent_id,
        created_at=iso(record.created_at),
        updated_at=iso(record.updated_at),
        tokens=record.input_tokens + record.output_tokens,
    )


async def list_sessions(store: SessionStore, *, cwd: str | None, cursor: str | None, limit: int) -> SessionsPage:
    """Sessions, most recently active first."""
    before = None
    if cursor:
        before = _decode(cursor)
        if not isinstance(before, (int, float)):
            raise BadCursor("cursor is not one this server returned; start again without it")
    records = await store.list_sessions(cwd=cwd, limit=limit + 1, before=before)
    page = records[:limit]
    next_cursor = _encode(page[-1].updated_at) if len(records) > limit and page else None
    return SessionsPage(sessions=[session_info(r) for r in page], next_cursor=next_cursor)


async def search_sessions(
    store: SessionStore, query: str, *, cwd: str | None, session_id: str | None, cursor: str | None, limit: int
) -> SearchPage:
    """Full-text search over every message, best match first; the cursor is an offset."""
    offset = 0
    if cursor:
        offset = _decode(cursor)
        if not isinstance(offset, int) or offset < 0:
            raise BadCursor("cursor is not one this server returned; start again without it")
    hits = await store.search(query, limit=offset + limit + 1, cwd=cwd, session_id=session_id)
    page = hits[offset : offset + limit]
    return SearchPage(
        hits=[
            SearchHitView(
                session_id=h.session_id,
                session_title=h.session_title,
                seq=h.seq,
                role=h.role,
                snippet=_snippet(h.snippet),
                created_at=iso(h.created_at),
            )
            for h in page
        ],
        next_cursor=_encode(offset + limit) if len(hits) > offset + limit else None,
    )


def message_view(seq: int, message: Any, limit: int = MESSAGE_CHARS) -> MessageView:
    """One stored message, its text cut at ``limit`` characters."""
    kind = message.kind
    calls: list[str] = []
    if kind == "assistant":
        for call in message.tool_calls:
            args = json.dumps(call.arguments, ensure_ascii=False)
            calls.append(f"{call.name}({clip(args, ARGUMENT_CHARS)[0]})")
    text = message.content if kind == "tool_result" else message.text
    shown, cut = clip(text or "", limit)
    return MessageView(
        seq=seq,
        role=kind,
        text=shown,
        tool_calls=calls,
        tool_name=getattr(message, "tool_name", None),
        is_error=bool(getattr(message, "is_error", False)),
        truncated=cut,
    )


async def read_session(store: SessionStore, session_id: str, *, after: int, limit: int) -> SessionPage | None:
    """A page of a session's messages, oldest first, those after message ``after`` (a ``seq``)."""
    record = await store.get_session(session_id)
    if record is None:
        return None
    stored = await store.messages(session_id, after_seq=after, limit=limit + 1)
    total = await store.message_count(session_id)
    page = SessionPage(session=session_info(record), messages=[], total_messages=total)
    for item in stored[:limit]:
        page.messages.append(message_view(item.seq, item.message))
        if json_size(page) > RESULT_BUDGET:
            page.messages.pop()
            break
    more = len(page.messages) < len(stored)
    if page.messages and more:
        page.next_after = page.messages[-1].seq
    elif not page.messages and stored:
        # One message alone is over budget: show it shorter rather than never.
        page.messages.append(message_view(stored[0].seq, stored[0].message, RESULT_BUDGET // 3))
        page.next_after = stored[0].seq if len(stored) > 1 else None
    return page


async def transcript_markdown(store: SessionStore, session_id: str, limit_chars: int = 90_000) -> str | None:
    """A session as Markdown, for the session resource (long sessions end with a pointer to session_read)."""
    record = await store.get_session(session_id)
    if record is None:
        return None
    out = [
        f"# {record.title or 'Untitled session'}",
        "",
        f"- session: `{record.id}`",
        f"- project: `{record.cwd}`",
        f"- surface: {record.surface}, model: {record.model or '?'}, updated {iso(record.updated_at)}",
        "",
    ]
    size = sum(len(x) + 1 for x in out)
    for item in await store.messages(session_id):
        view = message_view(item.seq, item.message, 2_000)
        heading = {"user": "User", "assistant": "Assistant", "tool_result": f"Tool result ({view.tool_name})", "summary": "Summary"}[
            view.role
        ]
        block = f"## {item.seq}. {heading}\n\n{view.text}\n" + "".join(f"\n- call: `{c}`" for c in view.tool_calls) + "\n"
        if size + len(block) > limit_chars:
            out.append(f"_[more messages: read on with session_read(session_id='{record.id}', after={item.seq - 1})]_")
            break
        out.append(block)
        size += len(block)
    return "\n".join(out)
