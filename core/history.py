"""Search over every stored conversation: a small query language, filters, and context around a hit.

Query syntax: words (all must occur), ``"exact phrases"``, and ``prefix*``. Anything else is a
word, never FTS5 syntax. Text in scripts written without spaces (CJK, Thai, …) is searched in
the trigram index (``messages_trigram``); a term shorter than three characters there falls
back to a substring scan.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import Any

from core.messages import AssistantMessage, Message, ToolResultMessage, UserMessage, searchable_text
from core.store import SessionStore

__all__ = ["Hit", "ParsedQuery", "around", "describe", "parse_query", "search", "to_epoch"]

_SPACELESS = re.compile("[\u0e00-\u109f\u2e80-\ud7af\uf900-\ufaff]")
_TOKEN = re.compile(r'"([^"]*)"|(\S+)')
ROLES = ("user", "assistant", "tool_result", "summary")


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    terms: tuple[str, ...]  # FTS5 phrases, already quoted (with * for a prefix)
    raw: tuple[str, ...]  # the terms as written, for the trigram path
    spaceless: bool


@dataclass(frozen=True, slots=True)
class Hit:
    session_id: str
    title: str | None
    cwd: str
    seq: int
    role: str
    snippet: str
    created_at: float
    score: float


def parse_query(text: str) -> ParsedQuery | None:
    """Words, quoted phrases and ``prefix*`` terms; None when nothing is left to search."""
    terms: list[str] = []
    raw: list[str] = []
    for phrase, word in _TOKEN.findall(text.replace("\x00", " ")):
        value = phrase if phrase else word
        prefix = bool(word) and word.endswith("*") and len(word) > 1
        value = value.rstrip("*") if prefix else value
        if not value.strip():
            continue
        raw.append(value)
        terms.append('"' + value.replace('"', '""') + '"' + ("*" if prefix else ""))
    if not terms:
        return None
    return ParsedQuery(tuple(terms), tuple(raw), bool(_SPACELESS.search(text)))


def to_epoch(day: str | None, *, end: bool = False) -> float | None:
    """``YYYY-MM-DD`` as a local timestamp (the end of that day with ``end``)."""
    if not day:
        return None
    parsed = datetime.datetime.combine(datetime.date.fromisoformat(day), datetime.time.max if end else datetime.time.min)
    return parsed.timestamp()


async def search(
    store: SessionStore,
    query: str,
    *,
    project: str | None = None,
    since: float | None = None,
    until: float | None = None,
    role: str | None = None,
    session_id: str | None = None,
    limit: int = 10,
) -> list[Hit]:
    """Ranked hits (best first) with snippets; ``project`` keeps sessions whose cwd is in it."""
    parsed = parse_query(query)
    if parsed is None:
        return []
    where: list[str] = []
    params: list[Any] = []
    if project:
        where.append("(s.cwd = ? OR s.cwd LIKE ? ESCAPE '\\')")
        params += [project, _like_prefix(project.rstrip("/") + "/")]
    if since is not None:
        where.append("m.created_at >= ?")
        params.append(since)
    if until is not None:
        where.append("m.created_at <= ?")
        params.append(until)
    if role:
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")
        where.append("m.role = ?")
        params.append(role)
    if session_id:
        where.append("m.session_id = ?")
        params.append(session_id)
    filters = "".join(f" AND {w}" for w in where)
    columns = "m.session_id, s.title, s.cwd, m.seq, m.role, m.created_at"
    if parsed.spaceless and any(len(t) < 3 for t in parsed.raw):
        # Too short for trigrams: a substring scan (slow on a huge store, but correct).
        likes = " AND ".join("m.text LIKE ? ESCAPE '\\'" for _ in parsed.raw)
        sql = (
            f"SELECT {columns}, substr(m.text, 1, 160) AS snippet, 0.0 AS rank FROM messages m"
            f" JOIN sessions s ON s.id = m.session_id WHERE {likes}{filters} ORDER BY m.id DESC LIMIT ?"
        )
        args = [_like_any(t) for t in parsed.raw] + params + [limit]
    else:
        table = "messages_trigram" if parsed.spaceless else "messages_fts"
        match = " ".join(parsed.terms)
        sql = (
            f"SELECT {columns}, snippet({table}, 0, '[', ']', '…', 12) AS snippet, bm25({table}) AS rank"
            f" FROM {table} JOIN messages m ON m.id = {table}.rowid JOIN sessions s ON s.id = m.session_id"
            f" WHERE {table} MATCH ?{filters} ORDER BY rank, m.id DESC LIMIT ?"
        )
        args = [match, *params, limit]
    rows = await store.select(sql, tuple(args))
    return [
        Hit(r["session_id"], r["title"], r["cwd"], r["seq"], r["role"], " ".join(r["snippet"].split()), r["created_at"], -r["rank"])
        for r in rows
    ]


def _like_prefix(text: str) -> str:
    return re.sub(r"([\\%_])", r"\\\1", text) + "%"


def _like_any(text: str) -> str:
    return "%" + re.sub(r"([\\%_])", r"\\\1", text) + "%"


def describe(message: Message, limit: int = 600) -> str:
    """One message as a line or two of text for a reader (tool output clipped)."""
    if isinstance(message, ToolResultMessage):
        label = f"tool {message.tool_name}"
    elif isinstance(message, AssistantMessage):
        label = "assistant"
    elif isinstance(message, UserMessage):
        label = "user"
    else:
        label = "summary"
    text = searchable_text(message).strip()
    if len(text) > limit:
        text = text[:limit] + f"… [{len(text) - limit} more characters]"
    return f"{label}: {text}"


async def around(store: SessionStore, session_id: str, seq: int, radius: int = 3) -> list[tuple[int, str]]:
    """(seq, text) for the messages around ``seq`` in a session."""
    stored = await store.messages(session_id, after_seq=max(seq - radius - 1, 0), limit=2 * radius + 1)
    return [(m.seq, describe(m.message)) for m in stored]
