"""Approvals across processes: hermes-mcp answers questions of editor sessions, and the other way round."""

from __future__ import annotations

import asyncio
from pathlib import Path

import acp
import pytest

from core.approval_watch import settle_foreign_answers, watch_foreign_answers
from core.approvals import ApprovalBroker, ApprovalRequest, Decision
from core.store import SessionStore
from tests.acp_harness import Client as EditorClient
from tests.acp_harness import agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import call, connected, data, mcp_env


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


async def _question(store: SessionStore, broker: ApprovalBroker, cwd: Path) -> ApprovalRequest:
    record = await store.create_session(cwd=str(cwd), surface="acp", title="editor work")
    return await broker.open(
        ApprovalRequest(
            session_id=record.id,
            tool_call_id="call_9",
            tool_name="run_command",
            tool_kind="execute",
            title="Run `make deploy`",
            reason="commands need your approval",
            command="make deploy",
            paths=[str(cwd)],
        )
    )


@pytest.mark.parametrize(
    "decision, expected", [("allow", Decision.ALLOW_ONCE), ("allow_always", Decision.ALLOW_ALWAYS), ("deny_always", Decision.REJECT_ALWAYS)]
)
async def test_an_editor_sessions_question_is_listed_and_answered_over_mcp(hermes_home, project, decision, expected):
    async with SessionStore.open() as store:
        broker = ApprovalBroker(store, timeout=60)
        request = await _question(store, broker, project)
        watcher = asyncio.create_task(watch_foreign_answers(broker, store, interval=0.05))
        try:
            async with connected(mcp_env(hermes_home)) as client:
                (listed,) = data(await client.call_tool("approvals_list", {}))["approvals"]
                answer = data(await client.call_tool("approval_respond", {"approval_id": request.id, "decision": decision}))
            decided = await asyncio.wait_for(broker.wait(request), 10)
        finally:
            watcher.cancel()
        row = await store.get_approval(request.id)
    assert listed["approval_id"] == request.id and listed["surface"] == "acp" and listed["session_title"] == "editor work"
    assert listed["command"] == "make deploy" and listed["can_always"] is True and listed["task_id"] is None
    assert answer["outcome"] == "answered" and answer["decision"] == decision
    assert decided is expected
    assert row.status == ("allowed" if expected.allowed else "denied") and row.decided_by == "mcp"
    assert row.always is decision.endswith("_always")


async def test_always_is_refused_for_a_question_that_asks_every_time(hermes_home, project):
    async with SessionStore.open() as store:
        broker = ApprovalBroker(store, timeout=60)
        record = await store.create_session(cwd=str(project), surface="acp", title="editor work")
        request = await broker.open(
            ApprovalRequest(
                session_id=record.id, tool_call_id="c1", tool_name="run_command", tool_kind="execute",
                title="Run `rm -rf build`", reason="dangerous", command="rm -rf build", paths=[str(project)], offer_always=False,
            )
        )
        async with connected(mcp_env(hermes_home)) as client:
            (listed,) = data(await client.call_tool("approvals_list", {}))["approvals"]
            refused = await client.call_tool("approval_respond", {"approval_id": request.id, "decision": "allow_always"})
        row = await store.get_approval(request.id)
        request.future.cancel()
    assert listed["can_always"] is False
    assert refused.is_error and "asks every time" in refused.content[0].text
    assert row.status == "pending", "a refused answer changes nothing"


async def _asked_in_acp_answered_over_mcp(conn, editor: EditorClient, home: Path, project: Path, text: str, decision: str):
    """Prompt a real hermes-acp until it asks its editor (which never answers), then answer that
    question through a real hermes-mcp. Returns (session, the prompt's task, listed, answer)."""
    session = await conn.new_session(cwd=str(project), mcp_servers=[])
    prompt = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[acp.text_block(text)]))
    await asyncio.wait_for(editor.permission_event.wait(), 30)
    async with connected(mcp_env(home)) as client:
        (listed,) = data(await client.call_tool("approvals_list", {}))["approvals"]
        answer = data(await client.call_tool("approval_respond", {"approval_id": listed["approval_id"], "decision": decision}))
    return session, prompt, listed, answer


