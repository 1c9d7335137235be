"""End to end: the real hermes-acp process, driven by the ACP SDK's client side."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import acp
import pytest

from core.messages import AssistantMessage, UserMessage
from core.store import SessionStore
from tests.acp_harness import Client, agent_env, processes_with, running_agent, until
from tests.fakes.openai_server import ScriptedOpenAIServer


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("def greet():\n    return 'hi'\n")
    return root


async def _session(conn, project: Path) -> str:
    response = await conn.new_session(cwd=str(project), mcp_servers=[])
    return response.session_id


def _tool_call(name: str, args: dict, call_id: str = "call_1") -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": args}]}


async def test_reply_streams_as_message_chunks(hermes_home, project):
    script = [{"text": "Hello from the scripted model, streamed in pieces.", "chunk_size": 7, "thinking": "Consider the greeting."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("say hello")])
    assert response.stop_reason == "end_turn"
    assert response.field_meta == {"hermes": {"error": None}}
    chunks = client.of_kind("agent_message_chunk")
    assert len(chunks) > 3, "the reply should arrive in several chunks"
    assert client.text() == "Hello from the scripted model, streamed in pieces."
    thoughts = "".join(u.content.text for u in client.of_kind("agent_thought_chunk"))
    assert thoughts == "Consider the greeting."
    body = server.requests[0]["body"] if isinstance(server.requests[0], dict) and "body" in server.requests[0] else server.requests[0]
    assert body["messages"][-1]["content"] in ("say hello", [{"type": "text", "text": "say hello"}])


async def test_a_failed_turn_says_so_in_the_thread_and_in_the_answers_meta(hermes_home, project):
    script = [{"error": 400, "message": "this model does not exist"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
    assert response.stop_reason == "end_turn"
    error = response.field_meta["hermes"]["error"]
    assert error and "this model does not exist" in error
    assert "**Error:**" in client.text() and "this model does not exist" in client.text()


async def test_write_with_approval_shows_diff_then_writes(hermes_home, project):
    script = [_tool_call("write_file", {"path": "notes/todo.md", "content": "- ship it\n"}), {"text": "Created the file."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, transcript):
            sid = await _session(conn, project)
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("add a todo file")])
    target = project / "notes" / "todo.md"
    assert response.stop_reason == "end_turn"
    assert target.read_text() == "- ship it\n"
    # The diff was in the permission request, before the write.
    (request,) = client.permission_requests
    (diff,) = request.content
    assert diff.type == "diff" and diff.path == str(target) and diff.old_text is None and diff.new_text == "- ship it\n"
    # The write went through the editor, and the tool call ends completed with the diff.
    assert client.writes == [str(target)]
    updates = client.tool_updates("call_1")
    assert updates[0].session_update == "tool_call" and updates[0].kind == "edit"
    assert updates[0].locations[0].path == str(target)
    assert updates[-1].status == "completed"
    assert updates[-1].content[0].type == "diff" and updates[-1].content[0].path == str(target)
    assert "Created the file." in client.text()


async def test_edit_reads_the_unsaved_editor_buffer(hermes_home, project):
    target = project / "app.py"
    script = [_tool_call("edit_file", {"path": "app.py", "old_string": "'hello there'", "new_string": "'hello, world'"}), {"text": "done"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        client.buffers[str(target)] = "def greet():\n    return 'hello there'\n"  # typed, not saved
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("fix the greeting")])
    (request,) = client.permission_requests
    assert request.content[0].old_text == "def greet():\n    return 'hello there'\n"
    assert target.read_text() == "def greet():\n    return 'hello, world'\n"
    assert str(target) in client.reads


async def test_rejected_write_leaves_file_and_turn_goes_on(hermes_home, project):
    target = project / "app.py"
    before = target.read_text()
    script = [_tool_call("write_file", {"path": "app.py", "content": "oops\n"}), {"text": "Understood, I left it alone."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="reject_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("overwrite app.py")])
    assert target.read_text() == before
    assert client.writes == []
    assert client.tool_updates("call_1")[-1].status == "failed"
    assert response.stop_reason == "end_turn"
    assert "left it alone" in client.text()
    # The model was told, in a tool result, that the user said no.
    second = server.requests[1]["body"] if "body" in server.requests[1] else server.requests[1]
    tool_msgs = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_msgs and "rejected" in tool_msgs[0]["content"]


async def test_always_allow_is_remembered_for_the_project(hermes_home, project):
    script = [
        _tool_call("write_file", {"path": "a.txt", "content": "a\n"}, "c1"),
        _tool_call("write_file", {"path": "b.txt", "content": "b\n"}, "c2"),
        {"text": "both written"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_always")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("write two files")])
    assert (project / "a.txt").read_text() == "a\n" and (project / "b.txt").read_text() == "b\n"
    assert len(client.permission_requests) == 1


@pytest.mark.parametrize("terminal", [True, False], ids=["editor-terminal", "local-process"])
async def test_command_with_approval(hermes_home, project, terminal):
    script = [_tool_call("run_command", {"command": "echo built-$((20+22))"}), {"text": "The build printed 42."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once", terminal=terminal)
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("run the build")])
    assert response.stop_reason == "end_turn"
    (request,) = client.permission_requests
    assert request.kind == "execute" and "echo built" in request.content[0].content.text
    updates = client.tool_updates("call_1")
    assert updates[-1].status == "completed"
    second = server.requests[1]["body"] if "body" in server.requests[1] else server.requests[1]
    result = [m for m in second["messages"] if m["role"] == "tool"][0]["content"]
    assert "exit code 0" in result and "built-42" in result
    if terminal:
        (tid,) = client.terminals
        attached = [c for u in updates for c in (u.content or []) if c.type == "terminal"]
        assert attached and attached[0].terminal_id == tid
        assert client.released == [tid]


async def test_rejected_command_does_not_run(hermes_home, project):
    marker = project / "ran.txt"
    script = [_tool_call("run_command", {"command": f"touch {marker}"}), {"text": "ok, not running it"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="reject_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("touch it")])
    assert not marker.exists()
    assert client.terminals == {}
    assert client.tool_updates("call_1")[-1].status == "failed"


async def test_cancel_during_model_stream(hermes_home, project):
    script = [{"text": "word " * 400, "chunk_size": 5, "delay": 0.05}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("talk a lot")]))
            await until(lambda: client.of_kind("agent_message_chunk"), what="the first streamed chunk")
            await conn.cancel(session_id=sid)
            response = await asyncio.wait_for(turn, 10)
            assert response.stop_reason == "cancelled"
            # The session is still usable afterwards.
            server.script.append({"text": "still here"}) if isinstance(server.script, list) else None
            again = await conn.prompt(session_id=sid, prompt=[acp.text_block("are you there?")])
            assert again.stop_reason == "end_turn"
    assert len(client.text()) < len("word " * 400) + len("still here") + 10


async def test_cancel_while_waiting_for_permission_and_running_command(hermes_home, project):
    started_marker = project / "started"
    marker = f"hermes-cancel-{os.getpid()}"
    script = [_tool_call("run_command", {"command": f"touch {started_marker} && sh -c 'sleep 30; true' {marker}"}), {"text": "never"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once", terminal=False)
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("sleep")]))
            await asyncio.wait_for(client.permission_event.wait(), 10)
            await until(lambda: started_marker.exists() or turn.done(), what="the command to start")
            await conn.cancel(session_id=sid)
            response = await asyncio.wait_for(turn, 10)  # the command alone would take 30 s

            # The answer came because the command was stopped, not because it ended: its processes
            # go (a killed sandbox's PID namespace is torn down by the kernel a moment later),
            # long before the 30 s the command would have taken.
            await until(lambda: not processes_with(marker), timeout=10, what="the cancelled command's processes to be gone")
    assert response.stop_reason == "cancelled"
    assert client.tool_updates("call_1")[-1].status == "failed"


async def test_conversation_is_saved_and_searchable(hermes_home, project):
    script = [{"text": "The flux capacitor needs 1.21 gigawatts."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("how much power does the flux capacitor need?")])
    store = await SessionStore.open(hermes_home / "state.db")
    try:
        record = await store.get_session(sid)
        assert record is not None and record.cwd == str(project) and record.surface == "acp"
        assert record.title.startswith("how much power")
        messages = [m.message for m in await store.messages(sid)]
        assert isinstance(messages[0], UserMessage) and isinstance(messages[1], AssistantMessage)
        hits = await store.search("gigawatts")
        assert [h.session_id for h in hits] == [sid]
        assert "gigawatts" in hits[0].snippet
    finally:
        await store.close()


async def test_model_failure_keeps_the_message_and_says_why(hermes_home, project):
    script = [{"error": 401}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("please remember this question")])
    assert response.stop_reason == "end_turn"
    text = client.text()
    assert "auth" in text and "API key" in text
    assert "sk-test-not-a-real-key" not in text
    store = await SessionStore.open(hermes_home / "state.db")
    try:
        messages = [m.message for m in await store.messages(sid)]
        assert isinstance(messages[0], UserMessage) and messages[0].text == "please remember this question"
    finally:
        await store.close()


async def test_transient_failures_are_retried(hermes_home, project):
    script = [{"error": 500}, {"error": 429, "retry_after": 0}, {"text": "third time lucky"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        env = agent_env(hermes_home, server.base_url)
        (hermes_home / "config.toml").write_text("[retry]\nbase_delay = 0.01\nmax_delay = 0.05\n")
        async with running_agent(client, env) as (conn, _, _):
            sid = await _session(conn, project)
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("hi")])
    assert response.stop_reason == "end_turn"
    assert "third time lucky" in client.text()
    assert len(server.requests) == 3


async def test_max_steps_ends_with_max_turn_requests(hermes_home, project):
    script = [_tool_call("read_file", {"path": "app.py"}, f"c{i}") for i in range(5)]
    with ScriptedOpenAIServer(script) as server:
        (hermes_home / "config.toml").write_text("max_steps = 3\n")
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("loop")])
    assert response.stop_reason == "max_turn_requests"
    assert len(server.requests) == 3
    # Every tool call reached a final status.
    for call_id in ("c0", "c1", "c2"):
        assert client.tool_updates(call_id)[-1].status == "completed"


async def test_without_client_fs_writes_go_to_disk(hermes_home, project):
    script = [_tool_call("edit_file", {"path": "app.py", "old_string": "'hi'", "new_string": "'hey'"}), {"text": "done"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once", fs=False)
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("say hey")])
    assert client.reads == [] and client.writes == []
    assert (project / "app.py").read_text() == "def greet():\n    return 'hey'\n"


async def test_anthropic_provider_end_to_end(hermes_home, project):
    from tests.fakes.anthropic_server import ScriptedAnthropicServer

    script = [
        {
            "thinking": "Look at the file first.",
            "signature": "sig-1",
            "tool_calls": [{"id": "toolu_1", "name": "read_file", "arguments": {"path": "app.py"}}],
        },
        {"text": "greet() returns 'hi'."},
    ]
    with ScriptedAnthropicServer(script) as server:
        env = agent_env(
            hermes_home,
            None,
            extra={
                "ANTHROPIC_BASE_URL": server.base_url,
                "ANTHROPIC_API_KEY": "sk-ant-test-000000",
                "HERMES_MODEL": "anthropic:claude-scripted",
            },
        )
        client = Client()
        async with running_agent(client, env) as (conn, _, _):
            sid = await _session(conn, project)
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("what does greet return?")])
    assert response.stop_reason == "end_turn"
    assert client.text() == "greet() returns 'hi'."
    assert client.tool_updates("toolu_1")[-1].status == "completed"
    second = server.requests[1].get("body", server.requests[1])
    # The signed thinking block goes back unchanged with the tool result; the prefix is cached.
    assistant = [m for m in second["messages"] if m["role"] == "assistant"][0]
    assert assistant["content"][0] == {"type": "thinking", "thinking": "Look at the file first.", "signature": "sig-1"}
    assert second["system"][-1]["cache_control"] == {"type": "ephemeral"}


async def test_api_key_never_reaches_store_logs_or_user(hermes_home, project):
    key = "sk-test-not-a-real-key-123456"  # what agent_env configures
    script = [{"error": 500}, {"error": 401, "message": f"bad key {key}"}]
    with ScriptedOpenAIServer(script) as server:
        (hermes_home / "config.toml").write_text('log_level = "debug"\n[retry]\nbase_delay = 0\nmax_attempts = 2\n')
        env = agent_env(hermes_home, server.base_url)
        env.pop("HERMES_QUIET")
        client = Client()
        async with running_agent(client, env) as (conn, _, transcript):
            sid = await _session(conn, project)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
    assert "auth" in client.text()
    everything = [str(m) for _, m in transcript.messages]
    for path in [*hermes_home.glob("state.db*"), hermes_home / "stderr.log", *sorted((hermes_home / "logs").glob("*"))]:
        everything.append(path.read_bytes().decode("utf-8", "replace"))
    assert any("redacted" in text or "auth" in text for text in everything)
    assert not [text for text in everything if key in text]


async def test_an_approval_answered_in_another_process_unblocks_the_turn(hermes_home, project):
    """The store's approvals table is shared: hermes-mcp or the gateway can answer first."""
    script = [_tool_call("write_file", {"path": "remote.txt", "content": "approved elsewhere\n"}), {"text": "written"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="wait")  # the editor never answers
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("write remotely")]))
            await asyncio.wait_for(client.permission_event.wait(), 10)
            store = await SessionStore.open(hermes_home / "state.db")
            try:
                (pending,) = await store.pending_approvals(sid)
                assert await store.resolve_approval(pending.id, "allowed", "mcp")
            finally:
                await store.close()
            response = await asyncio.wait_for(turn, 15)
    assert response.stop_reason == "end_turn"
    assert (project / "remote.txt").read_text() == "approved elsewhere\n"


async def test_model_faults_mid_stream_are_retried_and_the_session_stays_usable(hermes_home, project):
    script = [
        {"text": "partial answer that will be cut", "disconnect_after": 2, "chunk_size": 4},
        {"malformed": True},
        {"error": "overloaded"},
        {"tool_calls": [{"id": "bad", "name": "read_file", "arguments": "{not json"}]},
        {"text": "recovered fine"},
        {"text": "second turn works"},
    ]
    with ScriptedOpenAIServer(script) as server:
        (hermes_home / "config.toml").write_text("[retry]\nbase_delay = 0\nmax_delay = 0\nmax_attempts = 5\n")
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            first = await conn.prompt(session_id=sid, prompt=[acp.text_block("hi")])
            second = await conn.prompt(session_id=sid, prompt=[acp.text_block("again")])
    assert first.stop_reason == "end_turn" and second.stop_reason == "end_turn"
    text = client.text()
    assert "Retrying" in text and "recovered fine" in text and "second turn works" in text
    assert client.tool_updates("bad")[-1].status == "failed"
    # The model was told its arguments were not valid JSON.
    body = server.requests[4].get("body", server.requests[4])
    assert "not a valid JSON object" in [m for m in body["messages"] if m["role"] == "tool"][0]["content"]
