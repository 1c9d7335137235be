"""Search over every stored conversation: a small query language, filters, and context around a hit.

Query syntax: words (all must occur), ``"exact phrases"``, and ``prefix*``. Anything else is a
word, never FTS5 syntax. Repeated terms count once; at most 16 different terms and 2,000
characters (a larger query is a ValueError that says so). Text in scripts written without spaces (CJK, Thai, …) is searched in
the trigram index (``messages_trigram``); a term shorter than three characters there falls
back to a substring scan.

Ranking: bm25 when every word of the query is in at most ``COMMON_WORD_MESSAGES`` messages,
so ranking reads at most that many entries per word; with a more common word the newest
matches first, and FTS5 stops reading as soon as the page is full. A ``prefix*`` counts as
one word, in as many messages as the words it stands for have together (so a prefix of a
common word, or of more than ``COMMON_WORD_MESSAGES`` words, lists the newest matches). It
is searched as those words, read from the index's vocabulary (at most ``PREFIX_WORDS``; see
:func:`_expand`), so that FTS5 reads their lists backwards and stops as for a word: given the
prefix itself, FTS5 merges the whole list of every word it stands for before it returns a row.
"""

from __future__ import annotations

import datetime
import json
import re
import sqlite3
import threading
import weakref
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from core.messages import AssistantMessage, Message, ToolResultMessage, UserMessage, searchable_text
from core.store import SessionStore
from core.store.sessions import COMMON_WORD_MESSAGES, check_query_size

__all__ = ["COMMON_WORD_MESSAGES", "PREFIX_WORDS", "Hit", "ParsedQuery", "around", "describe", "parse_query", "search", "to_epoch"]

_SPACELESS = re.compile("[\u0e00-\u109f\u2e80-\ud7af\uf900-\ufaff]")
_TOKEN = re.compile(r'"([^"]*)"|(\S+)')
ROLES = ("user", "assistant", "tool_result", "summary")

_WORD = re.compile(r"[^\W_]+")

