"""The console scripts, run as a user runs them: real subprocesses, a temporary home, no network."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import load_config
from tests.fakes.openai_server import ScriptedOpenAIServer

BIN = Path(sys.executable).parent
SECRET = "sk-test-doctor-secret-0123456789"


def run(script: str, *args: str, input: str | None = None, env: dict | None = None, cwd: Path | None = None, timeout: float = 90):
    path = BIN / script
    assert path.exists(), f"{path} is missing: install the project (pip install -e .[test])"
    return subprocess.run(
        [str(path), *args],
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        env={**os.environ, "HERMES_QUIET": "1", **(env or {})},
        cwd=cwd,
        timeout=timeout,
        # No controlling terminal: nothing may fall back to reading /dev/tty.
        start_new_session=True,
    )


def write_config(home: Path, text: str) -> Path:
    path = home / "config.toml"
    path.write_text(text)
    return path


# -- demo -----------------------------------------------------------------------------------


def test_demo_without_a_model_plays_a_scripted_session(hermes_home, tmp_path):
    result = run("hermes-editor", "demo", "--keep", env={"TMPDIR": str(tmp_path)}, cwd=tmp_path)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "No model is configured: using the bundled scripted model on 127.0.0.1:" in out
    assert "(no network, no API key)" in out
    # The streamed reply, the tool calls with their status, the diff in the approval.
    assert "Hermes: I'll start by reading calc.py" in out
    assert "✓ Read calc.py (completed)" in out
    assert "Permission needed: Edit calc.py" in out
    diff_lines = [line.strip() for line in out.splitlines() if line.strip().startswith(("+", "-"))]
    assert "+    return a + b".strip() in diff_lines and "-    return a - b".strip() in diff_lines
    assert "+++ b/calc.py" in diff_lines
    assert out.count("→ approved (allow once)") == 2
    # The command's output and the end of the turn.
    assert "Ran 3 tests" in out and "exit code 0" in out
    assert "Stop reason: end_turn" in out
    # Found again in the store.
    match = re.search(r"Found again by searching 'calculator'.*\n  session ([0-9a-f]{32})  \"(.+)\"\n  (\w+): (.+)", out)
    assert match, out
    session_id = match.group(1)
    assert "calculator" in match.group(2) and "[calculator]" in match.group(4)
    assert "{" not in out, "no JSON dumps"

    # --keep kept the project, and the fix really landed in the file.
    project = Path(re.search(r"Kept the project: (.+)", out).group(1))
    assert project.is_relative_to(tmp_path)
    assert "return a + b" in (project / "calc.py").read_text()
    assert "return a - b" not in (project / "calc.py").read_text()

    # The scripted run used its own state home, not the user's; sessions and search read it.
    assert not (hermes_home / "state.db").exists()
    demo_home = Path(re.search(r"Its state home: (\S+)", out).group(1))
    listed = run("hermes-editor", "sessions", env={"HERMES_EDITOR_HOME": str(demo_home)})
    assert listed.returncode == 0 and session_id in listed.stdout and str(project) in listed.stdout
    found = run("hermes-editor", "search", "calculator", env={"HERMES_EDITOR_HOME": str(demo_home)})
    assert found.returncode == 0 and session_id in found.stdout and "[calculator]" in found.stdout


def test_demo_without_keep_cleans_up_and_interactive_can_reject(hermes_home, tmp_path):
    result = run("hermes-editor", "demo", "--interactive", input="n\n", env={"TMPDIR": str(tmp_path)}, cwd=tmp_path)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "Allow? [y/N]" in out and "→ rejected" in out
    assert "✗ Edit calc.py (failed)" in out
    assert "I left calc.py unchanged" in out
    assert "Stop reason: end_turn" in out
    assert not list(tmp_path.glob("hermes-demo-*")), "the throwaway project is removed without --keep"


# -- doctor ---------------------------------------------------------------------------------


def test_doctor_without_config_says_how_to_configure(hermes_home):
    result = run("hermes-editor", "doctor")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "✗ No model is configured" in result.stdout
    assert "hermes-editor setup" in result.stdout
    assert "✓ Python" in result.stdout and "✓ Store" in result.stdout and "integrity ok" in result.stdout
    assert "hermes-acp" in result.stdout


def test_doctor_with_a_reachable_model_passes(hermes_home):
    with ScriptedOpenAIServer([{"text": "OK"}]) as server:
        write_config(
            hermes_home,
            f'model = "local:scripted"\n[providers.local]\nprofile = "openai-compatible"\n'
            f'base_url = "{server.base_url}"\napi_key = "{SECRET}"\n',
        )
        result = run("hermes-editor", "doctor")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert re.search(r"✓ Model local:scripted is reachable: replied \"OK\" in \d+\.\d s", out)
    assert "All checks passed" in out
    assert SECRET not in out
    # Exactly one cheap request: tiny, no tools.
    (body,) = server.requests
    assert body["max_tokens"] <= 16 and not body.get("tools")
    assert body["messages"][-1]["content"] == "Reply with OK."


def test_doctor_reports_an_unreachable_model_without_the_key(hermes_home):
    with ScriptedOpenAIServer([{"error": 401}, {"text": "never"}]) as server:
        write_config(
            hermes_home,
            f'model = "local:scripted"\n[providers.local]\nprofile = "openai-compatible"\n'
            f'base_url = "{server.base_url}"\napi_key = "{SECRET}"\n',
        )
        result = run("hermes-editor", "doctor")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "✗ Model local:scripted is not reachable" in out
    assert "auth" in out and "Check the API key" in out
    assert SECRET not in out
    assert len(server.requests) == 1, "the doctor sends one request, without retries"


def test_doctor_names_the_invalid_key(hermes_home):
    path = write_config(hermes_home, f'max_steps = "x"\n[providers.openai]\napi_key = "{SECRET}"\n')
    result = run("hermes-editor", "doctor")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "✗ Config is invalid" in out and "max_steps" in out and str(path) in out
    assert SECRET not in out


# -- setup ----------------------------------------------------------------------------------


def test_setup_from_stdin_writes_a_private_valid_config(hermes_home):
    # 4 = Ollama: the default base URL, then a model name; no key is asked.
    result = run("hermes-editor", "setup", input="4\n\nqwen3:8b\n")
    assert result.returncode == 0, result.stdout + result.stderr
    path = hermes_home / "config.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = load_config(path)
    assert config.model == "ollama:qwen3:8b"
    assert config.model_ref().config.base_url == "http://127.0.0.1:11434/v1"


def test_hermes_acp_setup_runs_the_same_wizard(hermes_home):
    old = write_config(hermes_home, 'model = "ollama:llama3"\n[providers.ollama]\nbase_url = "http://127.0.0.1:11434/v1"\n')
    old.chmod(0o644)
    key = "sk-test-entered-on-stdin-987654"
    result = run("hermes-acp", "--setup", input=f"1\n{key}\ngpt-4.1-mini\n")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Setting up hermes-editor" in result.stdout
    assert key not in result.stdout + result.stderr, "the key is never echoed"
    path = hermes_home / "config.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    backup = hermes_home / "config.toml.bak"
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600 and "llama3" in backup.read_text()
    config = load_config(path, env={})
    assert config.model == "openai:gpt-4.1-mini"
    assert config.providers["openai"].api_key.get_secret_value() == key


def test_setup_at_end_of_input_writes_nothing(hermes_home):
    result = run("hermes-editor", "setup", input="")
    assert result.returncode != 0
    assert "nothing was written" in result.stdout
    assert "Traceback" not in result.stderr
    assert not (hermes_home / "config.toml").exists()


# -- the small commands and the placeholders -----------------------------------------------


def test_version_help_and_empty_history(hermes_home):
    version = run("hermes-editor", "--version")
    assert version.returncode == 0 and re.match(r"hermes-editor \d+\.\d+", version.stdout)
    helped = run("hermes-editor", "--help")
    assert helped.returncode == 0
    for command in ("setup", "doctor", "demo", "sessions", "search"):
        assert command in helped.stdout
    sessions = run("hermes-editor", "sessions")
    assert sessions.returncode == 0 and "No sessions yet" in sessions.stdout
    search = run("hermes-editor", "search", "anything")
    assert search.returncode == 1 and "no sessions" in search.stdout.lower()


@pytest.mark.parametrize("script", ["hermes-mcp", "hermes-gateway"])
def test_surface_scripts_serve_or_explain(script, hermes_home):
    result = run(script)
    helped = run(script, "--help")
    assert helped.returncode == 0 and script in helped.stdout
    if script == "hermes-mcp":
        # A real MCP server: with no client on stdin it ends at once, and stdout carries protocol only.
        assert result.returncode == 0 and result.stdout == ""
        return
    # hermes-gateway without a command shows its usage; `run` with neither a bot token nor cron
    # (without a token it runs the scheduler alone) says what to set.
    assert result.returncode == 2 and "run" in result.stderr and result.stdout == ""
    (hermes_home / "config.toml").write_text("[cron]\nenabled = false\n")
    started = run(script, "run", env={"HERMES_MODEL": "openai:gpt-4.1", "OPENAI_API_KEY": "sk-test-not-a-real-key-123456"})
    assert started.returncode == 2 and "TELEGRAM_BOT_TOKEN" in started.stderr and started.stdout == ""
