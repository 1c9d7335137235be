"""execute_code end to end: the real hermes-acp, the scripted model, the ACP SDK client; the script
runs in bubblewrap and calls the agent's tools through the hermes_tools module."""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path

import acp
import pytest

from core.host.sandbox import status
from tests.acp_harness import Client, agent_env, running_agent, until
from tests.fakes.openai_server import ScriptedOpenAIServer
from toolsets.code import CLIENT, client_source


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("alpha\nbeta\n")
    (root / "b.txt").write_text("gamma\n")
    return root


@pytest.fixture(autouse=True)
def sandbox() -> None:
    assert status().active, f"no sandbox: {status().detail}. Install bubblewrap (apt-get install bubblewrap)."


def _script(code: str, call_id: str = "call_1") -> dict:
    return {"tool_calls": [{"id": call_id, "name": "execute_code", "arguments": {"code": textwrap.dedent(code)}}]}


def _tool_result(server: ScriptedOpenAIServer, request: int = 1) -> str:
    body = server.requests[request]["body"] if "body" in server.requests[request] else server.requests[request]
    return [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]


def _nested(client: Client, parent: str = "call_1") -> dict[str, list]:
    """The script's tool calls as the editor saw them, by call id."""
    calls: dict[str, list] = {}
    for update in client.tool_updates():
        if update.tool_call_id.startswith(parent + "."):
            calls.setdefault(update.tool_call_id, []).append(update)
    return calls


async def _session(conn, project: Path, mode: str | None = None) -> str:
    sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
    if mode is not None:
        await conn.set_session_mode(session_id=sid, mode_id=mode)
    return sid


def test_the_shipped_client_module_is_the_generated_one():
    assert CLIENT.read_text(encoding="utf-8") == client_source(), "regenerate it: .venv/bin/python -m toolsets.code"


async def test_a_script_reads_two_files_and_its_reads_show_in_the_editor(hermes_home, project):
    code = """
        from hermes_tools import read_file, glob
        found = glob("*.txt")
        a = read_file("a.txt")
        b = read_file("b.txt")
        print("summary:", "b.txt" in found, "alpha" in a, "gamma" in b, len(a.splitlines()) + len(b.splitlines()))
    """
    script = [_script(code), {"text": "Both files read."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("summarise the text files")])
    assert response.stop_reason == "end_turn"
    # Ask mode asked for the script itself (and for nothing else: reads in the project need no question).
    (question,) = client.permission_requests
    assert question.tool_call_id == "call_1" and "Python script" in question.title
    # The question shows the script, as the person answering it needs to see it.
    asking = question.content[0].content.text
    assert 'a = read_file("a.txt")' in asking and "project read-only, no network" in asking
    result = _tool_result(server)
    assert result.startswith("exit code 0; 3 tool calls (glob, read_file ×2)"), result
    assert "summary: True True True 3" in result
    nested = _nested(client)
    assert list(nested) == ["call_1.1", "call_1.2", "call_1.3"]
    started = [updates[0] for updates in nested.values()]
    assert [u.session_update for u in started] == ["tool_call"] * 3
    assert [u.raw_input for u in started[1:]] == [{"path": "a.txt"}, {"path": "b.txt"}]
    assert all(updates[-1].status == "completed" for updates in nested.values())
    assert client.tool_updates("call_1")[-1].status == "completed"


async def test_a_script_writes_a_file_once_the_user_allows_it(hermes_home, project):
    code = """
        from hermes_tools import write_file
        print(write_file("notes.md", "- from a script\\n"))
    """
    script = [_script(code), {"text": "Written."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer=["allow_once", "allow_once"])
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("write notes")])
    assert (project / "notes.md").read_text() == "- from a script\n"
    script_question, write_question = client.permission_requests
    assert script_question.tool_call_id == "call_1"
    # The write asked on its own call, with its diff, as a call of the model's own would.
    assert write_question.tool_call_id == "call_1.1"
    (diff,) = write_question.content
    assert diff.type == "diff" and diff.path == str(project / "notes.md") and diff.new_text == "- from a script\n"
    finished = _nested(client)["call_1.1"][-1]
    assert finished.status == "completed" and finished.content[0].type == "diff"
    assert _tool_result(server).startswith("exit code 0; 1 tool call (write_file)")


async def test_a_declined_write_is_an_error_the_script_can_catch(hermes_home, project):
    code = """
        from hermes_tools import ToolError, edit_file
        try:
            edit_file("a.txt", old_string="alpha", new_string="ALPHA")
        except ToolError as exc:
            print("declined:", str(exc)[:40])
    """
    script = [_script(code), {"text": "Left it."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer=["allow_once", "reject_once"])
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("shout alpha")])
    assert (project / "a.txt").read_text() == "alpha\nbeta\n"
    assert len(client.permission_requests) == 2
    assert _nested(client)["call_1.1"][-1].status == "failed"
    result = _tool_result(server)
    assert result.startswith("exit code 0; 1 tool call (edit_file)") and "declined: The user declined" in result


