"""hermes-mcp runs the whole agent: commands (asked of the user by a human path), memory, skills,
the plan, session search and cron, the same tools an editor's session has."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from mcp_types import ElicitResult

from core.host.sandbox import status as sandbox_status
from core.store import SessionStore
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import BIN, ERAS, allow_projects, approvals_cli, call, connected, data, mcp_env
from toolsets import toolset

SKILL_BODY = "Tag the release with the date, then write release notes from the git log."


@pytest.fixture
def project(tmp_path, hermes_home) -> Path:
    """A project the user listed in [mcp] projects, with a project skill."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "marker.txt").write_text("the project's own marker file\n")
    skill = root / ".agents" / "skills" / "release" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(f"---\nname: release\ndescription: Cut a release of this project.\n---\n\n# Release\n\n{SKILL_BODY}\n")
    allow_projects(hermes_home, root)
    return root


def _tool_results(body: dict) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def _system(body: dict) -> str:
    content = body["messages"][0]["content"]
    return content if isinstance(content, str) else json.dumps(content)


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"HERMES_EDITOR_HOME": str(home), "HOME": str(home.parent / "user-home"), "PATH": os.environ["PATH"], "HERMES_QUIET": "1"}
    return subprocess.run([str(BIN / "hermes-editor"), *args], capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_task_runs_a_command_the_user_allows_writes_a_memory_and_uses_a_skill(hermes_home, project, mode):
    asked: list = []

    async def elicit(context, params):
        asked.append(params)
        return ElicitResult(action="accept", content={"decision": "allow"})

    script = [
        call("run_command", {"command": "pwd && cat marker.txt"}, "c1"),
        call("memory", {"action": "add", "text": "The project tags releases with the date."}, "c2"),
        call("skill_view", {"name": "release"}, "c3"),
        {"text": "Ran it, noted it, and read the release skill."},
    ]
    with ScriptedOpenAIServer(script) as model:
        async with connected(mcp_env(hermes_home, model.base_url), mode=mode, elicitation_callback=elicit) as client:
            view = data(await client.call_tool("ask", {"prompt": "look around and get ready to release", "cwd": str(project)}))
    assert view["status"] == "done", view
    assert view["reply"] == "Ran it, noted it, and read the release skill."
    assert [(s["tool"], s["status"]) for s in view["steps"]] == [
        ("run_command", "completed"),
        ("memory", "completed"),
        ("skill_view", "completed"),
    ]

    # The agent has every tool an editor's session has, and its prompt lists the project's skill.
    first = model.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == [t.name for t in toolset("editor")]
    assert "release" in _system(first) and "skill_view" in _system(first)

    # The command was asked of the user in the client's form, ran in the project, and its output reached the model.
    (question,) = asked
    assert "pwd && cat marker.txt" in question.message and str(project.resolve()) in question.message
    ran = _tool_results(model.requests[1])[-1]
    assert "exit code 0" in ran and str(project.resolve()) in ran and "the project's own marker file" in ran
    async with SessionStore.open() as store:
        assert await store.pending_approvals() == []

    # The memory entry is in the memory file every surface reads, and the CLI shows it.
    memory_file = hermes_home / "memories" / "MEMORY.md"
    assert "The project tags releases with the date." in memory_file.read_text()
    shown = _cli(hermes_home, "memory")
    assert shown.returncode == 0 and "The project tags releases with the date." in shown.stdout, shown.stderr

    # The skill's body reached the model.
    assert SKILL_BODY in _tool_results(model.requests[3])[-1]


@pytest.mark.parametrize("how", ["in the form", "with hermes-editor approvals deny"])
async def test_a_denied_command_does_not_run(hermes_home, project, how):
    async def deny(context, params):
        return ElicitResult(action="accept", content={"decision": "deny"})

    script = [call("run_command", {"command": "echo ran > ran.txt"}), {"text": "Left it."}]
    options = {"elicitation_callback": deny} if how == "in the form" else {}
    with ScriptedOpenAIServer(script) as model:
        async with connected(mcp_env(hermes_home, model.base_url), **options) as client:
            view = data(await client.call_tool("ask", {"prompt": "mark it", "cwd": str(project), "wait": 30}))
            if how != "in the form":
                assert view["status"] == "needs_approval", view
                (approval,) = view["approvals"]
                assert approval["command"] == "echo ran > ran.txt" and approval["tool"] == "run_command"
                assert not (project / "ran.txt").exists()
                denied = await approvals_cli(hermes_home, "deny", approval["approval_id"])
                assert denied.returncode == 0, denied.stderr
                view = data(await client.call_tool("task_wait", {"task_id": view["task_id"], "wait": 20}))
    assert view["status"] == "done", view
    assert not (project / "ran.txt").exists()
    assert "rejected" in _tool_results(model.requests[1])[-1]


async def test_the_mode_descriptions_tell_the_truth_about_commands(hermes_home, project):
    """accept-edits: a command the sandbox contains runs unasked (asks where there is no sandbox);
    one that needs the network asks; read-only refuses commands."""
    asked: list = []

    async def deny(context, params):
        asked.append(params.message)
        return ElicitResult(action="accept", content={"decision": "deny"})

    script = [
        call("run_command", {"command": "echo local > local.txt"}, "c1"),
        call("run_command", {"command": "echo online > online.txt", "network": True}, "c2"),
        {"text": "done"},
        call("run_command", {"command": "echo nope > readonly.txt"}, "c3"),
        {"text": "refused"},
    ]
    with ScriptedOpenAIServer(script) as model:
        async with connected(mcp_env(hermes_home, model.base_url), elicitation_callback=deny) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            instructions = client.instructions or ""
            edits = data(await client.call_tool("ask", {"prompt": "two commands", "cwd": str(project), "mode": "accept-edits"}))
            reads = data(await client.call_tool("ask", {"prompt": "one more", "cwd": str(project), "mode": "read-only"}))
    described = tools["ask"].input_schema["properties"]["mode"]["description"]
    assert "accept-edits: edits and sandboxed commands go ahead" in described and "ask: changes and commands ask" in described
    assert "runs commands in a sandbox" in instructions and "a change or command waits" in instructions
    assert edits["status"] == "done" and reads["status"] == "done"
    if sandbox_status().active:
        assert (project / "local.txt").read_text() == "local\n"
        assert len(asked) == 1 and "online.txt" in asked[0] and "network" in asked[0]
    else:
        assert not (project / "local.txt").exists()
        assert len(asked) == 2 and "local.txt" in asked[0]
    assert not (project / "online.txt").exists() and not (project / "readonly.txt").exists()
    assert "read-only" in _tool_results(model.requests[4])[-1]


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _until(predicate, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


async def test_a_background_command_outlives_its_task_and_ends_with_the_server(hermes_home, project):
    """Started by one task, read by the next task of the session, stopped when hermes-mcp exits."""
    marker = f"bg-{uuid.uuid4().hex[:12]}"

    async def allow(context, params):
        return ElicitResult(action="accept", content={"decision": "allow"})

    script = [
        call("run_command", {"command": f"echo serving; sleep 300 # {marker}", "background": True}, "c1"),
        {"text": "Started."},
        call("command_output", {"job": "1", "wait": 5}, "c2"),
        {"text": "Still serving."},
    ]
    with ScriptedOpenAIServer(script) as model:
        async with connected(mcp_env(hermes_home, model.base_url), elicitation_callback=allow) as client:
            first = data(await client.call_tool("ask", {"prompt": "start the server", "cwd": str(project)}))
            assert first["status"] == "done", first
            assert _processes_with(marker), "the background command runs on after its task"
            second = data(await client.call_tool("ask", {"prompt": "is it up?", "session_id": first["session_id"]}))
            assert second["status"] == "done", second
    assert "job 1" in _tool_results(model.requests[1])[-1]
    read = _tool_results(model.requests[3])[-1]
    assert read.startswith("running") and "serving" in read
    # The client closed stdin: hermes-mcp stopped the command itself on its way out (it logs so), nothing is left.
    _until(lambda: not _processes_with(marker), "the background command to end")
    log = (hermes_home / "logs" / "mcp.log").read_text()
    assert "stopped 1 background command" in log, log[-2000:]


async def test_a_task_schedules_a_job_the_user_approves(hermes_home, project):
    """The cron tool over MCP: adding a job asks the user first, and the job is the one the CLI lists."""
    asked: list = []

    async def allow(context, params):
        asked.append(params.message)
        return ElicitResult(action="accept", content={"decision": "allow"})

    script = [
        call("cron", {"action": "add", "schedule": "daily at 09:00", "prompt": "check the build", "name": "build check"}, "c1"),
        {"text": "Scheduled."},
    ]
    with ScriptedOpenAIServer(script) as model:
        async with connected(mcp_env(hermes_home, model.base_url), elicitation_callback=allow) as client:
            view = data(await client.call_tool("ask", {"prompt": "check the build every morning", "cwd": str(project)}))
    assert view["status"] == "done", view
    (question,) = asked
    assert "check the build" in question and "read-only" in question
    listed = _cli(hermes_home, "cron", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (job,) = json.loads(listed.stdout)
    assert job["name"] == "build check" and job["prompt"] == "check the build" and job["project"] == str(project.resolve())
    assert "Added job" in _tool_results(model.requests[1])[-1]


async def test_a_session_continued_in_another_folder_stops_the_background_commands_it_left(hermes_home, project):
    """The session reopened below its project gets a fresh host; the old one's commands end, not leak."""
    marker = f"bg-{uuid.uuid4().hex[:12]}"
    sub = project / "sub"
    sub.mkdir()

    async def allow(context, params):
        return ElicitResult(action="accept", content={"decision": "allow"})

    script = [
        call("run_command", {"command": f"sleep 300 # {marker}", "background": True}, "c1"),
        {"text": "Started."},
        {"text": "Here now."},
    ]
    with ScriptedOpenAIServer(script) as model:
        async with connected(mcp_env(hermes_home, model.base_url), elicitation_callback=allow) as client:
            first = data(await client.call_tool("ask", {"prompt": "start it", "cwd": str(project)}))
            assert first["status"] == "done" and _processes_with(marker), first
            moved = data(await client.call_tool("ask", {"prompt": "go on", "session_id": first["session_id"], "cwd": str(sub)}))
            assert moved["status"] == "done" and moved["cwd"] == str(sub.resolve()), moved
            _until(lambda: not _processes_with(marker), "the left-behind background command to end")
