"""The agent over MCP: ask, tasks, progress, cancel, approvals by elicitation, by the user's terminal and
(with --trust-client-approvals) by tool, in both eras."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_types import ElicitResult

from core.store import SessionStore
from hermes_mcp.follow import MAX_WAIT
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import ERAS, SECRET_KEY, allow_projects, approvals_cli, call, connected, data, error_text, mcp_env

TRUST = ("--trust-client-approvals",)


@pytest.fixture
def project(tmp_path, hermes_home) -> Path:
    """A project the user listed in [mcp] projects."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("def greet():\n    return 'hi'\n")
    allow_projects(hermes_home, root)
    return root


def _last_user_text(body: dict) -> str:
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


@pytest.mark.parametrize("mode", ERAS)
async def test_ask_returns_the_reply_and_persists_the_session(hermes_home, project, mode):
    script = [{"text": "Hello from the scripted model.", "chunk_size": 5}]
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value, total, message):
        progress.append((value, message))

    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url), mode=mode) as client:
            result = await client.call_tool("ask", {"prompt": "say hello", "cwd": str(project)}, progress_callback=on_progress)
    view = data(result)
    assert view["status"] == "done" and view["stop_reason"] == "end_turn"
    assert view["reply"] == "Hello from the scripted model."
    assert view["changed_files"] == [] and view["approvals"] == []
    assert _last_user_text(server.requests[0]) == "say hello"
    assert progress and progress[-1][1] == "Task done"
    values = [v for v, _ in progress]
    assert values == sorted(values), "progress must increase"
    async with SessionStore.open() as store:
        record = await store.get_session(view["session_id"])
        assert record is not None and record.surface == "mcp" and record.cwd == str(project.resolve())
        assert [m.message.kind for m in await store.messages(record.id)] == ["user", "assistant"]


async def test_task_start_returns_at_once_and_task_wait_follows(hermes_home, project):
    script = [{"text": "Slow but sure.", "chunk_size": 2, "delay": 0.05}]
    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            started = data(await client.call_tool("task_start", {"prompt": "take your time", "cwd": str(project)}))
            assert started["status"] == "running" and started["task_id"]
            assert "task_wait" in started["next"]
            status = data(await client.call_tool("task_status", {"task_id": started["task_id"]}))
            assert status["session_id"] == started["session_id"]
            waited = data(await client.call_tool("task_wait", {"task_id": started["task_id"], "wait": 20}))
    assert waited["status"] == "done"
    assert waited["reply"] == "Slow but sure."
    assert waited["elapsed_seconds"] > 0


async def test_task_wait_returns_progress_so_far_when_its_time_is_up(hermes_home, project):
    with ScriptedOpenAIServer([{"hang": True}]) as server:
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            started = data(await client.call_tool("task_start", {"prompt": "never ends", "cwd": str(project)}))
            waited = data(await client.call_tool("task_wait", {"task_id": started["task_id"], "wait": 1}))
            cancelled = data(await client.call_tool("task_cancel", {"task_id": started["task_id"]}))
    assert waited["status"] == "running" and waited["elapsed_seconds"] >= 1, "it waited its second, then said how far it got"
    assert cancelled["status"] == "cancelled" and cancelled["stop_reason"] == "cancelled"


async def test_changed_files_come_back_as_unified_diffs(hermes_home, project):
    script = [
        call("write_file", {"path": "notes/todo.md", "content": "- ship it\n"}),
        call("edit_file", {"path": "app.py", "old_string": "'hi'", "new_string": "'hello'"}, "call_2"),
        {"text": "Wrote the todo and fixed the greeting."},
    ]
    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            view = data(await client.call_tool("ask", {"prompt": "todo + greeting", "cwd": str(project), "mode": "accept-edits"}))
    assert view["status"] == "done", view
    assert (project / "notes" / "todo.md").read_text() == "- ship it\n"
    assert "'hello'" in (project / "app.py").read_text()
    files = {f["path"]: f["diff"] for f in view["changed_files"]}
    assert set(files) == {str(project.resolve() / "notes/todo.md"), str(project.resolve() / "app.py")}
    new = files[str(project.resolve() / "notes/todo.md")]
    assert new.startswith("--- /dev/null\n+++ b/notes/todo.md\n") and "+- ship it\n" in new
    edit = files[str(project.resolve() / "app.py")]
    assert "--- a/app.py\n+++ b/app.py\n" in edit and "-    return 'hi'\n" in edit and "+    return 'hello'\n" in edit
    assert [s["status"] for s in view["steps"]] == ["completed", "completed"]


@pytest.mark.parametrize("mode", ERAS)
async def test_approval_is_asked_through_elicitation(hermes_home, project, mode):
    asked: list = []

    async def elicit(context, params):
        asked.append(params)
        return ElicitResult(action="accept", content={"decision": "allow"})

    script = [call("write_file", {"path": "todo.md", "content": "- ship it\n"}), {"text": "Created."}]
    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url), mode=mode, elicitation_callback=elicit) as client:
            view = data(await client.call_tool("ask", {"prompt": "add a todo", "cwd": str(project)}))
    assert view["status"] == "done", view
    assert (project / "todo.md").read_text() == "- ship it\n"
    (question,) = asked
    assert "todo.md" in question.message and "+- ship it" in question.message
    assert set(question.requested_schema["properties"]) == {"decision"}
    async with SessionStore.open() as store:
        assert await store.pending_approvals() == []


