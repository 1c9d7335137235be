"""Approvals across processes: hermes-mcp lists editor sessions' questions (the user answers them in a
terminal, never the MCP client), and its own questions are answered from other processes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import acp
import pytest

from core.events import ApprovalRequest, Decision
from core.policy.approvals import ApprovalBroker
from core.store import SessionStore
from surface_support.approval_watch import settle_foreign_answers, watch_foreign_answers
from tests.acp_harness import Client as EditorClient
from tests.acp_harness import agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import allow_projects, approvals_cli, call, connected, data, error_text, mcp_env


@pytest.fixture
def project(tmp_path, hermes_home) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    allow_projects(hermes_home, root)
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
    "answer, expected",
    [(("allow",), Decision.ALLOW_ONCE), (("allow", "--always"), Decision.ALLOW_ALWAYS), (("deny", "--always"), Decision.REJECT_ALWAYS)],
)
async def test_an_editor_sessions_question_is_listed_over_mcp_and_answered_in_a_terminal(hermes_home, project, answer, expected):
    async with SessionStore.open() as store:
        broker = ApprovalBroker(store, timeout=60)
        request = await _question(store, broker, project)
        watcher = asyncio.create_task(watch_foreign_answers(broker, store, interval=0.05))
        try:
            async with connected(mcp_env(hermes_home)) as client:
                listing = data(await client.call_tool("approvals_list", {}))
            done = await approvals_cli(hermes_home, answer[0], request.id, *answer[1:])
            decided = await asyncio.wait_for(broker.wait(request), 10)
        finally:
            watcher.cancel()
        row = await store.get_approval(request.id)
    (listed,) = listing["approvals"]
    assert listed["approval_id"] == request.id and listed["surface"] == "acp" and listed["session_title"] == "editor work"
    assert listed["command"] == "make deploy" and listed["can_always"] is True and listed["task_id"] is None
    assert "hermes-editor approvals allow" in listing["how_to_answer"] and "never you" in listing["how_to_answer"]
    assert "approval_respond" not in listing["how_to_answer"]
    assert done.returncode == 0, done.stderr
    assert decided is expected
    assert row.status == ("allowed" if expected.allowed else "denied") and row.decided_by == "cli"
    assert row.always is ("--always" in answer)


async def test_always_is_refused_for_a_question_that_asks_every_time(hermes_home, project):
    async with SessionStore.open() as store:
        broker = ApprovalBroker(store, timeout=60)
        record = await store.create_session(cwd=str(project), surface="acp", title="editor work")
        request = await broker.open(
            ApprovalRequest(
                session_id=record.id,
                tool_call_id="c1",
                tool_name="run_command",
                tool_kind="execute",
                title="Run `rm -rf build`",
                reason="dangerous",
                command="rm -rf build",
                paths=[str(project)],
                offer_always=False,
            )
        )
        async with connected(mcp_env(hermes_home)) as client:
            (listed,) = data(await client.call_tool("approvals_list", {}))["approvals"]
        refused = await approvals_cli(hermes_home, "allow", request.id, "--always")
        row = await store.get_approval(request.id)
        request.future.cancel()
    assert listed["can_always"] is False
    assert refused.returncode == 2 and "asks every time" in refused.stderr
    assert f"hermes-editor approvals allow {request.id}" in refused.stderr
    assert row.status == "pending", "a refused answer changes nothing"


async def _asked_in_acp(conn, editor: EditorClient, home: Path, project: Path, text: str):
    """Prompt a real hermes-acp until it asks its editor (which never answers); list the question
    through a real hermes-mcp. Returns (session, the prompt's task, listed)."""
    session = await conn.new_session(cwd=str(project), mcp_servers=[])
    prompt = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[acp.text_block(text)]))
    await asyncio.wait_for(editor.permission_event.wait(), 30)
    async with connected(mcp_env(home)) as client:
        (listed,) = data(await client.call_tool("approvals_list", {}))["approvals"]
    return session, prompt, listed


async def test_always_allow_given_in_a_terminal_becomes_a_rule_in_the_asking_hermes_acp(hermes_home, project):
    script = [
        call("run_command", {"command": "make build"}),
        {"text": "built"},
        call("run_command", {"command": "make build"}),
        {"text": "built again"},
    ]
    with ScriptedOpenAIServer(script) as server:
        editor = EditorClient(answer="wait")
        async with running_agent(editor, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            session, prompt, listed = await _asked_in_acp(conn, editor, hermes_home, project, "build it")
            answer = await approvals_cli(hermes_home, "allow", listed["approval_id"], "--always")
            first = await asyncio.wait_for(prompt, 30)
            second = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[acp.text_block("again")]), 30)
    assert listed["can_always"] is True and answer.returncode == 0, answer.stderr
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
        assert "No questions are waiting" in (await approvals_cli(hermes_home, "list")).stdout
        late = await approvals_cli(hermes_home, "allow", request.id)
        stale = await approvals_cli(hermes_home, "allow", old.id)
        assert (await store.get_approval(request.id)).status == "denied"
        assert (await store.get_approval(old.id)).status == "pending", "nobody waits for it: left alone"
    assert late.returncode == 1 and "already answered by acp" in late.stderr and "denied" in late.stderr
    assert stale.returncode == 1 and "no longer waiting" in stale.stderr


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


@pytest.mark.parametrize("decision", ["allow", "allow_always", "deny"])
async def test_an_editor_question_cannot_be_answered_over_mcp_even_when_trusted(hermes_home, project, decision):
    """hermes-acp waits for its editor; hermes-mcp --trust-client-approvals lists the question but may not
    answer it (only its own tasks' questions); the user's answer in a terminal is the one that counts."""
    script = [call("write_file", {"path": "notes.md", "content": "hello\n"}), {"text": "done"}]
    with ScriptedOpenAIServer(script) as server:
        editor = EditorClient(answer="wait")
        async with running_agent(editor, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            session, prompt, listed = await _asked_in_acp(conn, editor, hermes_home, project, "write notes")
            async with connected(mcp_env(hermes_home), args=("--trust-client-approvals",)) as client:
                refused = error_text(
                    await client.call_tool("approval_respond", {"approval_id": listed["approval_id"], "decision": decision})
                )
            async with SessionStore.open() as store:
                untouched = await store.get_approval(listed["approval_id"])
            assert not prompt.done() and not (project / "notes.md").exists()
            answered = await approvals_cli(hermes_home, "deny", listed["approval_id"])
            response = await asyncio.wait_for(prompt, 30)
    assert listed["surface"] == "acp" and listed["session_id"] == session.session_id
    assert "notes.md" in listed["title"] and listed["cwd"] == str(project.resolve())
    assert "not asked by this server's tasks" in refused and f"hermes-editor approvals allow {listed['approval_id']}" in refused
    assert untouched.status == "pending" and untouched.decided_by is None
    assert answered.returncode == 0 and response.stop_reason == "end_turn"
    async with SessionStore.open() as store:
        row = await store.get_approval(listed["approval_id"])
    assert row.status == "denied" and row.decided_by == "cli"
    assert not (project / "notes.md").exists()
