"""Sessions that survive: load (replay), list, resume, close, fork — against the real process."""

from __future__ import annotations

import acp
import pytest

from core.store import SessionStore
from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("x = 1\n")
    return root


def _body(request: dict) -> dict:
    return request.get("body", request)


def _texts(body: dict) -> list[str]:
    out = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(part.get("text", "") for part in content if isinstance(part, dict))
    return out


FIRST_TURN = [
    {
        "thinking": "Plan, then edit.",
        "tool_calls": [
            {"id": "p1", "name": "update_plan", "arguments": {"entries": [{"content": "Edit app.py", "status": "in_progress"}]}},
            {"id": "e1", "name": "edit_file", "arguments": {"path": "app.py", "old_string": "x = 1", "new_string": "x = 2"}},
        ],
    },
    {"text": "Set x to 2."},
]


async def _first_session(home, project, server) -> str:
    client = Client(answer="allow_once")
    async with running_agent(client, agent_env(home, server.base_url)) as (conn, _, _):
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await conn.prompt(session_id=sid, prompt=[acp.text_block("make x two")])
    assert client.of_kind("plan"), "the plan tool shows as a plan update"
    return sid


async def test_load_replays_the_whole_conversation_in_a_new_process(hermes_home, project):
    with ScriptedOpenAIServer([*FIRST_TURN, {"text": "It is 2 now."}]) as server:
        sid = await _first_session(hermes_home, project, server)
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
            replayed = list(client.updates)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("what is x?")])
    kinds = [u.session_update for u in replayed]
    assert kinds[0] == "user_message_chunk" and replayed[0].content.text == "make x two"
    assert "agent_thought_chunk" in kinds and "plan" in kinds
    tool_updates = [u for u in replayed if u.session_update == "tool_call_update"]
    assert {u.tool_call_id: u.status for u in tool_updates} == {"p1": "completed", "e1": "completed"}
    diff = [u for u in tool_updates if u.tool_call_id == "e1"][0].content[0]
    assert diff.type == "diff" and diff.old_text == "x = 1\n" and diff.new_text == "x = 2\n"
    starts = [u for u in replayed if u.session_update == "tool_call"]
    assert [u.locations[0].path for u in starts if u.tool_call_id == "e1"] == [str(project / "app.py")]
    assert [u.content.text for u in replayed if u.session_update == "agent_message_chunk"] == ["Set x to 2."]
    # The model sees the earlier conversation when the loaded session goes on.
    texts = _texts(_body(server.requests[-1]))
    assert "make x two" in texts and "Set x to 2." in texts and texts[-1] == "what is x?"


async def test_load_of_a_missing_session_is_a_clear_error(hermes_home, project):
    with ScriptedOpenAIServer([]) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            with pytest.raises(acp.RequestError) as info:
                await conn.load_session(cwd=str(project), session_id="nope", mcp_servers=[])
    assert info.value.code == -32602 and "session/list" in str(info.value.data)


async def test_resume_does_not_replay_and_keeps_history(hermes_home, project):
    with ScriptedOpenAIServer([*FIRST_TURN, {"text": "still 2"}]) as server:
        sid = await _first_session(hermes_home, project, server)
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await conn.resume_session(cwd=str(project), session_id=sid, mcp_servers=[])
            assert [u.session_update for u in client.updates] in ([], ["available_commands_update"])
            await conn.prompt(session_id=sid, prompt=[acp.text_block("and now?")])
    assert "Set x to 2." in _texts(_body(server.requests[-1]))


async def test_list_filters_by_cwd_and_pages(hermes_home, project, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    with ScriptedOpenAIServer([{"text": "hi"}]) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            titled = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=titled, prompt=[acp.text_block("name this session please")])
            for _ in range(54):
                await conn.new_session(cwd=str(project), mcp_servers=[])
            await conn.new_session(cwd=str(other), mcp_servers=[])
            first = await conn.list_sessions(cwd=str(project))
            second = await conn.list_sessions(cwd=str(project), cursor=first.next_cursor)
            everything = await conn.list_sessions()
            with pytest.raises(acp.RequestError):
                await conn.list_sessions(cursor="%%%not-a-cursor")
    assert len(first.sessions) == 50 and first.next_cursor
    assert len(second.sessions) == 5 and second.next_cursor is None
    ids = [s.session_id for s in first.sessions + second.sessions]
    assert len(set(ids)) == 55 and titled in ids
    assert all(s.cwd == str(project) for s in first.sessions + second.sessions)
    info = [s for s in first.sessions + second.sessions if s.session_id == titled][0]
    assert info.title == "name this session please" and info.updated_at.endswith("Z")
    assert len(everything.sessions) == 50 and any(s.cwd == str(other) for s in everything.sessions)


async def test_close_forgets_the_session_but_the_store_keeps_it(hermes_home, project):
    with ScriptedOpenAIServer([{"text": "one"}]) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
            await conn.close_session(session_id=sid)
            with pytest.raises(acp.RequestError):
                await conn.prompt(session_id=sid, prompt=[acp.text_block("again")])
            listed = await conn.list_sessions(cwd=str(project))
    assert sid in [s.session_id for s in listed.sessions]


async def test_fork_copies_history_and_leaves_the_original(hermes_home, project):
    with ScriptedOpenAIServer([*FIRST_TURN, {"text": "in the fork"}]) as server:
        sid = await _first_session(hermes_home, project, server)
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            fork = await conn.fork_session(cwd=str(project), session_id=sid, mcp_servers=[])
            assert fork.session_id != sid
            await conn.prompt(session_id=fork.session_id, prompt=[acp.text_block("continue in fork")])
    assert "Set x to 2." in _texts(_body(server.requests[-1]))
    store = await SessionStore.open(hermes_home / "state.db")
    try:
        assert await store.message_count(sid) == 5
        assert await store.message_count(fork.session_id) == 7
        assert (await store.get_session(fork.session_id)).parent_id == sid
    finally:
        await store.close()


async def test_replaying_a_long_session_answers(hermes_home, project):
    """A 5,000-message session loads (its timing is measured in benchmarks/acp_replay.py)."""
    from benchmarks.acp_replay import build_long_session

    with ScriptedOpenAIServer([]) as server:
        sid = await build_long_session(hermes_home / "state.db", project, 5000)
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
    assert len([u for u in client.updates if u.session_update == "user_message_chunk"]) == 1250


async def test_sessions_in_one_process_are_isolated(hermes_home, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()

    def script(body):
        last = body["messages"][-1]
        if last["role"] == "tool":
            return {"text": "done"}
        text = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
        return {"tool_calls": [{"id": f"w-{text}", "name": "write_file", "arguments": {"path": "out.txt", "content": text}}], "delay": 0.05}

    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sa = (await conn.new_session(cwd=str(a), mcp_servers=[])).session_id
            sb = (await conn.new_session(cwd=str(b), mcp_servers=[])).session_id
            await conn.set_session_mode(session_id=sa, mode_id="auto")
            import asyncio

            await asyncio.gather(
                conn.prompt(session_id=sa, prompt=[acp.text_block("alpha")]),
                conn.prompt(session_id=sb, prompt=[acp.text_block("beta")]),
            )
    assert (a / "out.txt").read_text() == "alpha" and (b / "out.txt").read_text() == "beta"
    # Only the session still in "ask" mode asked.
    assert [r.tool_call_id for r in client.permission_requests] == ["w-beta"]
