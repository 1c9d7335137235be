"""MCP servers passed in session/new join the session's tools; a broken one is reported."""

from __future__ import annotations

import sys

import acp
from acp.schema import EnvVariable, McpServerStdio

from tests.acp_harness import ROOT, Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer


def _fake_server(name: str, *extra: str) -> McpServerStdio:
    return McpServerStdio(
        name=name,
        command=sys.executable,
        args=["-m", "tests.fakes.mcp_server", *extra],
        env=[EnvVariable(name="PYTHONPATH", value=str(ROOT))],
    )


async def test_mcp_tools_join_the_session_and_broken_servers_are_reported(hermes_home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    script = [
        {"tool_calls": [{"id": "m1", "name": "mcp__fake__echo", "arguments": {"text": "ping", "times": 2}}]},
        {"tool_calls": [{"id": "m2", "name": "mcp__fake__write_note", "arguments": {"note": "remember"}}]},
        {"text": "echoed and noted"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            assert conn.init_response.agent_capabilities.mcp_capabilities.http is True
            sid = (
                await conn.new_session(
                    cwd=str(project),
                    mcp_servers=[_fake_server("fake"), McpServerStdio(name="broken", command="/no/such/binary", args=[], env=[])],
                )
            ).session_id
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("use the tools")])
    assert response.stop_reason == "end_turn"
    tools = {t["function"]["name"] for t in server.requests[0].get("body", server.requests[0])["tools"]}
    assert {"mcp__fake__echo", "mcp__fake__write_note", "read_file"} <= tools
    assert not any(name.startswith("mcp__broken") for name in tools)
    assert client.tool_updates("m1")[-1].status == "completed"
    second = server.requests[1].get("body", server.requests[1])
    assert "ping ping" in [m for m in second["messages"] if m["role"] == "tool"][0]["content"]
    # The write-like MCP tool asked first; the read-only one did not.
    assert [r.tool_call_id for r in client.permission_requests] == ["m2"]
    assert client.tool_updates("m2")[-1].status == "completed"
    assert "broken" in client.text() and "goes on without it" in client.text()
