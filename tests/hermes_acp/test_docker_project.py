"""A ``[projects.NAME] host = "docker"`` project through the real hermes-acp process, a scripted
model and the ACP client, against a real Docker daemon: file tools work on the mounted folder
with diffs, approvals, stale-write refusal and undo; commands run in the session's container
(never in the editor's terminal); a background job, a cancelled command; the container goes
when the session ends.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import acp
import pytest

from tests.acp_harness import Client, agent_env, running_agent, until
from tests.docker_support import busybox_image, containers_of
from tests.fakes.openai_server import ScriptedOpenAIServer

UID = 1234


def _call(name: str, args: dict, call_id: str) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": args}]}


def _results(server) -> dict[str, str]:
    """Tool results by call id, from the last request the model got."""
    last = server.requests[-1].get("body", server.requests[-1])
    return {m["tool_call_id"]: m["content"] for m in last["messages"] if m["role"] == "tool"}


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "shop"
    root.mkdir()
    (root / "notes.txt").write_text("price = 10\n")
    os.chown(root, UID, UID)
    os.chown(root / "notes.txt", UID, UID)
    # The server runs as root here, so the files it writes are root's; the container's user
    # (the folder's owner) may still replace them. Run as the folder's owner, nothing is needed.
    root.chmod(0o777)
    return root


async def test_a_docker_project_end_to_end(hermes_home, project):
    image = busybox_image()
    name = f"shop-{uuid.uuid4().hex[:8]}"
    (hermes_home / "config.toml").write_text(f'[projects.{name}]\npath = "{project}"\nhost = "docker"\nimage = "{image}"\n')
    script = [
        # turn 1: read, edit (a diff to approve), write
        _call("read_file", {"path": "notes.txt"}, "r1"),
        _call("edit_file", {"path": "notes.txt", "old_string": "price = 10", "new_string": "price = 12"}, "e1"),
        _call("write_file", {"path": "added.txt", "content": "new file\n"}, "w1"),
        {"text": "edited"},
        # turn 2 is /undo
        # turn 3: a command in the container, a change behind the agent's back, a refused edit, a background job
        _call("run_command", {"command": "readlink /bin/sh; id -u; hostname; cat notes.txt; echo 42 > from-container.txt"}, "c1"),
        _call("read_file", {"path": "notes.txt"}, "r2"),
        _call("run_command", {"command": "printf 'price = 10\\nextra = 1\\n' > next.txt && mv next.txt notes.txt"}, "c2"),
        _call("edit_file", {"path": "notes.txt", "old_string": "price = 10", "new_string": "price = 11"}, "e2"),
        _call("run_command", {"command": "echo bg-start; until [ -f go ]; do sleep 0.05; done; echo bg-done", "background": True}, "b1"),
        _call("command_output", {"job": "1", "wait": 5}, "o1"),
        {"text": "commands ran"},
        # turn 4: cancelled while its command runs
        _call("run_command", {"command": "touch started; exec sleep 120", "timeout": 600}, "s1"),
        # turn 5: is the sleeper gone?
        _call("run_command", {"command": "ps -o args | grep -c '[s]leep 120' || true"}, "p1"),
        {"text": "checked"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("raise the price and add a file")])
            assert (project / "notes.txt").read_text() == "price = 12\n" and (project / "added.txt").read_text() == "new file\n"
            edit = next(r for r in client.permission_requests if r.tool_call_id == "e1")
            assert edit.content[0].type == "diff" and edit.content[0].path == str(project / "notes.txt")
            assert edit.content[0].old_text == "price = 10\n" and edit.content[0].new_text == "price = 12\n"
            assert containers_of(name) == [], "no command yet, no container"

            await conn.prompt(session_id=sid, prompt=[acp.text_block("/undo")])
            assert (project / "notes.txt").read_text() == "price = 10\n" and not (project / "added.txt").exists()

            await conn.prompt(session_id=sid, prompt=[acp.text_block("run things")])
            results = _results(server)
            lines = results["c1"].splitlines()
            assert lines[:3] == ["exit code 0", "/bin/busybox", str(UID)], results["c1"]
            (container,) = containers_of(name)
            assert lines[3] == container.id[:12] and lines[4] == "price = 10"
            assert (project / "from-container.txt").read_text() == "42\n"
            assert "changed since you last read it" in results["e2"], "a change made in the container is seen"
            assert (project / "notes.txt").read_text() == "price = 10\nextra = 1\n"
            assert results["o1"].startswith("running\nbg-start"), results["o1"]
            assert client.reads == [] and client.writes == [] and client.terminals == {}, "the editor's files and terminal are not used"
            started = next(u for u in client.tool_updates("c1") if u.session_update == "tool_call")
            assert started.title.endswith(f"(docker: {image})"), started.title

            (project / "go").touch()
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block("sleep")]))
            await until(lambda: (project / "started").exists(), timeout=30, what="the command to start in the container")
            await conn.cancel(session_id=sid)
            assert (await turn).stop_reason == "cancelled"

            await conn.prompt(session_id=sid, prompt=[acp.text_block("is it gone?")])
            assert _results(server)["p1"] == "exit code 0\n0"
            assert [c.status for c in containers_of(name)] == ["running"]
    await until(lambda: containers_of(name) == [], timeout=30, what="the session's container to be removed")


async def test_a_local_project_still_uses_the_editors_files_and_terminal(hermes_home, project):
    (hermes_home / "config.toml").write_text(f'[projects.mine]\npath = "{project}"\n')
    script = [
        _call("read_file", {"path": "notes.txt"}, "r1"),
        _call("run_command", {"command": "echo from-the-editor"}, "c1"),
        {"text": "done"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("look")])
    assert client.reads == [str(project / "notes.txt")] and len(client.terminals) == 1
    assert "from-the-editor" in _results(server)["c1"]
    started = next(u for u in client.tool_updates("c1") if u.session_update == "tool_call")
    assert "docker" not in started.title
