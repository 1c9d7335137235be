"""``hermes-editor approvals``: the user answers a real process's pending question from a terminal."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import acp
import pytest

from core.events import ApprovalRequest
from core.policy.approvals import ApprovalBroker
from core.store import SessionStore
from tests.acp_harness import Client as EditorClient
from tests.acp_harness import agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import SECRET_KEY, approvals_cli, call


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


async def _asking(conn, editor: EditorClient, project: Path, text: str) -> tuple[str, asyncio.Task]:
    """Prompt a real hermes-acp until it asks its editor, which never answers."""
    session = await conn.new_session(cwd=str(project), mcp_servers=[])
    prompt = asyncio.create_task(conn.prompt(session_id=session.session_id, prompt=[acp.text_block(text)]))
    await asyncio.wait_for(editor.permission_event.wait(), 30)
    async with SessionStore.open() as store:
        (row,) = await store.pending_approvals()
    return row.id, prompt


@pytest.mark.parametrize("verb", ["allow", "deny"])
async def test_a_real_hermes_acp_question_is_listed_answered_once_and_the_second_answer_loses(hermes_home, project, verb):
    script = [call("write_file", {"path": "notes.md", "content": "hello\n"}), {"text": "done"}]
    with ScriptedOpenAIServer(script) as server:
        editor = EditorClient(answer="wait")
        async with running_agent(editor, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            approval_id, prompt = await _asking(conn, editor, project, "write notes")
            listed = await approvals_cli(hermes_home, "list")
            bare = await approvals_cli(hermes_home)
            answered = await approvals_cli(hermes_home, verb, approval_id[:8])  # a unique prefix does
            response = await asyncio.wait_for(prompt, 30)
            second = await approvals_cli(hermes_home, "deny" if verb == "allow" else "allow", approval_id)
    assert listed.returncode == 0 and approval_id in listed.stdout and "notes.md" in listed.stdout
    assert "acp, " in listed.stdout and str(project.resolve()) in listed.stdout
    assert f"hermes-editor approvals allow {approval_id}" in listed.stdout
    # The same listing; only the question's age may have ticked on between the two calls.
    assert _ageless(bare.stdout) == _ageless(listed.stdout)
    assert answered.returncode == 0, answered.stderr
    assert response.stop_reason == "end_turn"
    assert second.returncode == 1 and "already answered by cli" in second.stderr and "nothing changed" in second.stderr
    assert (project / "notes.md").exists() is (verb == "allow")
    async with SessionStore.open() as store:
        row = await store.get_approval(approval_id)
    assert row.status == ("allowed" if verb == "allow" else "denied") and row.decided_by == "cli"
    assert "No questions are waiting." in (await approvals_cli(hermes_home, "list")).stdout


async def test_two_answers_at_once_exactly_one_wins(hermes_home, project):
    """allow and deny race from two terminals against a real hermes-acp: one wins, the other is told."""
    script = [call("write_file", {"path": "notes.md", "content": "hello\n"}), {"text": "done"}]
    with ScriptedOpenAIServer(script) as server:
        editor = EditorClient(answer="wait")
        async with running_agent(editor, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            approval_id, prompt = await _asking(conn, editor, project, "write notes")
            allow, deny = await asyncio.gather(
                approvals_cli(hermes_home, "allow", approval_id), approvals_cli(hermes_home, "deny", approval_id)
            )
            await asyncio.wait_for(prompt, 30)
    assert sorted([allow.returncode, deny.returncode]) == [0, 1]
    loser = allow if allow.returncode else deny
    assert "answered" in loser.stderr and "nothing changed" in loser.stderr
    async with SessionStore.open() as store:
        row = await store.get_approval(approval_id)
    assert row.status == ("allowed" if allow.returncode == 0 else "denied")
    assert (project / "notes.md").exists() is (allow.returncode == 0)


async def test_allow_always_becomes_a_rule_where_the_question_was_asked(hermes_home, project):
    script = [
        call("run_command", {"command": "make build"}),
        {"text": "built"},
        call("run_command", {"command": "make build"}),
        {"text": "again"},
    ]
    with ScriptedOpenAIServer(script) as server:
        editor = EditorClient(answer="wait")
        async with running_agent(editor, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            approval_id, prompt = await _asking(conn, editor, project, "build it")
            answered = await approvals_cli(hermes_home, "allow", approval_id, "--always")
            first = await asyncio.wait_for(prompt, 30)
            sid = await _session_of(approval_id)
            second = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[acp.text_block("again")]), 30)
    assert answered.returncode == 0 and "always" in answered.stdout
    assert first.stop_reason == "end_turn" and second.stop_reason == "end_turn"
    assert len(editor.permission_requests) == 1, "the second run of the same command did not ask"


async def _session_of(approval_id: str) -> str:
    async with SessionStore.open() as store:
        return (await store.get_approval(approval_id)).session_id


async def _question(store: SessionStore, cwd: Path, *, command: str = "make deploy", offer_always: bool = True) -> ApprovalRequest:
    record = await store.create_session(cwd=str(cwd), surface="gateway", title="phone work")
    return await ApprovalBroker(store, timeout=60).open(
        ApprovalRequest(
            session_id=record.id,
            tool_call_id="c1",
            tool_name="run_command",
            tool_kind="execute",
            title=f"Run `{command}`",
            reason="commands need your approval",
            command=command,
            paths=[str(cwd)],
            offer_always=offer_always,
        )
    )


@pytest.mark.parametrize(
    "ref, message",
    [
        ("0123456789abcdef0123456789abcdef", "No approval '0123456789abcdef0123456789abcdef'"),
        ("abc", "No approval 'abc'"),
        ("' OR 1=1 --", "No approval"),
        ("%", "No approval"),
        ("", "No approval"),
    ],
)
async def test_unknown_ids_are_errors_that_change_nothing(hermes_home, project, ref, message):
    async with SessionStore.open() as store:
        request = await _question(store, project)
        result = await approvals_cli(hermes_home, "allow", ref)
        row = await store.get_approval(request.id)
        request.future.cancel()
    assert result.returncode == 1 and message in result.stderr and "hermes-editor approvals list" in result.stderr
    assert row.status == "pending"


async def test_an_ambiguous_prefix_is_refused(hermes_home, project):
    async with SessionStore.open() as store:
        first = await _question(store, project)
        second = await _question(store, project)
        await store._conn.execute("UPDATE approvals SET id = ? WHERE id = ?", ("abcdef01" + "0" * 24, first.id))
        await store._conn.execute("UPDATE approvals SET id = ? WHERE id = ?", ("abcdef02" + "0" * 24, second.id))
        await store._conn.commit()
        result = await approvals_cli(hermes_home, "deny", "abcdef0")
        rows = await store.pending_approvals()
        first.future.cancel()
        second.future.cancel()
    assert result.returncode == 1 and "more than one approval" in result.stderr
    assert len(rows) == 2


async def test_always_only_where_the_question_offers_it(hermes_home, project):
    async with SessionStore.open() as store:
        request = await _question(store, project, command="rm -rf build", offer_always=False)
        listed = await approvals_cli(hermes_home, "list")
        refused = await approvals_cli(hermes_home, "allow", request.id, "--always")
        row = await store.get_approval(request.id)
        request.future.cancel()
    assert "[--always]" not in listed.stdout
    assert refused.returncode == 2 and "asks every time" in refused.stderr
    assert row.status == "pending"


async def test_the_listing_shows_no_secret(hermes_home, project):
    (hermes_home / "config.toml").write_text(f'[providers.openai]\napi_key = "{SECRET_KEY}"\n')
    async with SessionStore.open() as store:
        request = await _question(store, project, command=f"curl -H 'Authorization: Bearer {SECRET_KEY}' https://api.example")
        listed = await approvals_cli(hermes_home, "list")
        request.future.cancel()
    assert listed.returncode == 0 and "curl -H" in listed.stdout and "phone work" in listed.stdout
    assert SECRET_KEY not in listed.stdout + listed.stderr


async def test_without_a_store_there_is_nothing_to_answer(hermes_home):
    listed = await approvals_cli(hermes_home, "list")
    answered = await approvals_cli(hermes_home, "allow", "0123456789abcdef")
    assert listed.returncode == 0 and "No questions are waiting." in listed.stdout
    assert answered.returncode == 1 and "No approval" in answered.stderr
    assert not (hermes_home / "state.db").exists()


def _ageless(listing: str) -> str:
    return re.sub(r"\s*\d+[sm] ago", " <age>", listing)