@pytest.mark.parametrize("answer, expected", [("decline", "rejected"), ("deny", "rejected")])
async def test_denied_by_elicitation_leaves_the_file(hermes_home, project, answer, expected):
    async def elicit(context, params):
        if answer == "decline":
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content={"decision": "deny"})

    script = [call("write_file", {"path": "app.py", "content": "oops\n"}), {"text": "Left it alone."}]
    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url), elicitation_callback=elicit) as client:
            view = data(await client.call_tool("ask", {"prompt": "overwrite", "cwd": str(project)}))
    assert view["status"] == "done" and view["changed_files"] == []
    assert (project / "app.py").read_text() == "def greet():\n    return 'hi'\n"
    tool_results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert expected in tool_results[0]["content"]


@pytest.mark.parametrize("mode", ERAS)
async def test_without_elicitation_the_task_waits_for_the_user_in_a_terminal(hermes_home, project, mode):
    script = [call("write_file", {"path": "todo.md", "content": "- ship it\n"}), {"text": "Created."}]
    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url), mode=mode) as client:
            view = data(await client.call_tool("ask", {"prompt": "add a todo", "cwd": str(project), "wait": 30}))
            assert view["status"] == "needs_approval"
            (approval,) = view["approvals"]
            assert f"hermes-editor approvals allow {approval['approval_id']}" in view["next"]
            assert "approval_respond" not in view["next"] and "never you" in view["next"]
            assert not (project / "todo.md").exists()
            listed = await approvals_cli(hermes_home, "list")
            assert approval["approval_id"] in listed.stdout and "todo.md" in listed.stdout
            answered = await approvals_cli(hermes_home, "allow", approval["approval_id"])
            assert answered.returncode == 0, answered.stderr
            done = data(await client.call_tool("task_wait", {"task_id": view["task_id"], "wait": 20}))
    assert done["status"] == "done"
    assert (project / "todo.md").read_text() == "- ship it\n"
    async with SessionStore.open() as store:
        row = await store.get_approval(approval["approval_id"])
    assert row.status == "allowed" and row.decided_by == "cli"


@pytest.mark.parametrize("mode", ERAS)
async def test_with_trust_client_approvals_approval_respond_unblocks_its_own_task(hermes_home, project, mode):
    script = [call("write_file", {"path": "todo.md", "content": "- ship it\n"}), {"text": "Created."}]
    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url), mode=mode, args=TRUST) as client:
            view = data(await client.call_tool("ask", {"prompt": "add a todo", "cwd": str(project), "wait": MAX_WAIT}))
            assert view["status"] == "needs_approval"
            assert view["elapsed_seconds"] < MAX_WAIT, "a task blocked on the user is reported at once, not when the wait runs out"
            (approval,) = view["approvals"]
            assert approval["task_id"] == view["task_id"] and approval["can_always"] is True
            assert "+- ship it" in approval["diff"] and approval["approval_id"] in view["next"]
            assert "approval_respond" in view["next"] and "never you" in view["next"]
            listed = data(await client.call_tool("approvals_list", {}))["approvals"]
            assert [a["approval_id"] for a in listed] == [approval["approval_id"]]
            assert listed[0]["surface"] == "mcp" and listed[0]["diff"] == approval["diff"]
            assert not (project / "todo.md").exists()
            answer = data(await client.call_tool("approval_respond", {"approval_id": approval["approval_id"], "decision": "allow"}))
            assert answer == {"approval_id": approval["approval_id"], "outcome": "answered", "decision": "allow", "note": ""}
            again = data(await client.call_tool("approval_respond", {"approval_id": approval["approval_id"], "decision": "deny"}))
            assert again["outcome"] == "already_answered" and again["decision"] == "allow"
            done = data(await client.call_tool("task_wait", {"task_id": view["task_id"], "wait": 20}))
    assert done["status"] == "done"
    assert (project / "todo.md").read_text() == "- ship it\n"


async def test_allow_always_from_the_terminal_is_remembered_for_the_project(hermes_home, project):
    script = [
        call("write_file", {"path": "a.txt", "content": "a\n"}, "c1"),
        call("write_file", {"path": "b.txt", "content": "b\n"}, "c2"),
        {"text": "both"},
    ]
    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            view = data(await client.call_tool("ask", {"prompt": "two files", "cwd": str(project)}))
            (approval,) = view["approvals"]
            answered = await approvals_cli(hermes_home, "allow", approval["approval_id"], "--always")
            assert answered.returncode == 0, answered.stderr
            done = data(await client.call_tool("task_wait", {"task_id": view["task_id"], "wait": 20}))
    assert done["status"] == "done" and done["approvals"] == []
    assert (project / "b.txt").read_text() == "b\n"
    async with SessionStore.open() as store:
        rules = await store.approval_rules(str(project.resolve()))
    assert ("write_file", "*", "allow") in rules


