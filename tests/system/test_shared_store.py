"""hermes-acp, hermes-mcp and a bulk writer use one store at once: nothing lost, nothing locked."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap

import acp

from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import connected, data, mcp_env

TURNS = 12
BULK = 1500

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from core.messages import UserMessage
    from core.store import SessionStore

    async def main():
        async with SessionStore.open(sys.argv[1]) as store:
            session = await store.create_session(cwd=sys.argv[2], surface="cli", title="bulk")
            for i in range(int(sys.argv[3])):
                await store.append_message(session.id, UserMessage.of(f"bulk message {i} zanzibar"))

    asyncio.run(main())
    """
)


async def test_three_writers_share_one_store(hermes_home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    db = hermes_home / "state.db"
    with ScriptedOpenAIServer(lambda body: {"text": "reply", "chunk_size": 3}) as server:
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(project), str(BULK)], stderr=subprocess.PIPE, text=True)

        async def acp_side() -> str:
            client = Client()
            async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
                sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
                for i in range(TURNS):
                    response = await conn.prompt(session_id=sid, prompt=[acp.text_block(f"acp turn {i}")])
                    assert response.stop_reason == "end_turn"
            assert "Error" not in client.text()
            return sid

        async def mcp_side() -> str:
            async with connected(mcp_env(hermes_home, server.base_url)) as client:
                session_id = None
                for i in range(TURNS):
                    args = {"prompt": f"mcp turn {i}", "cwd": str(project)}
                    if session_id:
                        args["session_id"] = session_id
                    view = data(await client.call_tool("ask", args))
                    assert view["status"] == "done", view
                    session_id = view["session_id"]
            return session_id

        acp_sid, mcp_sid = await asyncio.gather(acp_side(), mcp_side())
        assert await asyncio.to_thread(writer.wait, 120) == 0, writer.stderr.read()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        count = lambda sid: conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (sid,)).fetchone()[0]
        assert count(acp_sid) == 2 * TURNS and count(mcp_sid) == 2 * TURNS
        bulk = conn.execute("SELECT COUNT(*) FROM messages WHERE text LIKE 'bulk message %'").fetchone()[0]
        assert bulk == BULK
        assert conn.execute("SELECT COUNT(*) FROM messages_fts").fetchone()[0] == conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        assert conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'zanzibar'").fetchone()[0] == BULK
    finally:
        conn.close()
    logs = "".join(p.read_text(errors="replace") for p in hermes_home.rglob("*.log"))
    assert "database is locked" not in logs
