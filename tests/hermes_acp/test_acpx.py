"""The real npm client acpx drives hermes-acp through a write-with-approval turn."""

from __future__ import annotations

import json
import subprocess

from tests.acp_harness import ROOT, agent_env, hermes_acp, schema_path
from tests.fakes.openai_server import ScriptedOpenAIServer


def _acpx() -> str:
    schema_path()  # installs the npm test clients when they are missing
    path = ROOT / "node_modules/.bin/acpx"
    assert path.exists(), "acpx is missing: run 'npm install' in the repository root"
    return str(path)


def test_acpx_write_with_approval(hermes_home, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hello from acpx\n"}}]},
        {"text": "Wrote hello.txt."},
    ]
    with ScriptedOpenAIServer(script) as server:
        env = agent_env(hermes_home, server.base_url)
        proc = subprocess.run(
            [_acpx(), "--agent", hermes_acp(), "--cwd", str(project), "--approve-all", "--format", "json", "exec", "write hello"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (project / "hello.txt").read_text() == "hello from acpx\n"
    messages = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    permission = [m for m in messages if m.get("method") == "session/request_permission"]
    assert permission and permission[0]["params"]["toolCall"]["content"][0]["type"] == "diff"
    statuses = [m["params"]["update"].get("status") for m in messages if m.get("method") == "session/update"]
    assert "completed" in statuses
    prompt_result = [m for m in messages if "result" in m and isinstance(m["result"], dict) and "stopReason" in m["result"]]
    assert prompt_result and prompt_result[-1]["result"]["stopReason"] == "end_turn"
