"""Session search latency on a large history (default: one million messages).

Builds a store with the real schema (migrations, FTS5 and trigram triggers) in a temporary
folder, filled with generated messages (Zipf-distributed words, 1% Chinese), then times
``core.history.search`` for typical queries. The build takes a while; ``--db`` keeps it.

Run: .venv/bin/python benchmarks/search_1m.py [--messages 1000000] [--db PATH] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core import history  # noqa: E402
from core.store import SessionStore  # noqa: E402

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
        conn.executemany(
            "INSERT INTO messages (session_id, seq, role, content, text, created_at) VALUES (?, ?, ?, ?, ?, ?)", rows
        )
        if s % 100 == 99:
            conn.commit()
    conn.commit()
    conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('optimize')")
    conn.commit()
    conn.close()
    return time.perf_counter() - started


QUERIES = {
    "common word": ("error", {}),
    "two words": ("parser websocket", {}),
    "phrase": ('"deploy config"', {}),
    "prefix": ("migra*", {}),
    "rare word": (None, {}),  # filled in from the vocabulary
    "project filter": ("websocket", {"project": "/home/dev/project7"}),
    "role + date": ("error", {"role": "user", "since": "recent"}),
    "CJK (trigram)": ("迁移失败", {}),
    "CJK 2 chars (scan)": ("日志", {}),
}


async def measure(path: Path, rounds: int) -> dict[str, float]:
    rng = random.Random(7)
    rare = _vocabulary(5000, rng)[4000]
    out: dict[str, float] = {}
    async with SessionStore.open(path) as store:
        for label, (query, filters) in QUERIES.items():
            kwargs = dict(filters)
            if kwargs.get("since") == "recent":
                kwargs["since"] = time.time() - 7 * 86400
            timings = []
            for _ in range(rounds):
                started = time.perf_counter()
                await history.search(store, query or rare, limit=10, **kwargs)
                timings.append((time.perf_counter() - started) * 1000)
            out[label] = round(statistics.median(timings), 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--db", type=Path, help="reuse (or create) the store here")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "state.db"
        build_s = None
        if not path.exists():
            build_s = round(build(path, args.messages), 1)
        with sqlite3.connect(path) as conn:
            count = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        latency = asyncio.run(measure(path, args.rounds))
        size_mb = round(path.stat().st_size / 1e6, 1)
    print(json.dumps({"benchmark": "search_1m", "messages": count, "build_s": build_s, "db_mb": size_mb,
                      "median_ms": latency}, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