async def test_always_allow_given_over_mcp_becomes_a_rule_in_the_asking_hermes_acp(hermes_home, project):
    script = [
        call("run_command", {"command": "make build"}),
        {"text": "built"},
        call("run_command", {"command": "make build"}),
        {"text": "built again"},
    ]
    with ScriptedOpenAIServer(script) as server:
        editor = EditorClient(answer="wait")
        async with running_agent(editor, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            session, prompt, listed, answer = await _asked_in_acp_answered_over_mcp(conn, editor, hermes_home, project, "build it", "allow_always")
            first = await asyncio.wait_for(prompt, 30)
            second = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[acp.text_block("again")]), 30)
    assert listed["can_always"] is True and answer["decision"] == "allow_always"
    assert first.stop_reason == "end_turn" and second.stop_reason == "end_turn"
    assert len(editor.permission_requests) == 1, "the second run of the same command did not ask"


async def test_the_first_answer_wins_and_stale_questions_are_not_listed(hermes_home, project):
    async with SessionStore.open() as store:
        broker = ApprovalBroker(store, timeout=60)
        request = await _question(store, broker, project)
        assert await broker.answer(request.id, Decision.REJECT_ONCE, by="acp")
        old = await _question(store, ApprovalBroker(store), project)
        await store._conn.execute("UPDATE approvals SET created_at = 0 WHERE id = ?", (old.id,))
        async with connected(mcp_env(hermes_home)) as client:
            assert data(await client.call_tool("approvals_list", {}))["approvals"] == []
            late = data(await client.call_tool("approval_respond", {"approval_id": request.id, "decision": "allow"}))
    assert late["outcome"] == "already_answered" and late["decision"] == "deny" and "acp" in late["note"]


async def test_settle_resolves_only_questions_answered_elsewhere(hermes_home, project):
    async with SessionStore.open() as store:
        broker = ApprovalBroker(store, timeout=60)
        first = await _question(store, broker, project)
        second = await _question(store, broker, project)
        assert await settle_foreign_answers(broker, store) == 0
        assert await store.resolve_approval(first.id, "allowed", "gateway")
        assert await settle_foreign_answers(broker, store) == 1
        assert first.future.result() is Decision.ALLOW_ONCE and not second.future.done()
        second.future.cancel()


async def test_an_mcp_tasks_question_answered_in_another_process_unblocks_it(hermes_home, project):
    script = [call("write_file", {"path": "todo.md", "content": "- ship it\n"}), {"text": "Created."}]
    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            view = data(await client.call_tool("ask", {"prompt": "add a todo", "cwd": str(project)}))
            (approval,) = view["approvals"]
            async with SessionStore.open() as store:  # as an editor or the gateway would
                assert await store.resolve_approval(approval["approval_id"], "allowed", "gateway")
            done = data(await client.call_tool("task_wait", {"task_id": view["task_id"], "wait": 20}))
    assert done["status"] == "done"
    assert (project / "todo.md").read_text() == "- ship it\n"


async def test_a_question_pending_in_a_real_hermes_acp_is_answered_in_the_store(hermes_home, project):
    """hermes-acp waits for its editor; hermes-mcp lists the question and records the answer."""
    script = [call("write_file", {"path": "notes.md", "content": "hello\n"}), {"text": "done"}]
    with ScriptedOpenAIServer(script) as server:
        editor = EditorClient(answer="wait")
        async with running_agent(editor, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            session, prompt, listed, answer = await _asked_in_acp_answered_over_mcp(conn, editor, hermes_home, project, "write notes", "deny")
            await conn.cancel(session_id=session.session_id)
            await asyncio.wait_for(prompt, 30)
    assert listed["surface"] == "acp" and listed["session_id"] == session.session_id
    assert "notes.md" in listed["title"] and listed["cwd"] == str(project.resolve())
    assert answer["outcome"] == "answered"
    async with SessionStore.open() as store:
        row = await store.get_approval(listed["approval_id"])
    assert row.status == "denied" and row.decided_by == "mcp"
    assert not (project / "notes.md").exists()
