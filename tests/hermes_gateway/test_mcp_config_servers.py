"""config.toml's MCP servers in cron runs: a job run by ``hermes-gateway run`` calls a server's tool."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_acp.test_mcp_config_servers import _running_with
from tests.hermes_gateway.harness import cli
from tests.hermes_gateway.test_cron_without_bot import added_id, start_scheduler, stop, wait_until, write_config

ROOT = Path(__file__).resolve().parents[2]


def test_a_cron_run_calls_a_tool_of_a_server_from_config(hermes_home, project, tmp_path):
    write_config(hermes_home)
    marker = str(tmp_path / "no-such-file")  # never created: the server runs; the path marks its process
    with open(hermes_home / "config.toml", "a", encoding="utf-8") as config:
        config.write(
            f"""
[mcp_servers.cfg]
command = "{sys.executable}"
args = ["-m", "tests.fakes.mcp_server", "--down-while", "{marker}"]
env = {{ PYTHONPATH = "{ROOT}" }}
"""
        )
    script = [{"tool_calls": [{"id": "e1", "name": "mcp__cfg__echo", "arguments": {"text": "from cron"}}]}, {"text": "Echoed."}]
    with ScriptedOpenAIServer(script) as model:
        proc = start_scheduler(hermes_home, model.base_url)
        try:
            job_id = added_id(cli(hermes_home, "cron", "add", "every 1h", "echo something", "--project", str(project)))
            assert cli(hermes_home, "cron", "run", job_id).returncode == 0

            def finished() -> list[dict] | None:
                rows = json.loads(cli(hermes_home, "cron", "runs", job_id, "--json").stdout)
                return rows if rows and rows[0]["status"] not in ("running", "queued") else None

            rows = wait_until(finished, 60, "the run to finish")
            assert rows[0]["status"] == "ok" and rows[0]["result"] == "Echoed.", rows
            assert _running_with(marker), "the server runs while the gateway does"
        finally:
            code, _, err = stop(proc)
    assert code == 0, err
    assert "mcp__cfg__echo" in [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert [m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"] == ["from cron"]
    wait_until(lambda: not _running_with(marker), 30, "the server's process to end with the gateway")
