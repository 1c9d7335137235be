"""``hermes-editor doctor`` shows where the MCP bearer token is, never the token itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.hermes_cli.test_cli import run
from tests.hermes_mcp.harness import hermes_mcp, mcp_env


def _token_line(out: str) -> str:
    (line,) = [line for line in out.splitlines() if "MCP token" in line]
    return line


def _make_token(home: Path) -> str:
    """Start hermes-mcp --http once, as a user would, and take the token from its header line."""
    proc = subprocess.Popen(
        [hermes_mcp(), "--http", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=mcp_env(home),
        text=True,
    )
    try:
        for line in proc.stderr:
            if line.startswith("Authorization: Bearer "):
                return line.split()[-1]
        raise AssertionError(f"no token announced; exit code {proc.poll()}")
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_doctor_before_and_after_the_first_http_start(hermes_home):
    before = run("hermes-editor", "doctor", "--timeout", "1")
    token = _make_token(hermes_home)
    after = run("hermes-editor", "doctor", "--timeout", "1")
    path = hermes_home / "mcp-token"
    assert "No MCP token yet" in _token_line(before.stdout) and str(path) in _token_line(before.stdout)
    line = _token_line(after.stdout)
    assert line.lstrip().startswith("✓") and str(path) in line and "0600" in line and f"cat {path}" in line
    assert f"{token[:4]}… ({len(token)} characters)" in line
    assert token not in after.stdout + after.stderr


def test_doctor_names_the_variable_that_overrides_the_file(hermes_home):
    token = "env-token-0123456789abcdefghij"
    result = run("hermes-editor", "doctor", "--timeout", "1", env={"HERMES_MCP_TOKEN": token})
    line = _token_line(result.stdout)
    assert "HERMES_MCP_TOKEN" in line and "env-…" in line
    assert token not in result.stdout + result.stderr


def test_doctor_reports_an_unusable_token_file(hermes_home):
    (hermes_home / "mcp-token").mkdir()
    result = run("hermes-editor", "doctor", "--timeout", "1")
    line = _token_line(result.stdout)
    assert line.lstrip().startswith("✗") and "not usable" in line
    assert "not a regular file" in result.stdout and "Delete it" in result.stdout
    assert result.returncode == 1
