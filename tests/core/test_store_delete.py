"""Deleting, finding by prefix and counting sessions, against real SQLite files."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from core.messages import UserMessage
from core.store import SessionStore, history
from core.store.session_admin import (
    AmbiguousPrefixError,
    delete_sessions,
    find_session,
    running_sessions,
    sessions_older_than,
    stats,
)


@pytest.fixture
async def store(tmp_path: Path):
    async with SessionStore.open(tmp_path / "state.db") as store:
        yield store


def indexed(path: Path, table: str, query: str) -> list[int]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (query,))]


async def test_deleting_removes_the_text_from_both_search_indexes(store, tmp_path):
    gone = await store.create_session(cwd=tmp_path, surface="acp", session_id="aaa111")
    kept = await store.create_session(cwd=tmp_path, surface="mcp", session_id="bbb222")
    await store.append_message(gone.id, UserMessage.of("the zebrafish pipeline 東京の天気予報"))
    await store.append_message(kept.id, UserMessage.of("the zebrafish notes"))
    assert len(indexed(store.path, "messages_fts", "zebrafish")) == 2
    assert len(indexed(store.path, "messages_trigram", "天気予報")) == 1

    assert await delete_sessions(store, [gone.id]) == 1

    assert await store.get_session(gone.id) is None
    assert await store.messages(gone.id) == []
    assert [hit.session_id for hit in await store.search("zebrafish")] == [kept.id]
    assert len(indexed(store.path, "messages_fts", "zebrafish")) == 1
    assert indexed(store.path, "messages_trigram", "天気予報") == []
    assert await history.search(store, "天気予報") == []
    assert [h.session_id for h in await history.search(store, "zebrafish")] == [kept.id]


async def test_deleting_drops_approvals_and_unlinks_gateway_and_cron_rows(store, tmp_path):
    session = await store.create_session(cwd=tmp_path, surface="gateway", session_id="ccc333")
    fork = await store.create_session(cwd=tmp_path, surface="gateway", parent_id=session.id)
    with sqlite3.connect(store.path) as conn:
        now = time.time()
        conn.execute(
            "INSERT INTO approvals (id, session_id, tool_call_id, tool_name, title, created_at) VALUES ('ap1', ?, 'c', 't', 'x', ?)",
            (session.id, now),
        )
        conn.execute("INSERT INTO gateway_remote_approvals (approval_id, chat_key, sent_at) VALUES ('ap1', 'telegram:1:0', ?)", (now,))
        conn.execute("INSERT INTO gateway_chats (chat_key, session_id, updated_at) VALUES ('telegram:1:0', ?, ?)", (session.id, now))
        conn.execute(
            "INSERT INTO gateway_sessions (session_id, user_id, origin, created_at) VALUES (?, 'telegram:1', 'chat', ?)", (session.id, now)
        )

    await delete_sessions(store, [session.id])

    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM approvals").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(*) FROM gateway_remote_approvals").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(*) FROM gateway_sessions").fetchone() == (0,)
        assert conn.execute("SELECT session_id FROM gateway_chats").fetchone() == (None,)
    child = await store.get_session(fork.id)
    assert child is not None and child.parent_id is None


async def test_find_by_unique_prefix_and_ambiguous_prefix(store, tmp_path):
    for sid in ("abc123", "abd456", "xyz789"):
        await store.create_session(cwd=tmp_path, surface="acp", session_id=sid)
    found = await find_session(store, "x")
    assert found is not None and found.id == "xyz789"
    assert await find_session(store, "q") is None
    with pytest.raises(AmbiguousPrefixError) as caught:
        await find_session(store, "ab")
    assert [r.id for r in caught.value.matches] == ["abc123", "abd456"]


async def test_older_than_running_and_stats(store, tmp_path):
    old = await store.create_session(cwd=tmp_path, surface="acp", session_id="old1")
    await store.create_session(cwd=tmp_path, surface="mcp", session_id="new1")
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE sessions SET created_at = 1000, updated_at = 1000 WHERE id = 'old1'")
        conn.execute(
            "INSERT INTO cron_jobs (id, name, schedule, timezone, prompt, project, created_at) VALUES ('j1', 'j', '@daily', 'UTC', 'p', '/', 1)"
        )
        conn.execute(
            "INSERT INTO cron_runs (id, job_id, scheduled_at, status, lease_until, session_id) VALUES ('r1', 'j1', 1, 'running', ?, 'new1')",
            (time.time() + 600,),
        )
        conn.execute(
            "INSERT INTO cron_runs (id, job_id, scheduled_at, status, lease_until, session_id) VALUES ('r2', 'j1', 2, 'running', 5, 'old1')"
        )
    await store.append_message("new1", UserMessage.of("hello"))
    assert [r.id for r in await sessions_older_than(store, time.time() - 86_400)] == [old.id]
    # Only a live lease counts: r2's ran out long ago.
    assert await running_sessions(store, ["old1", "new1"]) == {"new1"}

    found = await stats(store)
    assert (found.sessions, found.messages) == (2, 1)
    assert found.by_surface == {"acp": 1, "mcp": 1}
    assert found.oldest == 1000 and found.newest is not None and found.newest > 1000
    assert found.size_bytes > 0
