"""config.toml's MCP servers in hermes-mcp tasks: the model gets their tools and their results."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.acp_harness import until
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_acp.test_mcp_config_servers import _running_with
from tests.hermes_mcp.harness import allow_projects, connected, data, mcp_env

ROOT = Path(__file__).resolve().parents[2]


async def test_a_task_calls_a_tool_of_a_server_from_config(hermes_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    allow_projects(hermes_home, project)
    marker = str(tmp_path / "no-such-file")  # never created: the server runs; the path marks its process
    with open(hermes_home / "config.toml", "a", encoding="utf-8") as config:
        config.write(
            f"""
[mcp_servers.cfg]
command = "{sys.executable}"
args = ["-m", "tests.fakes.mcp_server", "--down-while", "{marker}"]
env = {{ PYTHONPATH = "{ROOT}", FAKE_GREETING = "hello from config.toml", API_TOKEN = "${{HERMES_TEST_TOKEN}}" }}
"""
        )
    script = [
        {
            "tool_calls": [
                {"id": "g1", "name": "mcp__cfg__get_env", "arguments": {"name": "FAKE_GREETING"}},
                {"id": "g2", "name": "mcp__cfg__get_env", "arguments": {"name": "API_TOKEN"}},
            ]
        },
        {"text": "The server says hello."},
    ]
    env = mcp_env(hermes_home, None, extra={"HERMES_TEST_TOKEN": "token-from-the-environment-42"})
    with ScriptedOpenAIServer(script) as model:
        env.update(mcp_env(hermes_home, model.base_url))
        async with connected(env) as client:
            view = data(await client.call_tool("ask", {"prompt": "ask the cfg server", "cwd": str(project)}))
            assert _running_with(marker), "the server runs while hermes-mcp does"
        # hermes-mcp has exited: config.toml's server went with it.
        await until(lambda: not _running_with(marker), 30, "the server's process to end")
    assert view["status"] == "done", view
    assert [(s["tool"], s["status"]) for s in view["steps"]] == [("mcp__cfg__get_env", "completed")] * 2
    assert "mcp__cfg__echo" in [t["function"]["name"] for t in model.requests[0]["tools"]]
    results = [m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"]
    # The ${VAR} reference was filled in from hermes-mcp's environment ("(unset)" otherwise), and
    # the value is a secret: scrubbed before it reaches the model.
    assert results == ["hello from config.toml", "[redacted]"]
