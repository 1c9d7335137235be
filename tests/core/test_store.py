"""The session store, against real SQLite files: no mocks, each test in its own tmp_path."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import aiosqlite
import pytest

import core.store
from core.messages import (
    AssistantMessage,
    FileDiff,
    ImagePart,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
    dump_message,
    searchable_text,
)
from core.store import SessionNotFoundError, SessionStore, db, history
from core.store.migrations import MIGRATIONS, applied_migrations, migrate
from core.store.sessions import fts_query

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def store(tmp_path: Path):
    async with SessionStore.open(tmp_path / "state.db") as store:
        yield store


def raw(path: Path) -> sqlite3.Connection:
    """A plain sqlite3 connection, to look at what the store wrote from outside it."""
    return sqlite3.connect(path, isolation_level=None)


async def scalar(conn: aiosqlite.Connection, sql: str) -> object:
    async with conn.execute(sql) as cursor:
        row = await cursor.fetchone()
    assert row is not None
    return row[0]


def assert_fts_consistent(path: Path) -> None:
    """The FTS index holds exactly the messages' rows (its docsize table lists indexed rowids)."""
    with raw(path) as conn:
        message_ids = [r[0] for r in conn.execute("SELECT id FROM messages ORDER BY id")]
        indexed_ids = [r[0] for r in conn.execute("SELECT id FROM messages_fts_docsize ORDER BY id")]
        assert indexed_ids == message_ids
        # rank=1 also compares the index with the external content table, token by token.
        conn.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# -- the package and the connection ----------------------------------------------------------


def test_exports() -> None:
    assert sorted(core.store.__all__) == [
        "ApprovalRecord",
        "ApprovalStatus",
        "RuleDecision",
        "SearchHit",
        "SessionNotFoundError",
        "SessionRecord",
        "SessionStore",
        "StoreOpenError",
        "StoredMessage",
        "Surface",
    ]
    for name in core.store.__all__:
        assert getattr(core.store, name) is not None


def test_import_does_no_io(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "HERMES_EDITOR_HOME": str(home)}
    subprocess.run([sys.executable, "-c", "import core.store"], cwd=REPO, env=env, check=True)
    assert not home.exists()


async def test_open_defaults_to_home_and_creates_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_EDITOR_HOME", str(tmp_path / "a" / "home"))
    store = await SessionStore.open()
    try:
        assert store.path == tmp_path / "a" / "home" / "state.db"
        assert store.path.exists()
    finally:
        await store.close()
    async with await SessionStore.open() as again:
        assert await again.list_sessions() == []


async def test_connection_pragmas(tmp_path: Path) -> None:
    conn = await db.connect(tmp_path / "x.db")
    try:
        names = ("journal_mode", "busy_timeout", "synchronous", "foreign_keys")
        pragmas = {name: await scalar(conn, f"PRAGMA {name}") for name in names}
    finally:
        await conn.close()
    assert pragmas == {"journal_mode": "wal", "busy_timeout": 5000, "synchronous": 1, "foreign_keys": 1}


async def test_write_rolls_back_on_error(tmp_path: Path) -> None:
    conn = await db.connect(tmp_path / "x.db")
    try:
        await conn.execute("CREATE TABLE t (x INTEGER)")

        async def fails(c: aiosqlite.Connection) -> None:
            await c.execute("INSERT INTO t VALUES (1)")
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            await db.write(conn, fails)
        assert not conn.in_transaction
        assert await scalar(conn, "SELECT COUNT(*) FROM t") == 0
    finally:
        await conn.close()


