"""config.toml's MCP servers in hermes-acp sessions: their tools reach the model beside the editor's,
the editor's server wins a name clash, and a server that dies is announced, fails its calls
readably, reconnects, and is announced again."""

from __future__ import annotations

import os
import signal
import sys

import acp
from acp.schema import EnvVariable, McpServerStdio

from tests.acp_harness import ROOT, Client, agent_env, running_agent, until
from tests.core.test_mcp_reconnect import _HttpFake
from tests.fakes.openai_server import ScriptedOpenAIServer


def _body(request: dict) -> dict:
    return request.get("body", request)


def _tool_results(request: dict) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in _body(request)["messages"] if m["role"] == "tool"}


def _running_with(argument: str) -> list[int]:
    """Processes with ``argument`` on their command line."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if argument.encode() in handle.read().split(b"\0"):
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def _call(call_id: str, tool: str, **arguments) -> dict:
    return {"id": call_id, "name": tool, "arguments": arguments}


async def test_config_servers_join_sessions_and_announce_a_drop_and_the_return(hermes_home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    gate = tmp_path / "keep-cfg-down"
    remote = _HttpFake(tmp_path)
    python, fake = sys.executable, "tests.fakes.mcp_server"
    (hermes_home / "config.toml").write_text(
        f"""
[mcp_servers.cfg]
command = "{python}"
args = ["-m", "{fake}", "--down-while", "{gate}"]
env = {{ PYTHONPATH = "{ROOT}" }}

[mcp_servers.fake]
command = "{python}"
args = ["-m", "{fake}"]
env = {{ PYTHONPATH = "{ROOT}", FAKE_GREETING = "from config.toml" }}

[mcp_servers.remote]
url = "{remote.url}"
headers = {{ Authorization = "Bearer ${{HERMES_TEST_REMOTE_TOKEN}}" }}

[mcp_servers.off]
command = "/no/such/server"
enabled = false
""",
        encoding="utf-8",
    )
    editor_fake = McpServerStdio(
        name="fake",
        command=python,
        args=["-m", fake],
        env=[EnvVariable(name="PYTHONPATH", value=str(ROOT)), EnvVariable(name="FAKE_GREETING", value="from the editor")],
    )
    script = [
        {
            "tool_calls": [
                _call("p1", "mcp__cfg__pid"),
                _call("g1", "mcp__fake__get_env", name="FAKE_GREETING"),
                _call("r1", "mcp__remote__echo", text="over http"),
            ]
        },
        {"text": "three servers answered"},
        {"tool_calls": [_call("e1", "mcp__cfg__echo", text="are you there")]},
        {"text": "cfg is down"},
        {"tool_calls": [_call("e2", "mcp__cfg__echo", text="welcome back")]},
        {"text": "cfg is back"},
    ]
    log = hermes_home / "logs" / "acp.log"
    env = agent_env(hermes_home, None, extra={"HERMES_TEST_REMOTE_TOKEN": "remote-token-0123456789"})
    remote.start()
    try:
        with ScriptedOpenAIServer(script) as server:
            client = Client(answer="allow_once")
            env.update(agent_env(hermes_home, server.base_url))
            async with running_agent(client, env) as (conn, _, _):
                sid = (await conn.new_session(cwd=str(project), mcp_servers=[editor_fake])).session_id

                first = await conn.prompt(session_id=sid, prompt=[acp.text_block("ask every server")])
                assert first.stop_reason == "end_turn"
                offered = {t["function"]["name"] for t in _body(server.requests[0])["tools"]}
                assert {"mcp__cfg__pid", "mcp__fake__get_env", "mcp__remote__echo", "read_file"} <= offered
                assert not any(name.startswith("mcp__off__") for name in offered), "a disabled server is not connected"
                results = _tool_results(server.requests[1])
                pid = int(results["p1"])
                assert results["g1"] == "from the editor", "the editor's server replaces config.toml's of the same name"
                assert results["r1"] == "over http"
                assert "MCP server" not in client.text(), "nothing to report while every server is up"

                gate.touch()  # cfg's restarts fail until the gate is removed
                os.kill(pid, signal.SIGKILL)
                # No turn runs: the thread is told at once.
                await until(lambda: "**Note:** MCP server 'cfg' is down: its process ended" in client.text(), 30, "the drop notice")
                second = await conn.prompt(session_id=sid, prompt=[acp.text_block("try cfg again")])
                assert second.stop_reason == "end_turn"
                assert client.tool_updates("e1")[-1].status == "failed"
                error = _tool_results(server.requests[3])["e1"]
                assert "MCP server 'cfg' is down" in error and "reconnecting in the background" in error

                gate.unlink()
                await until(lambda: "**Note:** MCP server 'cfg' is back (reconnected;" in client.text(), 60, "the return notice")
                third = await conn.prompt(session_id=sid, prompt=[acp.text_block("and now?")])
                assert third.stop_reason == "end_turn"
                assert "MCP server 'cfg' is back" in log.read_text()
                assert client.tool_updates("e2")[-1].status == "completed"
                assert _tool_results(server.requests[5])["e2"] == "welcome back"
                assert client.text().count("MCP server 'cfg' is down") == 1, "each change is told once"
                assert client.text().count("MCP server 'cfg' is back") == 1
            # hermes-acp has exited: config.toml's servers went with it.
            await until(lambda: not _running_with(str(gate)), 30, "cfg's server process to end")
    finally:
        remote.stop()
    assert "remote-token-0123456789" not in log.read_text()
