"""Session search latency on a large history (default: one million messages), beside raw FTS5.

Builds a store with the real schema (migrations, FTS5 and trigram triggers) in a temporary
folder, filled with generated messages (Zipf-distributed words, 1% Chinese), then times
``core.store.history.search`` for typical queries. The build takes a while; ``--db`` keeps it.

Reference: for each query, the plain SQLite statement that gives the same page on the same
file, run through the ``sqlite3`` module: ``MATCH``, ``bm25()`` ranking, ``snippet()`` with
our markers and size, and our page size (10); filters as joins to ``messages``/``sessions``;
the two-character CJK query as a ``LIKE`` scan. It orders by ``bm25()`` (ties by newest
rowid) rather than by FTS5's ``rank`` column: the same order, and the faster of the two here,
so the stricter reference. Ours also returns each hit's session, title, cwd, seq and role.
Both run the same number of rounds, alternating which goes first (``--rounds``, more for
queries that take under a few ms); figures are the median and the p95 (nearest rank) in ms,
and ``ratio_p95`` is ours over raw. ``same_page`` checks that both returned the same
messages in the same order.

Run: .venv/bin/python benchmarks/search_1m.py [--messages 1000000] [--db PATH] [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.store import (
    SessionStore,
    history,
)

_CJK = "数据库迁移失败检查日志配置服务器连接超时缓存内存文件权限测试通过部署版本回滚"


def _vocabulary(size: int, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size * 2)}
    common = ["the", "file", "test", "error", "function", "parser", "config", "deploy", "websocket", "migration"]
    return common + sorted(words)[: size - len(common)]


def build(path: Path, count: int, seed: int = 7) -> float:
    """Fill a new store at ``path``; returns seconds taken."""
    started = time.perf_counter()

    async def schema() -> None:
        async with SessionStore.open(path):
            pass

    asyncio.run(schema())
    rng = random.Random(seed)
    words = _vocabulary(5000, rng)
    weights = [1 / (rank + 1) for rank in range(len(words))]
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA synchronous = OFF")
    per_session = 200
    sessions = max(1, count // per_session)
    now = time.time()
    roles = ["user", "assistant", "tool_result", "assistant"]
    for s in range(sessions):
        sid = f"s{s:07d}"
        cwd = f"/home/dev/project{s % 50}"
        conn.execute(
            "INSERT INTO sessions (id, title, cwd, surface, created_at, updated_at) VALUES (?, ?, ?, 'acp', ?, ?)",
            (sid, " ".join(rng.choices(words[:200], k=4)), cwd, now - s * 600, now - s * 600),
        )
        rows = []
        for seq in range(1, per_session + 1):
            if rng.random() < 0.01:
                text = "".join(rng.choice(_CJK) for _ in range(30))
            else:
                text = " ".join(rng.choices(words, weights=weights, k=rng.randint(8, 60)))
            role = roles[seq % 4]
            content = json.dumps({"kind": "user", "parts": [{"kind": "text", "text": text}]})
            rows.append((sid, seq, role, content, text, now - s * 600 + seq))
        conn.executemany("INSERT INTO messages (session_id, seq, role, content, text, created_at) VALUES (?, ?, ?, ?, ?, ?)", rows)
        if s % 100 == 99:
            conn.commit()
    conn.commit()
    conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
    conn.commit()
    conn.close()
    return time.perf_counter() - started


# FTS5 ranking with our snippet and page size; the same statement on either index.
_RAW_FTS = (
    "SELECT rowid, snippet({t}, 0, '[', ']', '…', 12), bm25({t}) AS score FROM {t} WHERE {t} MATCH ? ORDER BY score, rowid DESC LIMIT ?"
)
_RAW_JOIN = (
    "SELECT m.id, snippet(messages_fts, 0, '[', ']', '…', 12), bm25(messages_fts) AS score"
    " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid{join}"
    " WHERE messages_fts MATCH ? AND {where} ORDER BY score, m.id DESC LIMIT ?"
)
_RAW_SCAN = "SELECT id, substr(text, 1, 160) FROM messages WHERE text LIKE ? ORDER BY id DESC LIMIT ?"
_PROJECT = "/home/dev/project7"
PAGE = 10
_BUDGET_MS = 1000.0  # ours + raw, per query

# label: (our query, our filters, raw statement, raw MATCH or LIKE argument, raw filter arguments).
# "RARE", "SESSION" and "SINCE" are filled in from the store (see _resolve).
QUERIES: dict[str, tuple[str, dict[str, str], str, str, tuple[str, ...]]] = {
    "rare word": ("RARE", {}, _RAW_FTS.format(t="messages_fts"), "RARE", ()),
    "common word": ("error", {}, _RAW_FTS.format(t="messages_fts"), "error", ()),
    "most common word": ("the", {}, _RAW_FTS.format(t="messages_fts"), "the", ()),
    "two words (AND)": ("parser websocket", {}, _RAW_FTS.format(t="messages_fts"), "parser websocket", ()),
    "phrase": ('"deploy config"', {}, _RAW_FTS.format(t="messages_fts"), '"deploy config"', ()),
    "prefix": ("migra*", {}, _RAW_FTS.format(t="messages_fts"), "migra*", ()),
    "one project": (
        "websocket",
        {"project": _PROJECT},
        _RAW_JOIN.format(join=" JOIN sessions s ON s.id = m.session_id", where="s.cwd = ?"),
        "websocket",
        (_PROJECT,),
    ),
    "one session": (
        "error",
        {"session_id": "SESSION"},
        _RAW_JOIN.format(join="", where="m.session_id = ?"),
        "error",
        ("SESSION",),
    ),
    "role + last 7 days": (
        "error",
        {"role": "user", "since": "SINCE"},
        _RAW_JOIN.format(join="", where="m.role = ? AND m.created_at >= ?"),
        "error",
        ("user", "SINCE"),
    ),
    "CJK word (trigram)": ("数据库", {}, _RAW_FTS.format(t="messages_trigram"), "数据库", ()),
    "CJK 2 chars (scan)": ("日志", {}, _RAW_SCAN, "%日志%", ()),
}


def _resolve(conn: sqlite3.Connection, rng_seed: int = 7) -> dict[str, object]:
    """Values that depend on the store: a rare word, a session in the middle, a week before the newest message."""
    rare = _vocabulary(5000, random.Random(rng_seed))[4000]
    (sessions,) = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()
    row = conn.execute("SELECT id FROM sessions ORDER BY id LIMIT 1 OFFSET ?", (sessions // 2,)).fetchone()
    (newest,) = conn.execute("SELECT MAX(created_at) FROM messages").fetchone()
    return {"RARE": rare, "SESSION": row[0] if row else "", "SINCE": (newest or 0.0) - 7 * 86400}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _matches(conn: sqlite3.Connection, sql: str, text: str) -> int | None:
    if "LIKE" in sql and "MATCH" not in sql:
        return None
    table = "messages_trigram" if "messages_trigram" in sql else "messages_fts"
    return conn.execute(f"SELECT COUNT(*) FROM {table} WHERE {table} MATCH ?", (text,)).fetchone()[0]


async def measure(path: Path, rounds: int) -> dict[str, dict[str, object]]:
    raw = sqlite3.connect(path)
    values = _resolve(raw)
    out: dict[str, dict[str, object]] = {}
    async with SessionStore.open(path) as store:
        for label, (query, filters, raw_sql, raw_text, raw_filters) in QUERIES.items():
            query = str(values.get(query, query))
            raw_text = str(values.get(raw_text, raw_text))
            kwargs = {k: values.get(v, v) for k, v in filters.items()}
            raw_args = (raw_text, *(values.get(v, v) for v in raw_filters), PAGE)

            async def ours() -> list[history.Hit]:
                return await history.search(store, query, limit=PAGE, **kwargs)

            def theirs() -> list[tuple]:
                return raw.execute(raw_sql, raw_args).fetchall()

            hits, rows = await ours(), theirs()  # warm-up, and the pages to compare
            ours_ms: list[float] = []
            raw_ms: list[float] = []
            r = 0
            # Quick queries get more rounds (up to 10x), so that their p95 is not just the
            # worst one or two samples.
            while r < rounds or (r < 10 * rounds and sum(ours_ms) + sum(raw_ms) < _BUDGET_MS):
                r += 1
                for which in ("ours", "raw") if r % 2 == 0 else ("raw", "ours"):
                    started = time.perf_counter()
                    if which == "ours":
                        await ours()
                        ours_ms.append((time.perf_counter() - started) * 1000)
                    else:
                        theirs()
                        raw_ms.append((time.perf_counter() - started) * 1000)
            ids = [row[0] for row in rows]
            keys = [raw.execute("SELECT session_id, seq FROM messages WHERE id = ?", (i,)).fetchone() for i in ids]
            out[label] = {
                "query": query,
                "filters": {k: (round(v, 1) if isinstance(v, float) else v) for k, v in kwargs.items()},
                "matches": _matches(raw, raw_sql, raw_text),
                "hits": len(hits),
                "rounds": len(ours_ms),
                "ours_p50_ms": round(statistics.median(ours_ms), 2),
                "ours_p95_ms": round(p95(ours_ms), 2),
                "raw_p50_ms": round(statistics.median(raw_ms), 2),
                "raw_p95_ms": round(p95(raw_ms), 2),
                "ratio_p95": round(p95(ours_ms) / p95(raw_ms), 2) if p95(raw_ms) else None,
                "same_page": [(h.session_id, h.seq) for h in hits] == [tuple(k) for k in keys],
            }
    raw.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--db", type=Path, help="reuse (or create) the store here")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "state.db"
        build_s = None
        if not path.exists():
            build_s = round(build(path, args.messages), 1)
        with sqlite3.connect(path) as conn:
            count = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        queries = asyncio.run(measure(path, args.rounds))
        size_mb = round(path.stat().st_size / 1e6, 1)
    ratios = [q["ratio_p95"] for q in queries.values() if q["ratio_p95"] is not None]
    print(
        json.dumps(
            {
                "benchmark": "search_1m",
                "messages": count,
                "build_s": build_s,
                "db_mb": size_mb,
                "rounds": args.rounds,
                "sqlite": sqlite3.sqlite_version,
                "page": PAGE,
                "worst_ratio_p95": max(ratios, default=None),
                "queries": queries,
            },
            indent=2,
            ensure_ascii=False,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
