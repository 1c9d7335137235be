"""History search ranking: bm25 while every word is rare enough, the newest matches otherwise.

The cut-off is lowered (``common_above``) so that a few messages make a word "common"; every
filter is checked against the messages the test wrote, in the newest-first mode where the
page is cut inside FTS5 with a range of message ids.
"""

from __future__ import annotations

import sqlite3
import time

import pytest

from core.messages import UserMessage
from core.store import SessionStore, history


@pytest.fixture
async def store(hermes_home):
    store = await SessionStore.open(hermes_home / "state.db")
    yield store
    await store.close()


async def _fill(store, layout):
    """Sessions (cwd, texts) written in order; returns [(session id, seq, text, cwd)] oldest first."""
    written = []
    for cwd, texts in layout:
        record = await store.create_session(cwd=cwd, surface="acp", title=cwd)
        for text in texts:
            stored = await store.append_message(record.id, UserMessage.of(text))
            written.append((record.id, stored.seq, text, cwd))
    return written


async def test_rare_words_rank_by_bm25_and_common_words_list_the_newest(store, tmp_path):
    written = await _fill(
        store,
        [
            (str(tmp_path / "a"), ["kiwi kiwi kiwi kiwi", "kiwi and some other words here", "plain"]),
            (str(tmp_path / "b"), ["a kiwi among many many many other words", "kiwi mango", "mango"]),
        ],
    )
    ranked = await history.search(store, "kiwi")  # 4 messages: under the default cut-off
    assert [h.seq for h in ranked][:1] == [1] and ranked[0].session_id == written[0][0]
    assert [h.score for h in ranked] == sorted((h.score for h in ranked), reverse=True) and ranked[0].score > 0
    newest = await history.search(store, "kiwi", common_above=3)  # 4 > 3: too common to rank
    expected = [(sid, seq) for sid, seq, text, _ in reversed(written) if "kiwi" in text.split()]
    assert [(h.session_id, h.seq) for h in newest] == expected
    assert all(h.score == 0.0 for h in newest) and all("[kiwi]" in h.snippet for h in newest)
    # One common word is enough: the rare one still has to match.
    assert [(h.session_id, h.seq) for h in await history.search(store, "kiwi mango", common_above=3)] == [(written[4][0], 2)]
    # The page is cut after the newest ones.
    assert [(h.session_id, h.seq) for h in await history.search(store, "kiwi", common_above=3, limit=2)] == expected[:2]