async def test_write_retries_while_another_process_holds_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    conn = await db.connect(path)
    blocker = raw(path)
    try:
        await conn.execute("CREATE TABLE t (x INTEGER)")
        # With no busy handler, the held lock surfaces as SQLITE_BUSY at once: only the retry
        # loop in db.write stands between it and the caller.
        await conn.execute("PRAGMA busy_timeout = 0")
        blocker.execute("BEGIN IMMEDIATE")
        statements: list[str] = []
        await conn.set_trace_callback(statements.append)

        async def insert(c: aiosqlite.Connection) -> None:
            await c.execute("INSERT INTO t VALUES (1)")

        write = asyncio.create_task(db.write(conn, insert))
        deadline = time.monotonic() + 10
        while statements.count("BEGIN IMMEDIATE") < 2:  # refused once, then tried again
            assert not write.done() and time.monotonic() < deadline, "the write did not retry"
            await asyncio.sleep(0.01)
        blocker.execute("COMMIT")
        await write
        await conn.set_trace_callback(None)
        assert "INSERT INTO t VALUES (1)" in statements
        assert await scalar(conn, "SELECT COUNT(*) FROM t") == 1
    finally:
        blocker.close()
        await conn.close()


async def test_migrations_are_recorded_and_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    names = [fn.__name__ for fn in MIGRATIONS]
    assert names[0] == "m001_initial"
    for _ in range(3):
        async with SessionStore.open(path) as store:
            await store.create_session(cwd="/p", surface="cli")
    conn = await db.connect(path)
    try:
        assert await applied_migrations(conn) == names
        assert await migrate(conn) == []
    finally:
        await conn.close()
    with raw(path) as plain:
        assert plain.execute("SELECT COUNT(*) FROM _migrations").fetchone()[0] == len(names)
        assert plain.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 3


async def test_a_store_from_before_m010_upgrades_and_searches_the_same(tmp_path: Path) -> None:
    """Rows written with the search text stored twice keep it; search, snippets, deletes and the
    index stay as they were, and new rows store their own text once."""
    path = tmp_path / "state.db"
    conn = await db.connect(path)
    try:

        async def before(conn: aiosqlite.Connection) -> None:
            await conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            for fn in MIGRATIONS[: [f.__name__ for f in MIGRATIONS].index("m010_search_text_stored_once")]:
                await fn(conn)
                await conn.execute("INSERT INTO _migrations VALUES (?, 0)", (fn.__name__,))
            await conn.execute("INSERT INTO sessions (id, cwd, surface, created_at, updated_at) VALUES ('old', '/p', 'acp', 1, 1)")
            for seq, message in enumerate(
                [UserMessage.of("legacy quokka sighting"), UserMessage.of("数据库迁移失败"), UserMessage(parts=[])], start=1
            ):
                await conn.execute(
                    "INSERT INTO messages (session_id, seq, role, content, text, created_at) VALUES ('old', ?, ?, ?, ?, 1)",
                    (seq, message.kind, dump_message(message), searchable_text(message)),
                )

        await db.write(conn, before)
    finally:
        await conn.close()
    async with SessionStore.open(path) as store:
        assert [h.snippet for h in await store.search("quokka")] == ["legacy [quokka] sighting"]
        assert [h.seq for h in await history.search(store, "迁移失败")] == [2]
        new = await store.create_session(cwd="/p", surface="acp")
        await store.append_message(new.id, UserMessage.of("fresh quokka"))
        assert len(await store.search("quokka")) == 2
    with raw(path) as plain:
        rows = plain.execute("SELECT session_id, own_text, body = '' FROM messages ORDER BY id").fetchall()
        assert rows == [("old", 0, 0), ("old", 0, 0), ("old", 0, 1), (new.id, 1, 1)]
    assert_fts_consistent(path)
    async with SessionStore.open(path) as store:
        assert await store.delete_session("old")
        assert [h.session_id for h in await store.search("quokka")] == [new.id]
        assert await history.search(store, "迁移失败") == []
    assert_fts_consistent(path)
    with raw(path) as plain:
        plain.execute("INSERT INTO messages_trigram (messages_trigram) VALUES ('integrity-check')")


# -- sessions -------------------------------------------------------------------------------


async def test_create_and_get_session(store: SessionStore) -> None:
    parent = await store.create_session(cwd=Path("/work/p"), surface="acp", model="openai:gpt-4.1", meta={"a": 1})
    assert len(parent.id) == 32 and parent.cwd == "/work/p"
    child = await store.create_session(cwd="/work/p", surface="gateway", parent_id=parent.id, session_id="fork", title="t")
    assert await store.get_session(parent.id) == parent
    assert await store.get_session("fork") == child
    assert child.parent_id == parent.id
    assert await store.get_session("nope") is None
    with pytest.raises(ValueError):
        await store.create_session(cwd="/p", surface="telegram")  # type: ignore[arg-type]
    with pytest.raises(sqlite3.IntegrityError):
        await store.create_session(cwd="/p", surface="acp", session_id="fork")