async def test_a_looping_script_is_stopped_at_the_time_limit(hermes_home, project):
    (hermes_home / "config.toml").write_text("[code]\ntimeout = 1.5\n")
    script = [_script("while True:\n    print('looping ' * 10)\n"), {"text": "It looped."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project, "auto")
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("loop")])
    assert response.stop_reason == "end_turn"
    assert client.permission_requests == []  # auto mode, in the sandbox
    result = _tool_result(server)
    assert result.startswith("timed out after 1.5s and was stopped") and "looping" in result
    # Its endless output was kept to the head and the tail, with a marker between.
    assert "bytes of output omitted ...]" in result and len(result) < 21_000
    assert client.tool_updates("call_1")[-1].status == "failed"


async def test_the_sandbox_keeps_a_script_off_the_network_and_out_of_files(hermes_home, project, tmp_path):
    outside = tmp_path / "user-home" / "stolen.txt"
    code = f"""
        import socket
        for label, act in [
            ("network", lambda: socket.create_connection(("1.1.1.1", 80), timeout=3)),
            ("outside", lambda: open({str(outside)!r}, "w").write("x")),
            ("inside", lambda: open("direct.txt", "w").write("x")),
        ]:
            try:
                act()
                print(label, "worked")
            except OSError as exc:
                print(label, "failed", type(exc).__name__)
    """
    script = [_script(code), {"text": "Checked."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project, "auto")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("try things")])
    result = _tool_result(server)
    assert "network failed" in result and "outside failed" in result and "inside failed" in result, result
    assert not outside.exists() and not (project / "direct.txt").exists()


async def test_without_a_sandbox_a_script_asks_even_in_auto_mode(hermes_home, project):
    code = "from hermes_tools import read_file\nprint(read_file('b.txt'))\n"
    script = [_script(code), {"text": "Not run."}, _script(code, "call_2"), {"text": "Run."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer=["reject_once", "allow_once"])
        env = agent_env(hermes_home, server.base_url, extra={"HERMES_SANDBOX": "off"})
        async with running_agent(client, env) as (conn, _, _):
            sid = await _session(conn, project, "auto")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("read b")])
            await conn.prompt(session_id=sid, prompt=[acp.text_block("read b, allowed")])
    first, second = client.permission_requests
    assert (first.tool_call_id, second.tool_call_id) == ("call_1", "call_2")
    assert "no sandbox" in first.content[0].content.text
    # Declined: the script never ran, so it made no call.
    assert client.tool_updates("call_1")[-1].status == "failed" and _nested(client, "call_1") == {}
    # Allowed: it ran outside the sandbox and its call still went through the agent.
    assert list(_nested(client, "call_2")) == ["call_2.1"]
    assert "gamma" in _tool_result(server, 3)


async def test_cancel_stops_a_running_script(hermes_home, project):
    marker = f"hermes-code-cancel-{os.getpid()}"
    code = f"""
        import subprocess, time
        from hermes_tools import list_dir
        subprocess.Popen(["sh", "-c", "sleep 30; true", {marker!r}])
        list_dir(".")
        time.sleep(30)
    """
    script = [_script(code), {"text": "never"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project, "auto")
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("wait")]))
            await until(lambda: any(u[-1].status == "completed" for u in _nested(client).values()), what="the script's list_dir")
            await until(lambda: running(marker) or turn.done(), what="the script's child to start")
            await conn.cancel(session_id=sid)
            response = await asyncio.wait_for(turn, 10)  # the script alone would take 30 s
            await until(lambda: not running(marker), timeout=10, what="the cancelled script's processes to be gone")
    assert response.stop_reason == "cancelled"
    assert client.tool_updates("call_1")[-1].status == "failed"


def running(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


async def test_cancel_while_a_scripts_edit_waits_for_the_user(hermes_home, project):
    code = "from hermes_tools import write_file\nwrite_file('late.md', 'never\\n')\n"
    script = [_script(code), {"text": "never"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer=["allow_once", "wait"])
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("write late")]))
            await until(lambda: len(client.permission_requests) == 2, what="the script's write to ask")
            await conn.cancel(session_id=sid)
            response = await asyncio.wait_for(turn, 10)
    assert response.stop_reason == "cancelled"
    assert not (project / "late.md").exists()
    assert _nested(client)["call_1.1"][-1].status == "failed"
    assert client.tool_updates("call_1")[-1].status == "failed"