def _fts(path, match, order):
    """What FTS5 alone answers for ``match``: (session id, seq), in ``order``."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT m.session_id, m.seq FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            f" WHERE messages_fts MATCH ? ORDER BY {order}",
            (match,),
        ).fetchall()
    return [tuple(r) for r in rows]


async def test_a_rare_prefix_ranks_by_bm25_as_fts5_does(store, tmp_path):
    written = await _fill(store, [(str(tmp_path), ["migration one", "migrate migrate migrate", "nothing", "migrations later"])])
    hits = await history.search(store, "migra*")
    assert [h.seq for h in hits] == [2, 4, 1] and all(h.score > 0 for h in hits)
    assert all(h.session_id == written[0][0] for h in hits)
    assert [(h.session_id, h.seq) for h in hits] == _fts(store.path, '"migra"*', "bm25(messages_fts), m.id DESC")


async def test_a_common_prefix_lists_the_newest_matches_of_every_word_it_stands_for(store, tmp_path):
    # Words kept as stems that do not read back as themselves (agreed is kept as "agre", and
    # "agre" reads as "agr"), words in other cases and accents, and words the prefix only
    # starts: every match FTS5's own prefix finds, newest first.
    texts = ["agreed on it", "Agreement", "the agrarian reform", "nothing here", "AGRÉE", "agr", "aggregate", "agreeable terms"]
    await _fill(store, [(str(tmp_path / "a"), texts[:4]), (str(tmp_path / "b"), texts[4:])])
    expected = _fts(store.path, '"agr"*', "m.id DESC")
    assert len(expected) == 6
    for query in ("agr*", "AGR*", "Agr*"):
        hits = await history.search(store, query, common_above=3)  # 6 messages in all: too common
        assert [(h.session_id, h.seq) for h in hits] == expected and all(h.score == 0.0 for h in hits)
    assert all("[" in h.snippet for h in hits)
    # Under the cut-off only because each word is: the prefix counts its words' messages together.
    assert all(h.score == 0.0 for h in await history.search(store, "agr*", common_above=5))
    assert all(h.score > 0 for h in await history.search(store, "agr*", common_above=6))
    assert [(h.session_id, h.seq) for h in await history.search(store, "agree*", common_above=1)] == _fts(
        store.path, '"agree"*', "m.id DESC"
    )
    assert [(h.session_id, h.seq) for h in await history.search(store, "agr*", common_above=1, limit=2)] == expected[:2]


async def test_prefixes_with_other_terms_phrases_and_filters(store, tmp_path):
    layout = [
        (str(tmp_path / "p1"), ["deploy config now", "deploy configured", "config deploy", "redeploy configs"]),
        (str(tmp_path / "p2"), ["deploy confusion", "deployment config", "deploy config again"]),
        (str(tmp_path / "p1"), ["deploy conf", "migration deploy conf files", "nothing"]),
    ]
    written = await _fill(store, layout)
    sessions = list(dict.fromkeys(sid for sid, *_ in written))

    async def got(query, **kwargs):
        return [(h.session_id, h.seq) for h in await history.search(store, query, common_above=1, **kwargs)]

    # A phrase whose last word is a prefix ("deploy conf*"), as FTS5 reads it.
    assert await got("deploy-conf*") == _fts(store.path, '"deploy conf"*', "m.id DESC")
    assert len(await got("deploy-conf*")) == 6
    # Two prefixes and a word: all must match.
    assert await got("depl* conf* migration") == [(sessions[2], 2)]
    assert await got("depl* conf*") == _fts(store.path, '"depl"* AND "conf"*', "m.id DESC")
    assert await got('"deploy config" conf*') == _fts(store.path, '"deploy config" AND "conf"*', "m.id DESC")
    # Filters cut the same way as for a word.
    project = str(tmp_path / "p1")
    in_project = [k for k in _fts(store.path, '"conf"*', "m.id DESC") if k[0] != sessions[1]]
    assert await got("conf*", project=project) == in_project
    assert await got("conf*", session_id=sessions[1]) == [(sessions[1], 3), (sessions[1], 2), (sessions[1], 1)]
    assert await got("conf*", role="assistant") == []
    # A prefix no word starts with matches nothing, whatever else the query holds.
    assert await got("zzyzx*") == [] and await got("deploy zzyzx*") == []
    assert await history.search(store, "zzyzx*") == []


async def test_a_prefix_of_more_words_than_expanded_is_searched_as_written(store, tmp_path, monkeypatch):
    await _fill(store, [(str(tmp_path), [f"kiwi{i} note" for i in range(6)] + ["kiwi"])])
    expected = _fts(store.path, '"kiwi"*', "m.id DESC")
    assert len(expected) == 7
    assert [(h.session_id, h.seq) for h in await history.search(store, "kiwi*", common_above=1)] == expected
    monkeypatch.setattr(history, "PREFIX_WORDS", 3)
    assert [(h.session_id, h.seq) for h in await history.search(store, "kiwi*", common_above=1)] == expected
    assert [(h.session_id, h.seq) for h in await history.search(store, "kiwi4*", common_above=1)] == expected[2:3]


async def test_a_store_from_before_the_words_table_gets_it_on_open(tmp_path):
    """m012 adds only a view of the index (fts5vocab): a store written before it searches
    prefixes by their words once opened, with nothing rebuilt."""
    path = tmp_path / "state.db"
    async with SessionStore.open(path) as store:
        await _fill(store, [(str(tmp_path), ["migration one", "migrate again", "nothing"])])
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE messages_fts_words")
        conn.execute("DELETE FROM _migrations WHERE name = 'm012_search_words'")
    async with SessionStore.open(path) as store:
        assert [h.seq for h in await history.search(store, "migra*", common_above=1)] == [2, 1]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT DISTINCT term FROM messages_fts_words WHERE term >= 'migr' LIMIT 1").fetchall() == [("migrat",)]


async def test_phrases_and_cjk_keep_working_when_common(store, tmp_path):
    await _fill(store, [(str(tmp_path), ["blue green deploy", "green blue deploy", "blue green again", "数据库迁移", "数据库连接"])])
    assert [h.seq for h in await history.search(store, '"blue green"', common_above=1)] == [3, 1]
    assert [h.seq for h in await history.search(store, "数据库", common_above=1)] == [5, 4]
    assert [h.seq for h in await history.search(store, "数据库")] != []  # bm25 on the trigram index


async def test_filters_in_newest_first_order_match_the_messages_written(store, tmp_path):
    # Interleaved sessions in two projects (one nested), so that ranges of ids overlap.
    layout = []
    for i in range(6):
        cwd = str(tmp_path / ("p1" if i % 3 == 0 else "p2" if i % 3 == 1 else "p1/sub"))
        layout.append((cwd, [f"kiwi note {i} {j}" if j % 2 == 0 else f"other {i} {j}" for j in range(5)]))
    written = await _fill(store, layout)
    sessions = list(dict.fromkeys(sid for sid, *_ in written))

    def expected(keep):
        return [(sid, seq) for sid, seq, text, cwd in reversed(written) if "kiwi" in text and keep(sid, cwd)][:10]

    async def got(**kwargs):
        return [(h.session_id, h.seq) for h in await history.search(store, "kiwi", common_above=1, **kwargs)]

    project = str(tmp_path / "p1")
    assert await got(project=project) == expected(lambda sid, cwd: cwd in (project, project + "/sub"))
    assert await got(session_id=sessions[2]) == expected(lambda sid, cwd: sid == sessions[2])
    chosen = {sessions[0], sessions[4]}
    assert await got(sessions=chosen) == expected(lambda sid, cwd: sid in chosen)
    assert await got(session_id=sessions[1], sessions=chosen) == []
    assert await got(project=str(tmp_path / "nowhere")) == []
    empty = await store.create_session(cwd=str(tmp_path), surface="acp")
    assert await got(session_id=empty.id) == []
    assert await got(role="assistant") == []
    assert len(await got(since=time.time() - 3600)) == 10
    assert await got(until=time.time() - 3600) == []


async def test_a_store_from_before_searches_the_same(tmp_path):
    """A store written before this ranking (same schema) gives the same hits for rare words."""
    path = tmp_path / "state.db"
    async with SessionStore.open(path) as store:
        written = await _fill(store, [(str(tmp_path), ["papaya split", "papaya papaya", "lime"])])
    with sqlite3.connect(path) as conn:  # what FTS5 alone answers, bm25 order
        raw = conn.execute(
            "SELECT m.session_id, m.seq FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            " WHERE messages_fts MATCH 'papaya' ORDER BY bm25(messages_fts), m.id DESC"
        ).fetchall()
    async with SessionStore.open(path) as store:
        assert [(h.session_id, h.seq) for h in await history.search(store, "papaya")] == [tuple(r) for r in raw]
        assert raw[0] == (written[0][0], 2)


async def test_the_short_cjk_scan_reads_text_stored_once_or_twice(store, tmp_path):
    """Two characters are a substring scan: over messages whose text is read from their JSON, over
    those stored with their text (a tool call), and for characters JSON escapes."""
    from core.messages import AssistantMessage, TextPart, ToolCallPart

    record = await store.create_session(cwd=str(tmp_path), surface="acp")
    await store.append_message(record.id, UserMessage.of("检查日志文件"))
    call = ToolCallPart(id="c", name="grep", arguments={"pattern": "日志"})
    await store.append_message(record.id, AssistantMessage(parts=[TextPart(text="找一下"), call]))
    await store.append_message(record.id, UserMessage.of('引号"日'))
    assert [h.seq for h in await history.search(store, "日志")] == [2, 1]
    assert [h.seq for h in await history.search(store, '"日')] == [3]
