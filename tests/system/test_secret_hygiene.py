"""With fake keys and tokens configured, run the surfaces and scan everything they leave behind:
logs, the store, exports, error messages, and the environment their child processes get."""

from __future__ import annotations

import subprocess
import sys

import acp

from core.config import _PLATFORM_SECRETS
from core.redaction import SECRET_ENV_VARS
from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import connected, mcp_env

OPENAI = "sk-test-not-a-real-key-123456"
TELEGRAM = "987654321:AAFakeTelegramTokenForHygieneTests_xyz"
MCP_TOKEN = "mcp-bearer-token-hygiene-0123456789"
# Every chat platform's and speech service's secret that may come from the environment.
PLATFORM = {variable: f"{variable.lower()}-hygiene-value-0123" for _, _, variable in _PLATFORM_SECRETS}


def _leaks(text: str) -> list[str]:
    return [secret for secret in (OPENAI, TELEGRAM, MCP_TOKEN, *PLATFORM.values()) if secret in text]


def test_every_platform_secret_variable_is_kept_from_children_and_logs():
    assert {variable for _, _, variable in _PLATFORM_SECRETS} <= set(SECRET_ENV_VARS)


async def test_no_secret_reaches_logs_store_exports_or_children(hermes_home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    extra = {"TELEGRAM_BOT_TOKEN": TELEGRAM, "HERMES_MCP_TOKEN": MCP_TOKEN, **PLATFORM}
    script = [
        {"tool_calls": [{"id": "env", "name": "run_command", "arguments": {"command": "env; echo done"}}]},
        {"error": 401, "message": f"invalid key {OPENAI}"},
        {"text": f"the mcp side, with a key-looking string {OPENAI[:8]}"},
    ]
    (hermes_home / "config.toml").write_text('log_level = "debug"\n[retry]\nbase_delay = 0\nmax_attempts = 1\n')
    with ScriptedOpenAIServer(script) as server:
        env = agent_env(hermes_home, server.base_url, extra=extra)
        env.pop("HERMES_QUIET")
        client = Client(answer="allow_once", terminal=False)
        async with running_agent(client, env) as (conn, _, transcript):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("show me the environment")])
        async with connected(mcp_env(hermes_home, server.base_url, extra=extra), roots=[project]) as mcp:
            await mcp.call_tool("ask", {"prompt": "hello", "cwd": str(project)})
            await mcp.call_tool("sessions_search", {"query": "environment"})
    # The command's environment (what a child process inherits) carried none of them.
    second = server.requests[1].get("body", server.requests[1])
    env_output = [m for m in second["messages"] if m["role"] == "tool"][0]["content"]
    assert "done" in env_output and not _leaks(env_output)
    # The user saw the auth error, without the key.
    assert "auth" in client.text() and not _leaks(client.text())
    assert not _leaks(str(transcript.messages))
    # Exports.
    for fmt in ("md", "jsonl", "openai", "trajectory"):
        export = subprocess.run(
            [str(__import__("pathlib").Path(sys.executable).parent / "hermes-editor"), "sessions", "export", sid, "--format", fmt],
            capture_output=True,
            text=True,
            env={**env, "HOME": str(hermes_home.parent / "user-home")},
            timeout=60,
        )
        assert export.returncode == 0, export.stderr
        assert "show me the environment" in export.stdout and not _leaks(export.stdout + export.stderr)
    # Logs and the store, byte for byte.
    for path in [*hermes_home.rglob("*.log"), *hermes_home.glob("state.db*")]:
        found = _leaks(path.read_bytes().decode("utf-8", "replace"))
        assert not found, f"{path} contains a secret"