async def test_list_sessions_pages_by_updated_at(store: SessionStore) -> None:
    ids = []
    for i in range(7):
        record = await store.create_session(cwd="/a" if i % 2 else "/b", surface="acp" if i < 4 else "mcp")
        ids.append(record.id)
    # Distinct, known timestamps so that the order does not depend on the clock's resolution.
    with raw(store.path) as conn:
        for i, sid in enumerate(ids):
            conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (1000.0 + i, sid))

    pages, before = [], None
    while page := await store.list_sessions(limit=3, before=before):
        pages.append([s.id for s in page])
        before = page[-1].updated_at
    assert pages == [ids[6:3:-1], ids[3:0:-1], ids[0:1]]

    assert [s.id for s in await store.list_sessions(cwd="/a")] == [ids[5], ids[3], ids[1]]
    assert [s.id for s in await store.list_sessions(surface="mcp", cwd="/b")] == [ids[6], ids[4]]

    # New activity moves a session to the top.
    await store.append_message(ids[0], UserMessage.of("hi"))
    assert (await store.list_sessions(limit=1))[0].id == ids[0]


async def test_update_session(store: SessionStore) -> None:
    s = await store.create_session(cwd="/p", surface="acp", title="old", meta={"keep": 1, "drop": 2})
    await store.update_session(s.id, title="new", meta={"drop": None, "added": [1, 2]})
    got = await store.get_session(s.id)
    assert got is not None
    assert (got.title, got.model, got.meta) == ("new", None, {"keep": 1, "added": [1, 2]})
    await store.update_session(s.id, model="anthropic:claude")
    got = await store.get_session(s.id)
    assert got is not None and (got.title, got.model) == ("new", "anthropic:claude")
    with pytest.raises(SessionNotFoundError):
        await store.update_session("nope", title="x")


async def test_usage_counters(store: SessionStore) -> None:
    s = await store.create_session(cwd="/p", surface="acp")
    await store.add_usage(s.id, 100, 20)
    got = await store.get_session(s.id)
    assert got is not None and got.cost_usd is None
    await store.add_usage(s.id, 50, 5, cache_read_tokens=30, cache_write_tokens=7, cost_usd=0.25)
    await store.add_usage(s.id, 1, 1, cost_usd=0.5)
    got = await store.get_session(s.id)
    assert got is not None
    assert (got.input_tokens, got.output_tokens, got.cache_read_tokens, got.cache_write_tokens) == (151, 26, 30, 7)
    assert got.cost_usd == pytest.approx(0.75)
    with pytest.raises(SessionNotFoundError):
        await store.add_usage("nope", 1, 1)


async def test_delete_session(store: SessionStore) -> None:
    parent = await store.create_session(cwd="/p", surface="acp")
    fork = await store.create_session(cwd="/p", surface="acp", parent_id=parent.id)
    await store.append_message(parent.id, UserMessage.of("zebra"))
    await store.create_approval(session_id=parent.id, tool_call_id="c", tool_name="t", title="t", detail={})
    assert await store.delete_session(parent.id)
    assert not await store.delete_session(parent.id)
    assert await store.get_session(parent.id) is None
    assert await store.messages(parent.id) == []
    assert await store.pending_approvals() == []
    got = await store.get_session(fork.id)
    assert got is not None and got.parent_id is None


# -- messages -------------------------------------------------------------------------------

