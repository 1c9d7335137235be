"""hermes-acp, hermes-mcp, hermes-gateway and a bulk writer use one store at once: nothing lost, nothing locked.

Every writer is a real process. The bulk writer appends round-robin to several sessions from
before the others start until after they finish, so every other write races it; it reports how
many messages it wrote to each session. Each writer's prompts carry a word no other writer
uses, so the full-text index can be checked per writer as well as as a whole; bulk messages
also carry a word in a script written without spaces, which only the trigram index finds.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import acp

from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.telegram_server import FakeTelegram
from tests.hermes_gateway.harness import OWNER, GatewayProcess, gateway_env, write_config
from tests.hermes_mcp.harness import connected, data, mcp_env

TURNS = 12  # prompts through hermes-acp, and through hermes-mcp
CHATS = (OWNER, 5001, 5002, 5003)  # private Telegram chats, one gateway session each
CHAT_TURNS = 6  # prompts per chat
BULK_SESSIONS = 4
BULK_AT_LEAST = 1500
LOCKED = "database is locked"
# One word per writer, used by nobody else: prompts (and bulk messages) carry it, replies never do.
WORDS = {"acp": "wombat", "mcp": "quokka", "gateway": "kookaburra", "bulk": "zanzibar"}
SPACELESS = "東京都"  # in bulk messages only; indexed by messages_trigram

WRITER = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from core.messages import UserMessage
    from core.store import SessionStore

    async def main():
        db, cwd, stop, ready = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
        sessions, at_least = int(sys.argv[5]), int(sys.argv[6])
        written = {}
        async with SessionStore.open(db) as store:
            ids = [(await store.create_session(cwd=cwd, surface="cli", title=f"bulk {n}")).id for n in range(sessions)]
            i = 0
            while i < at_least or not os.path.exists(stop):
                sid = ids[i % sessions]
                await store.append_message(sid, UserMessage.of(f"bulk message {i} zanzibar 東京都"))
                written[sid] = written.get(sid, 0) + 1
                i += 1
                if i == 1:
                    open(ready, "w").close()
        print(json.dumps(written))

    asyncio.run(main())
    """
)