async def test_a_task_continues_a_stored_session(hermes_home, project):
    script = [{"text": "First answer."}, {"text": "Second answer."}]
    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            first = data(await client.call_tool("ask", {"prompt": "remember 42", "cwd": str(project)}))
        # A new server process: the conversation comes from the store.
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            second = data(await client.call_tool("ask", {"prompt": "what number?", "session_id": first["session_id"]}))
    assert second["session_id"] == first["session_id"] and second["cwd"] == str(project.resolve())
    texts = [m.get("content") for m in server.requests[1]["messages"]]
    assert "remember 42" in str(texts) and "First answer." in str(texts)


async def test_errors_the_model_can_act_on(hermes_home, project):
    with ScriptedOpenAIServer([]) as server:
        async with connected(mcp_env(hermes_home, server.base_url), args=TRUST) as client:
            relative = error_text(await client.call_tool("task_start", {"prompt": "x", "cwd": "project"}))
            missing = error_text(await client.call_tool("task_start", {"prompt": "x"}))
            auto = error_text(await client.call_tool("task_start", {"prompt": "x", "cwd": str(project), "mode": "auto"}))
            unknown = error_text(await client.call_tool("task_start", {"prompt": "x", "session_id": "nope"}))
            bad_id = error_text(await client.call_tool("approval_respond", {"approval_id": "nope", "decision": "allow"}))
    assert "absolute path" in relative
    assert "cwd is required" in missing
    assert "--allow-auto" in auto
    assert "No session 'nope'" in unknown
    assert "No approval 'nope'" in bad_id


async def test_no_model_configured_says_how_to_set_one_up(hermes_home, project):
    async with connected(mcp_env(hermes_home)) as client:
        text = error_text(await client.call_tool("ask", {"prompt": "hi", "cwd": str(project)}))
        # History works without a model.
        assert data(await client.call_tool("sessions_list", {}))["sessions"] == []
    assert "No model is configured" in text and "hermes-editor setup" in text


async def test_model_errors_reach_the_client_without_the_key(hermes_home, project):
    with ScriptedOpenAIServer([{"error": 401}]) as server:
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            view = data(await client.call_tool("ask", {"prompt": "hi", "cwd": str(project)}))
    assert view["status"] == "failed" and view["error"]
    assert SECRET_KEY not in str(view)
    log = (hermes_home / "logs" / "mcp.log").read_text()
    assert SECRET_KEY not in log and SECRET_KEY not in (hermes_home / "stderr.log").read_text()


@pytest.mark.parametrize("mode", ERAS)
async def test_cwd_defaults_to_the_clients_root(hermes_home, tmp_path, mode):
    opened = tmp_path / "opened"
    opened.mkdir()
    with ScriptedOpenAIServer([{"text": "Here."}]) as server:
        async with connected(mcp_env(hermes_home, server.base_url), mode=mode, roots=[opened]) as client:
            view = data(await client.call_tool("ask", {"prompt": "where am I?"}))
    assert view["status"] == "done" and view["cwd"] == str(opened.resolve())


async def test_big_changes_and_replies_stay_under_100_kb(hermes_home, project):
    big = "".join(f"line {n} {'x' * 60}\n" for n in range(2000))  # ~135 KB each
    # A window that holds the three writes whole: within 128k tokens the last would be
    # compressed first, and the summary request would take one of the scripted answers.
    config = hermes_home / "config.toml"
    config.write_text(config.read_text() + "\n[providers.openai]\ncontext_window = 1000000\n")
    script = [{**call("write_file", {"path": f"big{n}.txt", "content": big}, f"c{n}"), "chunk_size": 1_000_000} for n in (1, 2, 3)] + [
        {"text": "y" * 200_000, "chunk_size": 20_000}
    ]
    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            result = await client.call_tool("ask", {"prompt": "big files", "cwd": str(project), "mode": "accept-edits"})
    view = data(result)
    wire = len(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True)))
    assert wire < 100_000, wire
    assert view["status"] == "done" and len(view["changed_files"]) == 3
    assert all(f["truncated"] and f["diff"].startswith("--- /dev/null") for f in view["changed_files"])
    assert view["reply_truncated"] and view["reply"].endswith("y" * 100) and "session_read" in view["reply"]
    assert (project / "big3.txt").read_text() == big


async def test_a_call_given_up_by_the_client_leaves_the_task_running(hermes_home, project):
    with ScriptedOpenAIServer([{"hang": True}]) as server:
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            started = data(await client.call_tool("task_start", {"prompt": "long", "cwd": str(project)}))
            with pytest.raises(Exception):
                await client.call_tool("task_wait", {"task_id": started["task_id"], "wait": 30}, read_timeout_seconds=1)
            status = data(await client.call_tool("task_status", {"task_id": started["task_id"]}))
            cancelled = data(await client.call_tool("task_cancel", {"task_id": started["task_id"]}))
    assert status["status"] == "running"
    assert cancelled["status"] == "cancelled"
