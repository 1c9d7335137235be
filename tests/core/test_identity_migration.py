"""m009: a store written when every gateway user was a Telegram number and every chat "CHAT:THREAD"
is migrated to identities ("telegram:123") and place keys ("telegram:-100200:7"), every value."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from core.store import SessionStore, db
from core.store.gateway import GatewayStore
from core.store.jobs import JobStore
from core.store.migrations import MIGRATIONS, m009_platform_identities

OWNER, FRIEND, GROUP, TOPIC = 4242, 5151, -100200, 7


async def _store_at_m008(path: Path) -> None:
    """A state.db with every migration before m009 applied, and rows as the Telegram-only gateway wrote them."""
    conn = await db.connect(path)
    try:
        await conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        for fn in MIGRATIONS[: MIGRATIONS.index(m009_platform_identities)]:
            await fn(conn)
            await conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (fn.__name__, time.time()))
        rows = [
            "INSERT INTO sessions (id, cwd, surface, created_at, updated_at) VALUES ('s-dm', '/p', 'gateway', 1, 1)",
            "INSERT INTO sessions (id, cwd, surface, created_at, updated_at) VALUES ('s-topic', '/p', 'gateway', 2, 2)",
            "INSERT INTO sessions (id, cwd, surface, created_at, updated_at) VALUES ('s-cron', '/p', 'gateway', 3, 3)",
            f"INSERT INTO pairing_codes VALUES ('ABCD2345', {FRIEND}, {FRIEND}, 'Friend', 'approved', 10, 3610)",
            "INSERT INTO pairing_codes VALUES ('WXYZ2345', 9001, 9001, NULL, 'pending', 20, 99999999999)",
            f"INSERT INTO gateway_users VALUES ({FRIEND}, 'Friend', {FRIEND}, 11)",
            "INSERT INTO gateway_users VALUES (6161, NULL, NULL, 12)",
            f"INSERT INTO gateway_chats (chat_key, project, session_id, mode, updated_at, turn_user) VALUES ('{FRIEND}:0', 'app', 's-dm', 'ask', 30, {FRIEND})",
            f"INSERT INTO gateway_chats (chat_key, project, session_id, mode, updated_at, turn_user) VALUES ('{GROUP}:{TOPIC}', 'app', 's-topic', NULL, 31, NULL)",
            f"INSERT INTO gateway_sessions VALUES ('s-dm', {FRIEND}, '{FRIEND}:0', 'chat', 40)",
            f"INSERT INTO gateway_sessions VALUES ('s-topic', {OWNER}, '{GROUP}:{TOPIC}', 'chat', 41)",
            f"INSERT INTO gateway_sessions VALUES ('s-cron', {FRIEND}, NULL, 'cron', 42)",
            f"INSERT INTO gateway_remote_approvals VALUES ('ap1', {OWNER}, 777, 50)",
            "INSERT INTO gateway_remote_approvals VALUES ('ap2', 4242, NULL, 51)",
            "INSERT INTO cron_jobs (id, name, schedule, timezone, prompt, project, chat_id, thread_id, created_at, owner_id)"
            f" VALUES ('j-topic', 't', 'every 3600', 'UTC', 'p', '/p', {GROUP}, {TOPIC}, 60, {FRIEND})",
            "INSERT INTO cron_jobs (id, name, schedule, timezone, prompt, project, chat_id, thread_id, created_at, owner_id)"
            f" VALUES ('j-dm', 'd', 'every 3600', 'UTC', 'p', '/p', {OWNER}, NULL, 61, NULL)",
            "INSERT INTO cron_jobs (id, name, schedule, timezone, prompt, project, chat_id, thread_id, created_at, owner_id)"
            " VALUES ('j-none', 'n', 'every 3600', 'UTC', 'p', '/p', NULL, NULL, 62, NULL)",
            "INSERT INTO cron_runs (id, job_id, scheduled_at, status) VALUES ('r-topic', 'j-topic', 100, 'ok')",
            "INSERT INTO cron_runs (id, job_id, scheduled_at, status) VALUES ('r-dm', 'j-dm', 101, 'ok')",
            f"INSERT INTO cron_deliveries (run_id, target, status) VALUES ('r-topic', 'chat:{GROUP}', 'pending')",
            "INSERT INTO cron_deliveries (run_id, target, status) VALUES ('r-topic', 'file:/tmp/x.md', 'delivered')",
            f"INSERT INTO cron_deliveries (run_id, target, status) VALUES ('r-dm', 'chat:{OWNER}', 'delivered')",
        ]
        for sql in rows:
            await conn.execute(sql)
        await conn.commit()
    finally:
        await conn.close()


def _rows(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


async def test_m009_converts_every_stored_telegram_id_and_chat_key(tmp_path):
    path = tmp_path / "state.db"
    await _store_at_m008(path)
    async with SessionStore.open(path) as store:
        gateway, jobs = GatewayStore(store), JobStore(store)
        # Through the store's own API, the converted values read back.
        assert await gateway.users() == [(f"telegram:{FRIEND}", "Friend", 11), ("telegram:6161", None, 12)]
        assert await gateway.is_user_allowed(f"telegram:{FRIEND}") and not await gateway.is_user_allowed(str(FRIEND))
        (pending,) = await gateway.pending_codes(now=100.0)
        assert (pending.code, pending.user_id, pending.chat_key) == ("WXYZ2345", "telegram:9001", "telegram:9001:0")
        assert (await gateway.binding(f"telegram:{GROUP}:{TOPIC}")).session_id == "s-topic"
        assert (await gateway.binding(f"telegram:{FRIEND}:0")).mode == "ask"
        assert await gateway.session_chats("s-dm") == [(f"telegram:{FRIEND}:0", f"telegram:{FRIEND}")]
        assert await gateway.session_chats("s-topic") == [(f"telegram:{GROUP}:{TOPIC}", None)]
        starter = await gateway.starter("s-topic")
        assert starter is not None and (starter.user_id, starter.chat_key) == (f"telegram:{OWNER}", f"telegram:{GROUP}:{TOPIC}")
        assert [s.id for s in await gateway.sessions_started_by(f"telegram:{FRIEND}")] == ["s-cron", "s-dm"]
        # The owner's friend (not the owner) limits what a turn of their session may read.
        assert await gateway.readable_sessions("s-dm", frozenset({f"telegram:{OWNER}"})) == {"s-dm", "s-cron"}
        assert not await gateway.mark_remote_sent("ap1", f"telegram:{OWNER}:0"), "the sent question stays recorded"
        topic, dm, none = [await jobs.get_job(j) for j in ("j-topic", "j-dm", "j-none")]
        assert topic is not None and (topic.chat_key, topic.owner_id) == (f"telegram:{GROUP}:{TOPIC}", f"telegram:{FRIEND}")
        assert dm is not None and (dm.chat_key, dm.owner_id) == (f"telegram:{OWNER}:0", None)
        assert none is not None and (none.chat_key, none.owner_id) == (None, None)
        assert [j.id for j in await jobs.list_jobs(chat_key=f"telegram:{GROUP}:{TOPIC}")] == ["j-topic"]
        assert topic.controlled_by(f"telegram:{FRIEND}", frozenset({f"telegram:{OWNER}"}))
        assert not dm.controlled_by(f"telegram:{FRIEND}", frozenset({f"telegram:{OWNER}"}))
        assert [(d.target, d.status) for d in await jobs.deliveries("r-topic")] == [
            (f"chat:telegram:{GROUP}:{TOPIC}", "pending"),  # the job's topic, which the old target left implied
            ("file:/tmp/x.md", "delivered"),
        ]
        assert [d.target for d in await jobs.deliveries("r-dm")] == [f"chat:telegram:{OWNER}:0"]
    # And in the tables themselves: text, not numbers, in every identity column.
    assert _rows(path, "SELECT code, user_id, chat_key, name, status FROM pairing_codes ORDER BY code") == [
        ("ABCD2345", f"telegram:{FRIEND}", f"telegram:{FRIEND}:0", "Friend", "approved"),
        ("WXYZ2345", "telegram:9001", "telegram:9001:0", None, "pending"),
    ]
    assert _rows(path, "SELECT user_id, chat_key FROM gateway_users ORDER BY approved_at") == [
        (f"telegram:{FRIEND}", f"telegram:{FRIEND}:0"),
        ("telegram:6161", None),
    ]
    assert _rows(path, "SELECT chat_key, turn_user, typeof(turn_user) FROM gateway_chats ORDER BY updated_at") == [
        (f"telegram:{FRIEND}:0", f"telegram:{FRIEND}", "text"),
        (f"telegram:{GROUP}:{TOPIC}", None, "null"),
    ]
    assert _rows(path, "SELECT session_id, user_id, chat_key, origin FROM gateway_sessions ORDER BY created_at") == [
        ("s-dm", f"telegram:{FRIEND}", f"telegram:{FRIEND}:0", "chat"),
        ("s-topic", f"telegram:{OWNER}", f"telegram:{GROUP}:{TOPIC}", "chat"),
        ("s-cron", f"telegram:{FRIEND}", None, "cron"),
    ]
    assert _rows(path, "SELECT approval_id, chat_key, message_id, typeof(message_id) FROM gateway_remote_approvals ORDER BY sent_at") == [
        ("ap1", f"telegram:{OWNER}:0", "777", "text"),
        ("ap2", f"telegram:{OWNER}:0", None, "null"),
    ]
    assert _rows(path, "SELECT id, chat_key, owner_id, typeof(owner_id) FROM cron_jobs ORDER BY created_at") == [
        ("j-topic", f"telegram:{GROUP}:{TOPIC}", f"telegram:{FRIEND}", "text"),
        ("j-dm", f"telegram:{OWNER}:0", None, "null"),
        ("j-none", None, None, "null"),
    ]
    # Deleting a session still cascades to its starter row (the rebuilt table keeps its foreign key).
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM sessions WHERE id = 's-cron'")
    assert [r[0] for r in _rows(path, "SELECT session_id FROM gateway_sessions ORDER BY created_at")] == ["s-dm", "s-topic"]
    indexes = {r[0] for r in _rows(path, "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'")}
    assert {"pairing_codes_user", "pairing_codes_pending", "gateway_sessions_user", "gateway_links_person"} <= indexes


async def test_a_new_store_has_the_identity_tables(tmp_path):
    async with SessionStore.open(tmp_path / "state.db") as store:
        assert m009_platform_identities.__name__ in [r[0] for r in await store.select("SELECT name FROM _migrations")]
        gateway = GatewayStore(store)
        assert await gateway.person_of("discord:456") == "discord:456"
