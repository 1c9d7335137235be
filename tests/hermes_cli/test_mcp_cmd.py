"""``hermes-editor mcp [list|test]`` through the real entry point, against the real fake MCP server."""

from __future__ import annotations

import json
import sys

from tests.core.test_mcp_reconnect import _HttpFake
from tests.hermes_cli.entry import hermes_editor

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
SECRET = "Bearer sk-header-secret-0123456789"


def _write(home, text: str) -> None:
    (home / "config.toml").write_text(text, encoding="utf-8")


def _servers(home) -> None:
    _write(
        home,
        f"""
[mcp_servers.fake]
command = "{sys.executable}"
args = ["-m", "tests.fakes.mcp_server"]
env = {{ PYTHONPATH = "{ROOT}", API_TOKEN = "${{HERMES_TEST_MCP_TOKEN}}" }}

[mcp_servers.remote]
url = "http://127.0.0.1:9/mcp?api_key=sk-query-secret-0123456789"
headers = {{ Authorization = "{SECRET}" }}
enabled = false
""",
    )


def test_bare_mcp_lists_nothing_configured_and_says_how_to_add_one(hermes_home):
    done = hermes_editor("mcp")
    assert done.returncode == 0, done.stderr
    assert "No MCP servers" in done.stdout and "[mcp_servers.NAME]" in done.stdout
    listed = hermes_editor("mcp", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


def test_list_shows_transport_and_enabled_never_secrets(hermes_home):
    _servers(hermes_home)
    done = hermes_editor("mcp", "list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["NAME", "TRANSPORT", "ENABLED", "RUNS"]
    assert lines[1].split()[:3] == ["fake", "stdio", "yes"] and "tests.fakes.mcp_server" in lines[1]
    assert "env: API_TOKEN, PYTHONPATH" in lines[1]
    assert lines[2].split()[:4] == ["remote", "http", "no", "http://127.0.0.1:9/mcp"] and "headers: Authorization" in lines[2]
    assert "sk-" not in done.stdout, "neither the header nor the URL's query string"
    for shown in (hermes_editor("config", "show"), hermes_editor("config", "show", "--json")):
        assert shown.returncode == 0 and "127.0.0.1:9/mcp" in shown.stdout, shown.stdout + shown.stderr
        assert "sk-header-secret" not in shown.stdout and "sk-query-secret" not in shown.stdout
    (fake, remote) = json.loads(hermes_editor("mcp", "--json").stdout)
    assert fake["name"] == "fake" and fake["transport"] == "stdio" and fake["enabled"] is True
    assert fake["args"] == ["-m", "tests.fakes.mcp_server"] and fake["env"] == ["API_TOKEN", "PYTHONPATH"]
    assert remote == {
        "name": "remote",
        "transport": "http",
        "enabled": False,
        "command": None,
        "args": [],
        "cwd": None,
        "url": "http://127.0.0.1:9/mcp",
        "env": [],
        "headers": ["Authorization"],
    }


def test_test_connects_and_lists_the_tools(hermes_home, tmp_path):
    _servers(hermes_home)
    done = hermes_editor("mcp", "test", "fake", env={"HERMES_TEST_MCP_TOKEN": "tok-0123456789"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("✓ fake (stdio): connected in ")
    assert "10 tools" in done.stdout.splitlines()[0]
    assert "mcp__fake__echo" in done.stdout and "[read-only] Say the text back." in done.stdout
    assert "mcp__fake__write_note" in done.stdout and "[asks]" in done.stdout
    assert "✗" not in done.stderr and "MCP server" not in done.stderr


def test_test_fails_with_the_reason_and_status_1(hermes_home, tmp_path):
    _servers(hermes_home)
    unset = hermes_editor("mcp", "test", "fake", cwd=tmp_path)
    assert unset.returncode == 1 and unset.stdout == ""
    assert unset.stderr.strip().splitlines()[-1] == (
        "✗ fake (stdio): could not connect: env.API_TOKEN refers to the environment variable HERMES_TEST_MCP_TOKEN, "
        "which is not set (set it where this program starts, or write the value in config.toml)"
    )
    away = hermes_editor("mcp", "test", "remote")
    assert away.returncode == 1
    assert "disabled (enabled = false)" in away.stdout
    assert "✗ remote (http): could not connect: cannot reach http://127.0.0.1:9/mcp" in away.stderr
    assert "sk-" not in away.stdout + away.stderr
    unknown = hermes_editor("mcp", "test", "fak")
    assert unknown.returncode == 1 and "No MCP server 'fak'" in unknown.stderr and "Did you mean 'fake'?" in unknown.stderr


def test_a_mistyped_key_is_named_with_the_nearest_one(hermes_home):
    _write(hermes_home, '[mcp_servers.fake]\ncomand = "npx"\n')
    done = hermes_editor("mcp")
    assert done.returncode == 1
    assert "key 'mcp_servers.fake.comand'" in done.stderr and "did you mean `command`?" in done.stderr
    _write(hermes_home, '[mcp_servers.fake]\nurl = "http://x/mcp"\nheaders = { Authorization = "Bearer ${TOKEN" }\n')
    done = hermes_editor("mcp", "list")
    assert done.returncode == 1 and "key 'mcp_servers.fake.headers.Authorization'" in done.stderr
    assert "${VARIABLE}" in done.stderr and "Bearer" not in done.stderr, "the value itself is never quoted"


def test_test_reaches_an_sse_server_named_by_transport(hermes_home, tmp_path):
    server = _HttpFake(tmp_path, "sse")
    _write(
        hermes_home,
        f"""
[mcp_servers.events]
transport = "sse"
url = "{server.url}"
headers = {{ Authorization = "Bearer ${{HERMES_TEST_MCP_TOKEN}}" }}
""",
    )
    server.start()
    try:
        done = hermes_editor("mcp", "test", "events", env={"HERMES_TEST_MCP_TOKEN": "tok-0123456789"})
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("✓ events (sse): connected in ") and "mcp__events__echo" in done.stdout
    listed = hermes_editor("mcp", "list")
    assert listed.stdout.splitlines()[1].split()[:4] == ["events", "sse", "yes", server.url]