ALL_KINDS: list[Message] = [
    UserMessage(parts=[TextPart(text="please fix the parser"), ImagePart(media_type="image/png", data="aGVsbG8=")]),
    AssistantMessage(
        parts=[
            ThinkingPart(text="the tokenizer drops quotes", signature="sig=="),
            ThinkingPart(text="", redacted=True),
            TextPart(text="Reading the file first."),
            ToolCallPart(id="call_1", name="read_file", arguments={"path": "src/parser.py", "lines": [1, 40]}),
            ToolCallPart(id="call_2", name="grep", arguments={}, invalid_arguments="{not json"),
        ],
        model="openai:gpt-4.1",
    ),
    ToolResultMessage(
        tool_call_id="call_1",
        tool_name="read_file",
        content="def parse(text):\n    ...",
        diffs=[FileDiff(path="/p/src/parser.py", old_text=None, new_text="x = 1\n")],
    ),
    ToolResultMessage(tool_call_id="call_2", tool_name="grep", content="bad arguments", is_error=True),
    AssistantMessage(parts=[TextPart(text="Done, partly")], interrupted=True),
]


async def test_round_trip_every_message_kind(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    async with SessionStore.open(path) as store:
        s = await store.create_session(cwd="/p", surface="acp")
        stored = [await store.append_message(s.id, m, created_at=1000.0 + i) for i, m in enumerate(ALL_KINDS)]
    assert [m.seq for m in stored] == [1, 2, 3, 4, 5]
    async with SessionStore.open(path) as store:
        loaded = await store.messages(s.id)
    assert loaded == stored
    assert [m.message for m in loaded] == ALL_KINDS
    assert [type(m.message) for m in loaded] == [type(m) for m in ALL_KINDS]
    with raw(path) as conn:
        rows = conn.execute("SELECT role, tool_name, created_at, completed_at FROM messages ORDER BY seq").fetchall()
    assert [(r[0], r[1]) for r in rows] == [
        ("user", None),
        ("assistant", "read_file grep"),
        ("tool_result", "read_file"),
        ("tool_result", "grep"),
        ("assistant", None),
    ]
    assert all(created < completed for _, _, created, completed in rows)


async def test_seq_ordering_and_paging(store: SessionStore) -> None:
    a = await store.create_session(cwd="/p", surface="acp")
    b = await store.create_session(cwd="/p", surface="acp")
    for i in range(10):
        await store.append_message(a.id, UserMessage.of(f"a{i}"))
        if i % 2:
            await store.append_message(b.id, UserMessage.of(f"b{i}"))
    got = await store.messages(a.id)
    assert [m.seq for m in got] == list(range(1, 11))
    assert [m.message.text for m in got] == [f"a{i}" for i in range(10)]  # type: ignore[union-attr]
    assert [m.seq for m in await store.messages(b.id)] == [1, 2, 3, 4, 5]
    assert [m.seq for m in await store.messages(a.id, after_seq=4, limit=3)] == [5, 6, 7]
    # The same rows unparsed: each message's JSON as dump_message wrote it.
    assert await store.stored_messages(a.id, after_seq=4, limit=3) == [(m.seq, dump_message(m.message)) for m in got[4:7]]
    assert [seq for seq, _ in await store.stored_messages(b.id)] == [1, 2, 3, 4, 5]
    assert await store.message_count(a.id) == 10
    assert await store.message_count("nope") == 0
    with pytest.raises(SessionNotFoundError):
        await store.append_message("nope", UserMessage.of("x"))


async def test_concurrent_appends_in_one_process_get_distinct_seqs(store: SessionStore) -> None:
    s = await store.create_session(cwd="/p", surface="acp")
    stored = await asyncio.gather(*(store.append_message(s.id, UserMessage.of(str(i))) for i in range(50)))
    assert sorted(m.seq for m in stored) == list(range(1, 51))


# -- search ---------------------------------------------------------------------------------


async def test_search_finds_user_assistant_and_tool_text(store: SessionStore) -> None:
    s = await store.create_session(cwd="/proj", surface="acp", title="parser work")
    other = await store.create_session(cwd="/elsewhere", surface="cli", title="other")
    user = await store.append_message(s.id, UserMessage.of("The tokenizer crashes on quoted strings"))
    assistant = await store.append_message(
        s.id,
        AssistantMessage(
            parts=[
                TextPart(text="I will look at the lexer"),
                ToolCallPart(id="c1", name="ripgrep", arguments={"pattern": "tokenize_quoted"}),
            ]
        ),
    )
    tool = await store.append_message(
        s.id, ToolResultMessage(tool_call_id="c1", tool_name="ripgrep", content="src/lexer.py:12 def tokenize_quoted")
    )
    await store.append_message(other.id, UserMessage.of("lexer lexer lexer, all about the lexer"))

    (hit,) = await store.search("crashes")
    assert (hit.message_id, hit.session_id, hit.seq, hit.role) == (user.id, s.id, 1, "user")
    assert hit.session_title == "parser work"
    assert "[crashes]" in hit.snippet
    assert hit.created_at == user.created_at

    # Porter stemming: "crashing" finds "crashes"; the tool call's name and arguments are indexed.
    assert [h.message_id for h in await store.search("crashing tokenizer")] == [user.id]
    assert [h.message_id for h in await store.search("ripgrep", session_id=s.id)] == [assistant.id]
    (tool_hit,) = await store.search("lexer.py")
    assert (tool_hit.message_id, tool_hit.role) == (tool.id, "tool_result")

    # bm25: the message that is all about the lexer ranks first; scores are higher-is-better.
    hits = await store.search("lexer")
    assert hits[0].session_id == other.id
    assert {h.message_id for h in hits[1:]} == {assistant.id, tool.id}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert "[lexer]" in hits[0].snippet

    assert {h.session_id for h in await store.search("lexer", cwd="/proj")} == {s.id}
    assert len(await store.search("lexer", limit=1)) == 1
    assert await store.search("absent") == []


async def test_search_of_a_too_common_word_gives_the_newest_matches(store: SessionStore) -> None:
    s = await store.create_session(cwd="/proj", surface="acp", title="t")
    other = await store.create_session(cwd="/other", surface="acp", title="o")
    dense = await store.append_message(s.id, UserMessage.of("lexer lexer lexer, all about the lexer"))
    plain = [await store.append_message(sid, UserMessage.of(f"one lexer note {i}")) for i, sid in enumerate([s.id, other.id, s.id])]

    # Rare enough to rank: bm25 puts the message about the lexer first.
    ranked = await store.search("lexer")
    assert ranked[0].message_id == dense.id and ranked[0].score > 0
    # Too common (in more than two messages here): the newest first, unscored.
    newest = await store.search("lexer", common_above=2)
    assert [h.message_id for h in newest] == [m.id for m in reversed([dense, *plain])]
    assert {h.score for h in newest} == {0.0}
    # The same within one session (the session bounds the ids FTS5 reads), a project, a page.
    assert [h.message_id for h in await store.search("lexer", session_id=s.id, common_above=2)] == [plain[2].id, plain[0].id, dense.id]
    assert [h.message_id for h in await store.search("lexer", cwd="/other", common_above=2)] == [plain[1].id]
    assert [h.message_id for h in await store.search("lexer", limit=2, common_above=2)] == [plain[2].id, plain[1].id]
    # A rare second word keeps nothing else from being common: still the newest order.
    assert [h.message_id for h in await store.search("lexer note", common_above=2)] == [plain[2].id, plain[1].id, plain[0].id]
    assert await store.search("lexer", session_id="no-such-session", common_above=2) == []


async def test_search_snippet_is_short(store: SessionStore) -> None:
    s = await store.create_session(cwd="/p", surface="acp")
    words = [f"word{i}" for i in range(200)]
    words[100] = "needle"
    await store.append_message(s.id, UserMessage.of(" ".join(words)))
    (hit,) = await store.search("needle")
    assert "[needle]" in hit.snippet
    assert len(hit.snippet.replace("…", "").split()) <= 12


HOSTILE = [
    'foo-bar "x',
    "AND (",
    "OR",
    "NOT",
    "NEAR(a b)",
    '"',
    '""',
    "*",
    "foo*",
    "^start",
    "text:foo",
    "a + b",
    "{text}: x",
    ")(",
    "'; DROP TABLE messages; --",
    "\\",
    "\x00",
    "日本語 テキスト",
    "   ",
    "",
]


@pytest.mark.parametrize("query", HOSTILE)
async def test_search_sanitises_hostile_queries(store: SessionStore, query: str) -> None:
    s = await store.create_session(cwd="/p", surface="acp")
    await store.append_message(s.id, UserMessage.of('run foo-bar "x" AND ( NEAR a b text foo 日本語 テキスト'))
    hits = await store.search(query)
    assert isinstance(hits, list)
    assert await store.message_count(s.id) == 1


async def test_search_treats_operators_as_words(store: SessionStore) -> None:
    s = await store.create_session(cwd="/p", surface="acp")
    m = await store.append_message(s.id, UserMessage.of('the foo-bar "x" case AND more'))
    await store.append_message(s.id, UserMessage.of("unrelated"))
    assert [h.message_id for h in await store.search('foo-bar "x')] == [m.id]
    assert [h.message_id for h in await store.search("AND case")] == [m.id]
    assert await store.search("   ") == []
    assert fts_query("") is None
    assert fts_query('a "b') == '"a" """b"'


async def test_fts_stays_consistent_after_delete(store: SessionStore) -> None:
    keep = await store.create_session(cwd="/p", surface="acp")
    gone = await store.create_session(cwd="/p", surface="acp")
    for i in range(5):
        await store.append_message(keep.id, UserMessage.of(f"kept message {i}"))
        await store.append_message(gone.id, UserMessage.of(f"doomed message {i}"))
    assert len(await store.search("doomed")) == 5
    await store.delete_session(gone.id)
    assert await store.search("doomed") == []
    assert len(await store.search("message")) == 5
    assert_fts_consistent(store.path)


async def test_fts_stays_consistent_after_update(store: SessionStore) -> None:
    s = await store.create_session(cwd="/p", surface="acp")
    first = await store.append_message(s.id, UserMessage.of("original wording"))
    await store.append_message(s.id, UserMessage.of("second original"))
    # Nothing in the store edits messages today; a later migration or repair tool might.
    with raw(store.path) as conn:
        conn.execute("UPDATE messages SET body = 'rewritten wording', own_text = 0 WHERE id = ?", (first.id,))
    assert [h.message_id for h in await store.search("rewritten")] == [first.id]
    assert [h.message_id for h in await store.search("wording")] == [first.id]
    assert len(await store.search("original")) == 1
    assert_fts_consistent(store.path)
    # Marking a row's text as its own (the text it already has) re-indexes nothing.
    with raw(store.path) as conn:
        conn.execute("UPDATE messages SET body = 'second original', own_text = 0 WHERE seq = 2")
        conn.execute("UPDATE messages SET body = '', own_text = 1 WHERE seq = 2")
        pages = conn.execute("SELECT COUNT(*) FROM messages_fts_data").fetchone()[0]
        conn.execute("UPDATE messages SET body = '', own_text = 1 WHERE seq = 2")
        assert conn.execute("SELECT COUNT(*) FROM messages_fts_data").fetchone()[0] == pages
    assert len(await store.search("original")) == 1
    assert_fts_consistent(store.path)


async def test_search_text_is_stored_once_when_it_is_the_message_own_text(store: SessionStore) -> None:
    s = await store.create_session(cwd="/p", surface="acp")
    await store.append_message(s.id, UserMessage.of("plain words here"))
    await store.append_message(s.id, ToolResultMessage(tool_call_id="c", tool_name="run_command", content="tool output\nline two"))
    call = ToolCallPart(id="c", name="read_file", arguments={"path": "notes.txt"})
    await store.append_message(s.id, AssistantMessage(parts=[TextPart(text="reading"), call]))
    await store.append_message(s.id, UserMessage(parts=[TextPart(text="two "), TextPart(text="parts")]))
    with raw(store.path) as conn:
        rows = conn.execute("SELECT seq, own_text, body, text FROM messages ORDER BY seq").fetchall()
    assert rows == [
        (1, 1, "", "plain words here"),
        (2, 1, "", "tool output\nline two"),
        (3, 0, "reading\nread_file notes.txt", "reading\nread_file notes.txt"),
        (4, 0, "two parts", "two parts"),
    ]
    assert [h.seq for h in await store.search("notes")] == [3]
    assert [h.snippet for h in await store.search("output")] == ["tool [output]\nline two"]
    fork = await store.create_session(cwd="/p", surface="acp")
    assert await store.copy_messages(s.id, fork.id) == 4
    assert len(await store.search("plain")) == 2 and len(await store.search("parts")) == 2
    assert await store.delete_session(s.id)
    assert len(await store.search("plain")) == 1
    assert_fts_consistent(store.path)


# -- approvals ------------------------------------------------------------------------------


async def test_approval_lifecycle(store: SessionStore) -> None:
    s = await store.create_session(cwd="/p", surface="acp")
    a = await store.create_approval(
        session_id=s.id, tool_call_id="call_1", tool_name="shell", title="Run rm -rf build", detail={"command": "rm"}
    )
    b = await store.create_approval(session_id="unsaved", tool_call_id="call_2", tool_name="edit", title="Edit", detail={})
    assert a.status == "pending" and a.decided_by is None and a.decided_at is None
    assert await store.get_approval(a.id) == a
    assert [r.id for r in await store.pending_approvals()] == [a.id, b.id]
    assert [r.id for r in await store.pending_approvals(s.id)] == [a.id]

    assert await store.resolve_approval(a.id, "allowed", "acp")
    assert not await store.resolve_approval(a.id, "denied", "gateway")
    got = await store.get_approval(a.id)
    assert got is not None
    assert (got.status, got.decided_by, got.detail) == ("allowed", "acp", {"command": "rm"})
    assert got.decided_at is not None and got.decided_at >= got.created_at
    assert [r.id for r in await store.pending_approvals()] == [b.id]

    assert await store.resolve_approval(b.id, "expired", None)
    assert not await store.resolve_approval("missing", "allowed", "acp")
    assert await store.get_approval("missing") is None
    with pytest.raises(ValueError):
        await store.resolve_approval(b.id, "pending", "acp")
    with pytest.raises(ValueError):
        await store.resolve_approval(b.id, "maybe", "acp")  # type: ignore[arg-type]


async def test_approval_first_answer_wins_across_connections(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    async with SessionStore.open(path) as editor, SessionStore.open(path) as phone:
        s = await editor.create_session(cwd="/p", surface="acp")
        for i in range(25):
            a = await editor.create_approval(session_id=s.id, tool_call_id=f"c{i}", tool_name="t", title="t", detail={})
            won_editor, won_phone = await asyncio.gather(
                editor.resolve_approval(a.id, "allowed", "acp"), phone.resolve_approval(a.id, "denied", "gateway")
            )
            assert won_editor != won_phone
            got = await phone.get_approval(a.id)
            assert got is not None
            expected = ("allowed", "acp") if won_editor else ("denied", "gateway")
            assert (got.status, got.decided_by) == expected


async def test_approval_rules(store: SessionStore) -> None:
    await store.add_approval_rule("/p", "shell", "git", "allow")
    await store.add_approval_rule("/p", "edit", "*", "allow")
    await store.add_approval_rule("/q", "shell", "rm", "deny")
    await store.add_approval_rule("/p", "shell", "git", "deny")  # a later answer replaces the earlier
    assert await store.approval_rules("/p") == [("edit", "*", "allow"), ("shell", "git", "deny")]
    assert await store.approval_rules("/q") == [("shell", "rm", "deny")]
    assert await store.approval_rules("/none") == []
    with pytest.raises(ValueError):
        await store.add_approval_rule("/p", "shell", "x", "ask")  # type: ignore[arg-type]


# -- several processes ----------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from core.messages import AssistantMessage, TextPart, ToolCallPart, ToolResultMessage, UserMessage
    from core.store import SessionStore

    db_path, session_id, worker, count, barrier = sys.argv[1:6]
    worker, count, barrier = int(worker), int(count), Path(barrier)

    def message(n):
        tag = f"w{worker}n{n}"
        if n % 3 == 0:
            return UserMessage.of(f"{tag} user asks about alpha")
        if n % 3 == 1:
            return AssistantMessage(parts=[TextPart(text=f"{tag} says beta"), ToolCallPart(id=tag, name="grep")])
        return ToolResultMessage(tool_call_id=tag, tool_name="grep", content=f"{tag} gamma result")

    async def main():
        if session_id == "-":
            # Fresh database: every worker migrates at the same moment, then writes its own session.
            (barrier / f"{worker}.ready").touch()
            while not (barrier / "go").exists():
                time.sleep(0.002)
        store = await SessionStore.open(Path(db_path))
        target = session_id
        if session_id != "-":
            (barrier / f"{worker}.ready").touch()
            while not (barrier / "go").exists():
                time.sleep(0.002)
        else:
            target = (await store.create_session(cwd="/p", surface="cli", session_id=f"w{worker}")).id
        for n in range(count):
            await store.append_message(target, message(n))
            if n % 50 == 0:
                await store.add_usage(target, 1, 1)
        await store.close()

    asyncio.run(main())
    """
)


def run_workers(db_path: Path, session_id: str, count: int, barrier: Path, workers: int = 3) -> None:
    barrier.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(db_path), session_id, str(i), str(count), str(barrier)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(workers)
    ]
    try:
        deadline = time.monotonic() + 60
        while len(list(barrier.glob("*.ready"))) < workers:
            assert all(p.poll() is None for p in procs), "a worker exited before the start"
            assert time.monotonic() < deadline, "workers did not get ready"
            time.sleep(0.01)
        (barrier / "go").touch()
        outputs = [p.communicate(timeout=90) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0 and err == "", err


def test_three_processes_append_to_one_session(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    count = 300

    async def setup() -> str:
        async with SessionStore.open(path) as store:
            return (await store.create_session(cwd="/p", surface="acp")).id

    session_id = asyncio.run(setup())
    run_workers(path, session_id, count, tmp_path / "barrier")

    with raw(path) as conn:
        rows = conn.execute("SELECT seq, text FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
        assert [seq for seq, _ in rows] == list(range(1, 3 * count + 1))
        for worker in range(3):
            # Each worker's messages are all there, in the order it wrote them.
            mine = [int(text.split()[0].split("n")[1]) for _, text in rows if text.startswith(f"w{worker}n")]
            assert mine == list(range(count))
        assert conn.execute("SELECT input_tokens FROM sessions").fetchone()[0] == 3 * len(range(0, count, 50))
        fts_rows = conn.execute("SELECT COUNT(*) FROM messages_fts_docsize").fetchone()[0]
        assert fts_rows == conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 3 * count
    assert_fts_consistent(path)

    async def search() -> None:
        async with SessionStore.open(path) as store:
            assert len(await store.search("alpha", limit=1000)) == 3 * count // 3
            assert [h.seq for h in await store.search("w2n7")] != []

    asyncio.run(search())


def test_three_processes_open_a_new_database_at_once(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    run_workers(path, "-", 40, tmp_path / "barrier")
    with raw(path) as conn:
        assert conn.execute("SELECT name FROM _migrations").fetchall() == [(fn.__name__,) for fn in MIGRATIONS]
        counts = conn.execute("SELECT session_id, COUNT(*), MAX(seq) FROM messages GROUP BY session_id").fetchall()
        assert sorted(counts) == [("w0", 40, 40), ("w1", 40, 40), ("w2", 40, 40)]
    assert_fts_consistent(path)


async def test_select_is_a_public_read_only_query(store):
    session = await store.create_session(cwd="/p", surface="acp", title="T")
    await store.append_message(session.id, UserMessage.of("hello there"))
    rows = await store.select("SELECT session_id, seq FROM messages WHERE session_id = ?", (session.id,))
    assert [(r["session_id"], r["seq"]) for r in rows] == [(session.id, 1)]
    assert [r["n"] for r in await store.select("  select 2 AS n")] == [2]
    for statement in ("DELETE FROM messages", "WITH x AS (SELECT 1) DELETE FROM messages", "", "PRAGMA writable_schema = 1"):
        with pytest.raises(ValueError):
            await store.select(statement)
    assert await store.message_count(session.id) == 1
