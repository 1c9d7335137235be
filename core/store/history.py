"""Search over every stored conversation: a small query language, filters, and context around a hit.

Query syntax: words (all must occur), ``"exact phrases"``, and ``prefix*``. Anything else is a
word, never FTS5 syntax. Repeated terms count once; at most 16 different terms and 2,000
characters (a larger query is a ValueError that says so). Text in scripts written without spaces (CJK, Thai, …) is searched in
the trigram index (``messages_trigram``); a term shorter than three characters there falls
back to a substring scan.

Ranking: bm25 when every word of the query is in at most ``COMMON_WORD_MESSAGES`` messages,
so ranking reads at most that many entries per word; with a more common word, or a ``prefix*``
term, the newest matches first, and FTS5 stops reading as soon as the page is full (a prefix
still costs FTS5 one pass over the lists of the words it stands for).
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from core.messages import AssistantMessage, Message, ToolResultMessage, UserMessage, searchable_text
from core.store import SessionStore
from core.store.sessions import COMMON_WORD_MESSAGES, check_query_size

__all__ = ["COMMON_WORD_MESSAGES", "Hit", "ParsedQuery", "around", "describe", "parse_query", "search", "to_epoch"]

_SPACELESS = re.compile("[\u0e00-\u109f\u2e80-\ud7af\uf900-\ufaff]")
_TOKEN = re.compile(r'"([^"]*)"|(\S+)')
ROLES = ("user", "assistant", "tool_result", "summary")

_WORD = re.compile(r"[^\W_]+")


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
    check_query_size(text, [])  # the length, before a huge text is tokenised
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
    kept = set(check_query_size(text, terms))  # repeats count once; too many terms is an error
    pairs = [(t, r) for t, r in dict(zip(terms, raw)).items() if t in kept]
    return ParsedQuery(tuple(t for t, _ in pairs), tuple(r for _, r in pairs), bool(_SPACELESS.search(text)))


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
    sessions: Collection[str] | None = None,
    limit: int = 10,
    common_above: int | None = None,
) -> list[Hit]:
    """Hits with snippets, best first; ``project`` keeps sessions whose cwd is in it,
    ``session_id`` one session, ``sessions`` a set of them (both: the first, if in the set).

    Best is bm25 (``score``, higher is better) when every word of the query is in at most
    ``common_above`` messages (default :data:`COMMON_WORD_MESSAGES`); with a more common word
    or a ``prefix*`` term it is the newest (``score`` 0.0): see :func:`_too_common`."""
    parsed = parse_query(query)
    if parsed is None:
        return []
    only: tuple[str, ...] | None = None
    if session_id:
        only = (session_id,) if sessions is None or session_id in sessions else ()
    elif sessions is not None:
        only = tuple(sorted(sessions))
    if only == ():
        return []
    if role and role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    if parsed.spaceless and any(len(t) < 3 for t in parsed.raw):
        rows = await _scan(store, parsed.raw, project, since, until, role, only, limit)
    else:
        common = COMMON_WORD_MESSAGES if common_above is None else common_above
        rows = await _ranked(store, parsed, project, since, until, role, only, limit, common)
    return [
        Hit(r["session_id"], r["title"], r["cwd"], r["seq"], r["role"], " ".join(r["snippet"].split()), r["created_at"], -r["score"] or 0.0)
        for r in rows
    ]


_COLUMNS = "m.session_id, s.title, s.cwd, m.seq, m.role, m.created_at"


def _in_sessions(column: str, sessions: tuple[str, ...]) -> tuple[str, list[Any]]:
    """``column`` is one of ``sessions``: a plain equality for one, a JSON array for several."""
    if len(sessions) == 1:
        return f"{column} = ?", [sessions[0]]
    return f"{column} IN (SELECT value FROM json_each(?))", [json.dumps(sessions)]


def _filters(project: str | None, since: float | None, until: float | None, role: str | None) -> tuple[list[str], list[Any]]:
    """Conditions on ``messages m`` (the project as a set of session ids: no join per row)."""
    where: list[str] = []
    params: list[Any] = []
    if project:
        where.append("m.session_id IN (SELECT id FROM sessions WHERE cwd = ? OR cwd LIKE ? ESCAPE '\\')")
        params += [project, _like_prefix(project.rstrip("/") + "/")]
    if since is not None:
        where.append("m.created_at >= ?")
        params.append(since)
    if until is not None:
        where.append("m.created_at <= ?")
        params.append(until)
    if role:
        where.append("m.role = ?")
        params.append(role)
    return where, params


async def _ranked(
    store: SessionStore,
    parsed: ParsedQuery,
    project: str | None,
    since: float | None,
    until: float | None,
    role: str | None,
    sessions: tuple[str, ...] | None,
    limit: int,
    common: int,
) -> list[Any]:
    """The best ``limit`` matches: by bm25 (newest first among equals) when every word of the
    query is rare enough to rank, else the newest matches (see :func:`_too_common`).

    Either way the index cuts the page on its own, and only the rows of that page are joined
    to ``messages`` and ``sessions``. The page is a co-routine (CROSS JOIN fixes the join
    order), so SQLite's ORDER BY ... LIMIT skips snippet() for rows that cannot enter the page;
    a materialized subquery would build a snippet for every match. A filter on message columns
    needs the join for every row read; a session is instead a small set of message ids that
    index rows are checked against (``+rowid`` keeps it a check: as an index constraint FTS5
    would seek once per id). Newest first, FTS5 reads its lists backwards and stops as soon as
    the page is full; the ids the sessions or the project span bound where it starts and ends.
    """
    table = "messages_trigram" if parsed.spaceless else "messages_fts"
    newest = await _too_common(store, table, parsed, common)
    where, params = _filters(project, since, until, role)
    join = f" CROSS JOIN messages m ON m.id = {table}.rowid" if where else ""
    if sessions is not None:
        condition, values = _in_sessions("session_id", sessions)
        where.append(f"+{table}.rowid IN (SELECT id FROM messages WHERE {condition})")
        params += values
    if sessions is not None or project:
        lo, hi = await _span(store, sessions, project)
        if lo is None:
            return []  # no messages there
        # Bound values, not subqueries: FTS5 is then given both ends of the range.
        where.append(f"{table}.rowid BETWEEN ? AND ?")
        params += [lo, hi]
    filters = "".join(f" AND {w}" for w in where)
    score = "0.0" if newest else f"bm25({table})"
    order = f"{table}.rowid DESC" if newest else f"score, {table}.rowid DESC"
    page = (
        f"SELECT {table}.rowid AS id, {score} AS score, snippet({table}, 0, '[', ']', '…', 12) AS snippet"
        f" FROM {table}{join} WHERE {table} MATCH ?{filters} ORDER BY {order} LIMIT ?"
    )
    sql = (
        f"SELECT {_COLUMNS}, hit.snippet, hit.score FROM ({page}) AS hit CROSS JOIN messages m ON m.id = hit.id"
        " CROSS JOIN sessions s ON s.id = m.session_id ORDER BY hit.score, hit.id DESC"
    )
    return await store.select(sql, (" ".join(parsed.terms), *params, limit))


async def _too_common(store: SessionStore, table: str, parsed: ParsedQuery, common: int) -> bool:
    """Whether the query has a word too common to rank by bm25, or a ``prefix*`` term.

    A probe reads at most ``common + 1`` entries of a word's list, so it costs
    a millisecond or two however common the word. A prefix term is not probed: FTS5 merges the
    lists of every word it expands to before it can count them, so finding out costs as much
    as the search, and bm25 would then count them all again.
    """
    if any(term.endswith("*") for term in parsed.terms):
        return True
    if table == "messages_trigram":
        words = list(parsed.terms)  # each a phrase of trigrams
    else:
        words = list(dict.fromkeys(f'"{w}"' for term in parsed.raw for w in _WORD.findall(term.casefold())))
    if not words:
        return False
    return await store.any_in_more_than(table, words, common)


async def _span(store: SessionStore, sessions: tuple[str, ...] | None, project: str | None) -> tuple[int | None, int | None]:
    """The first and the last message id of the sessions given (or else of the project's): a
    seek per session in (session_id, seq), not a read of their messages."""
    first = "(SELECT id FROM messages WHERE session_id = {0} ORDER BY seq LIMIT 1)"
    last = "(SELECT id FROM messages WHERE session_id = {0} ORDER BY seq DESC LIMIT 1)"
    if sessions is not None:
        source, column, values = "json_each(?)", "value", [json.dumps(sessions)]
    else:
        assert project is not None
        source = "sessions WHERE cwd = ? OR cwd LIKE ? ESCAPE '\\'"
        column, values = "sessions.id", [project, _like_prefix(project.rstrip("/") + "/")]
    rows = await store.select(f"SELECT min({first.format(column)}), max({last.format(column)}) FROM {source}", tuple(values))
    return rows[0][0], rows[0][1]


async def _scan(
    store: SessionStore,
    words: tuple[str, ...],
    project: str | None,
    since: float | None,
    until: float | None,
    role: str | None,
    sessions: tuple[str, ...] | None,
    limit: int,
) -> list[Any]:
    """Newest messages containing every word: a substring scan for terms too short for trigrams
    (slow on a huge store, but correct)."""
    where, params = _filters(project, since, until, role)
    if sessions is not None:
        condition, values = _in_sessions("m.session_id", sessions)
        where.append(condition)
        params += values
    # A message whose text is its own is read from its JSON (``text`` is computed); the JSON
    # holds such a word as it is, so a scan of the stored column skips most rows unparsed.
    stored = "(CASE WHEN m.own_text THEN m.content ELSE m.body END)"
    conditions = [
        (f"{stored} LIKE ? ESCAPE '\\' AND m.text LIKE ? ESCAPE '\\'", [_like_any(w)] * 2)
        if _JSON_PLAIN.fullmatch(w)
        else ("m.text LIKE ? ESCAPE '\\'", [_like_any(w)])
        for w in words
    ]
    likes = " AND ".join(c for c, _ in conditions)
    sql = (
        f"SELECT {_COLUMNS}, substr(m.text, 1, 160) AS snippet, 0.0 AS score FROM messages m"
        f" JOIN sessions s ON s.id = m.session_id WHERE {likes}{''.join(f' AND {w}' for w in where)}"
        " ORDER BY m.id DESC LIMIT ?"
    )
    return await store.select(sql, (*(v for _, values in conditions for v in values), *params, limit))


# Characters that JSON writes as they are (not ", \ or a control character).
_JSON_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')


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