def reply(body: dict) -> dict:
    """The model's answer names the turn it answers (``#<n>``) and none of the writers' words."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    found = re.findall(r"turn (\d+)", json.dumps(users[-1]["content"])) if users else []
    return {"text": f"reply to #{found[-1] if found else '?'}", "chunk_size": 3}


async def test_four_writers_share_one_store(hermes_home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    db = hermes_home / "state.db"
    stop, ready = tmp_path / "stop", tmp_path / "ready"
    write_config(hermes_home, project, allowed=CHATS)
    with (
        ScriptedOpenAIServer(reply) as server,
        FakeTelegram() as telegram,
        GatewayProcess(gateway_env(hermes_home, telegram, server.base_url)).start(telegram) as gateway,
    ):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(project), str(stop), str(ready), str(BULK_SESSIONS), str(BULK_AT_LEAST)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            while not ready.exists():  # the bulk writer is writing before anyone else starts
                assert writer.poll() is None and time.monotonic() < deadline, (
                    writer.stderr.read() if writer.poll() is not None else "no first write"
                )
                await asyncio.sleep(0.02)

            started = {"acp": threading.Event(), "mcp": threading.Event()}  # each has finished a first turn

            async def acp_side() -> tuple[str, str]:
                client = Client()
                async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
                    sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
                    for i in range(TURNS):
                        response = await conn.prompt(session_id=sid, prompt=[acp.text_block(f"acp turn {i} wombat")])
                        assert response.stop_reason == "end_turn"
                        started["acp"].set()
                return sid, client.text()

            async def mcp_side() -> tuple[str, list[dict]]:
                views = []
                async with connected(mcp_env(hermes_home, server.base_url), roots=[project]) as client:
                    session_id = None
                    for i in range(TURNS):
                        args = {"prompt": f"mcp turn {i} quokka", "cwd": str(project)}
                        if session_id:
                            args["session_id"] = session_id
                        view = data(await client.call_tool("ask", args))
                        assert view["status"] == "done", view
                        views.append(view)
                        session_id = view["session_id"]
                        started["mcp"].set()
                return session_id, views

            def telegram_side() -> None:
                # Each chat's prompts in two waves, the second once hermes-acp and hermes-mcp are
                # writing too; the gateway runs the chats side by side, each chat in order.
                for i in range(CHAT_TURNS):
                    if i == CHAT_TURNS // 2:
                        assert started["acp"].wait(60) and started["mcp"].wait(60)
                    for chat in CHATS:
                        telegram.send_user_message(chat, f"chat {chat} turn {i} kookaburra")
                for chat in CHATS:
                    telegram.wait_for(
                        lambda: all(any(m["text"] == f"reply to #{i}" for m in telegram.sent(chat)) for i in range(CHAT_TURNS)),
                        60,
                        f"every reply in chat {chat}",
                    )

            (acp_sid, acp_text), (mcp_sid, mcp_views), _ = await asyncio.gather(acp_side(), mcp_side(), asyncio.to_thread(telegram_side))
        finally:
            stop.touch()
            out, err = await asyncio.to_thread(writer.communicate, timeout=120)
        assert writer.returncode == 0, err
        code, gateway_err = gateway.stop()
        assert code == 0, gateway_err
    bulk = json.loads(out)
    bot_texts = [m["text"] for m in telegram.sent()]

    # Nothing about a locked store reached anyone: editor, MCP client, Telegram user, or a log.
    assert "Error" not in acp_text and LOCKED not in acp_text
    assert LOCKED not in json.dumps(mcp_views)
    assert not [t for t in bot_texts if LOCKED in t], bot_texts
    logs = "".join(p.read_text(errors="replace") for p in hermes_home.rglob("*.log"))
    assert LOCKED not in logs + gateway_err + err

    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        # rank=1: the word index is checked against the messages table itself, both ways. The
        # trigram index holds only some rows by design, so it is checked within itself here
        # and against the table by the search below.
        conn.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
        conn.execute("INSERT INTO messages_trigram (messages_trigram) VALUES ('integrity-check')")
        count = lambda sid: conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (sid,)).fetchone()[0]

        # Every message each writer reports is there: a prompt and a reply per turn, every bulk append.
        assert count(acp_sid) == 2 * TURNS and count(mcp_sid) == 2 * TURNS
        assert len(bulk) == BULK_SESSIONS and sum(bulk.values()) >= BULK_AT_LEAST
        assert {sid: count(sid) for sid in bulk} == bulk
        gateway_sids = [row[0] for row in conn.execute("SELECT id FROM sessions WHERE surface = 'gateway'")]
        assert len(gateway_sids) == len(CHATS)
        prompts_by_session = {
            sid: sorted(row[0] for row in conn.execute("SELECT text FROM messages WHERE session_id = ? AND role = 'user'", (sid,)))
            for sid in gateway_sids
        }
        assert sorted(map(tuple, prompts_by_session.values())) == sorted(
            tuple(sorted(f"chat {chat} turn {i} kookaburra" for i in range(CHAT_TURNS))) for chat in CHATS
        )
        assert all(count(sid) == 2 * CHAT_TURNS for sid in gateway_sids)
        # Telegram saw each turn answered once.
        assert sorted(bot_texts) == sorted(f"reply to #{i}" for i in range(CHAT_TURNS) for _ in CHATS)

        # The index finds each writer's word exactly where the table has it.
        expected = {"acp": TURNS, "mcp": TURNS, "gateway": len(CHATS) * CHAT_TURNS, "bulk": sum(bulk.values())}
        for writer_name, word in WORDS.items():
            in_table = conn.execute("SELECT COUNT(*) FROM messages WHERE text LIKE ?", (f"% {word}%",)).fetchone()[0]
            in_index = conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?", (word,)).fetchone()[0]
            assert in_table == in_index == expected[writer_name], (writer_name, in_table, in_index)
        in_table = conn.execute("SELECT COUNT(*) FROM messages WHERE text LIKE ?", (f"%{SPACELESS}%",)).fetchone()[0]
        in_index = conn.execute("SELECT COUNT(*) FROM messages_trigram WHERE messages_trigram MATCH ?", (SPACELESS,)).fetchone()[0]
        assert in_table == in_index == expected["bulk"]
    finally:
        conn.close()