# The most words the prefixes of one query are searched as; a query whose prefixes stand for
# more is searched as written (FTS5 merging the lists of all those words).
PREFIX_WORDS = 2_000


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
    ``common_above`` messages (default :data:`COMMON_WORD_MESSAGES`), a ``prefix*`` counting as
    one word in as many messages as the words it stands for together; with a more common word
    it is the newest (``score`` 0.0): see :func:`_plan`."""
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
    plan = await _plan(store, table, parsed, common)
    if plan is None:
        return []  # a prefix that no word of the index starts with
    newest, match = plan
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
    return await store.select(sql, (match, *params, limit))


async def _plan(store: SessionStore, table: str, parsed: ParsedQuery, common: int) -> tuple[bool, str] | None:
    """Whether to list the newest matches (a word too common to rank by bm25), and the FTS5
    query that finds them; None when a prefix stands for no word at all.

    A probe reads at most ``common + 1`` entries of a word's list, so it costs a millisecond or
    two however common the word. A ``prefix*`` counts as one word in as many messages as the
    words it stands for together: their lists are read one after the other until ``common + 1``
    entries. The newest matches of a prefix are then searched as an ``OR`` of those words,
    which FTS5 reads backwards and stops, as for any word; bm25 ranks the prefix as written
    (FTS5 merges the lists of its words: ``common`` entries at most).
    """
    written = " ".join(parsed.terms)
    prefixes = [term for term in parsed.terms if term.endswith("*")]
    if table == "messages_trigram":
        if prefixes:
            return True, written  # FTS5 merges the lists of every trigram the prefix ends with
        return await store.any_in_more_than(table, list(parsed.terms), common), written
    words: list[str] = []
    for term, raw in zip(parsed.terms, parsed.raw):
        found = _WORD.findall(raw.casefold())
        words += found[:-1] if term.endswith("*") else found  # a prefix's last word is not a word
    words = list(dict.fromkeys(f'"{w}"' for w in words))
    if not prefixes:
        return (await store.any_in_more_than(table, words, common) if words else False), written
    expanded = await _expand(store, prefixes)
    if expanded is None:
        return True, written  # as FTS5 alone answers it: merging the lists of all the words
    if not all(found for _, found in expanded.values()):
        return None
    newest = bool(words) and await store.any_in_more_than(table, words, common)
    for _, found in expanded.values():
        if newest:
            break
        rows = await store.select(
            "SELECT count(*) FROM (SELECT 1 FROM json_each(?) AS w CROSS JOIN messages_fts WHERE messages_fts MATCH w.value LIMIT ?)",
            (json.dumps([_phrase([w]) for w in found]), common + 1),
        )
        newest = rows[0][0] > common
    if not newest:
        return False, written
    groups = [
        "(" + " OR ".join(_phrase([*expanded[term][0], w]) for w in expanded[term][1]) + ")" if term in expanded else term
        for term in parsed.terms
    ]
    return True, " AND ".join(groups)


def _phrase(words: list[str]) -> str:
    return '"' + " ".join(words).replace('"', '""') + '"'


async def _expand(store: SessionStore, prefixes: list[str]) -> dict[str, tuple[list[str], list[str]]] | None:
    """For each ``prefix*`` term (an FTS5 phrase, quoted, with ``*``), the words before its last
    one, and every word of the index the last one starts; each spelled so that FTS5 reads it
    as that word. None when they are more than :data:`PREFIX_WORDS` together, or a word has
    no such spelling.

    The words come from ``messages_fts_words`` (an fts5vocab table, migration m012): a look-up
    of the first word from a point on, one per word, in one statement; each reads a page or
    two of the index, and the pages of the previous word's list it steps over. The index holds
    words as its tokenizer made them (stems: ``migration`` is ``migrat``), and FTS5 reads a
    query through the same tokenizer, so a word is spelled as itself when that gives it back,
    else with an ``e`` after it (``agre`` is how ``agreed`` is kept, and ``agre`` itself reads
    as ``agr``; ``agree`` reads as ``agre``).
    """
    tokenize = await _tokenizer(store)
    bodies = [term[1:-2].replace('""', '"') for term in prefixes]
    expanded: dict[str, tuple[list[str], list[str]]] = {}
    room = PREFIX_WORDS
    for term, tokens in zip(prefixes, tokenize(bodies)):
        if not tokens:
            return None  # nothing for FTS5 to look up either
        *head, last = tokens
        rows = await store.select(_WORDS_FROM, (last, len(last), room + 1))
        found = [row[0] for row in rows if row[0] is not None and row[0].startswith(last)]
        room -= len(found)
        if room < 0:
            return None
        spelled = _spellings(tokenize, [*head, *found])
        if spelled is None:
            return None
        expanded[term] = (spelled[: len(head)], spelled[len(head) :])
    return expanded


# The words of the index from ?1 on that start with it (?2 characters), at most ?3: each step
# looks up the first word after the previous one (NUL sorts before any character of a word).
_WORDS_FROM = (
    "SELECT term FROM (WITH RECURSIVE word(term) AS ("
    "SELECT (SELECT term FROM messages_fts_words WHERE term >= ?1 LIMIT 1)"
    " UNION ALL SELECT (SELECT term FROM messages_fts_words WHERE term >= word.term || char(0) LIMIT 1)"
    " FROM word WHERE substr(word.term, 1, ?2) = ?1 LIMIT ?3"
    ") SELECT term FROM word WHERE substr(term, 1, ?2) = ?1)"
)


def _spellings(tokenize: _Tokenizer, words: list[str]) -> list[str] | None:
    """For each word of the index, a text the tokenizer reads as that word alone."""
    spelled: list[str | None] = [w if t == [w] else None for w, t in zip(words, tokenize(words))]
    missing = [i for i, s in enumerate(spelled) if s is None]
    if missing:
        for i, tokens in zip(missing, tokenize([words[i] + "e" for i in missing])):
            spelled[i] = words[i] + "e" if tokens == [words[i]] else None
    if any(s is None for s in spelled):
        return None
    return [s for s in spelled if s is not None]


class _Tokenizer:
    """The tokens the search index makes of texts: an empty copy of ``messages_fts`` (its own
    CREATE statement, so the same tokenizer) in a connection of its own, in memory; the texts
    are indexed in a transaction that is rolled back, and read from its fts5vocab table."""

    def __init__(self, create: str) -> None:
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._conn.execute(create)
        self._conn.execute("CREATE VIRTUAL TABLE tokens USING fts5vocab(messages_fts, instance)")

    def __call__(self, texts: list[str]) -> list[list[str]]:
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                self._conn.executemany("INSERT INTO messages_fts (rowid, text) VALUES (?, ?)", enumerate(texts, 1))
                rows = self._conn.execute("SELECT doc, term FROM tokens ORDER BY doc, offset").fetchall()
            finally:
                self._conn.execute("ROLLBACK")
        out: list[list[str]] = [[] for _ in texts]
        for doc, term in rows:
            out[doc - 1].append(term)
        return out


# One tokenizer per CREATE statement, and the one of each open store (read once).
_TOKENIZERS: dict[str, _Tokenizer] = {}
_STORE_TOKENIZERS: weakref.WeakKeyDictionary[SessionStore, _Tokenizer] = weakref.WeakKeyDictionary()


async def _tokenizer(store: SessionStore) -> _Tokenizer:
    """The tokenizer of the store's search index."""
    if store not in _STORE_TOKENIZERS:
        rows = await store.select("SELECT sql FROM sqlite_master WHERE name = 'messages_fts'")
        create = rows[0][0]
        if create not in _TOKENIZERS:
            _TOKENIZERS[create] = _Tokenizer(create)
        _STORE_TOKENIZERS[store] = _TOKENIZERS[create]
    return _STORE_TOKENIZERS[store]


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
