"""``hermes-mcp --http``: streamable HTTP, and a bearer token every request needs, on loopback too."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import ERAS, allow_projects, call, data, hermes_mcp, mcp_env

TOKEN = "test-token-0123456789abcdef"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"accept": "application/json, text/event-stream"}


@dataclass
class Served:
    url: str
    token: str
    announced: list[str] = field(default_factory=list)
    stderr: str = ""  # everything it wrote, once it has stopped


@contextlib.contextmanager
def http_server(env: dict, address: str = "127.0.0.1:0", args: tuple[str, ...] = ()) -> Iterator[Served]:
    """Start hermes-mcp --http; yields the endpoint and the token it announces."""
    proc = subprocess.Popen(
        [hermes_mcp(), "--http", address, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    served = None
    try:
        lines: list[str] = []
        url = token = None
        for line in proc.stderr:
            lines.append(line)
            found = re.search(r"serving MCP at (http://\S+)", line)
            url = found.group(1) if found else url
            header = re.fullmatch(r"Authorization: Bearer (\S+)\n", line)
            if header:
                token = header.group(1)
                break
        assert url and token, f"no address or token announced; exit code {proc.poll()}: {''.join(lines)}"
        served = Served(url, token, lines)
        yield served
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    rest = proc.stderr.read()
    served.stderr = "".join(served.announced) + rest
    assert proc.stdout.read() == "", "nothing but protocol: HTTP mode writes nothing to stdout"


def _authorized(token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"})


@pytest.mark.parametrize("mode", ERAS)
async def test_streamable_http_serves_both_eras_with_the_token(hermes_home, mode):
    with http_server(mcp_env(hermes_home)) as served:
        async with _authorized(served.token) as http:
            async with Client(streamable_http_client(served.url, http_client=http), mode=mode, cache=None) as client:
                tools = await client.list_tools()
                found = data(await client.call_tool("sessions_search", {"query": "anything"}))
                resources = await client.list_resources()
    assert len(tools.tools) == 13
    assert found == {"hits": [], "next_cursor": None}
    assert "hermes://sessions" in [str(r.uri) for r in resources.resources]


def _post(url: str, headers: dict | None = None) -> httpx.Response:
    return httpx.post(url, json=INITIALIZE, headers={**ACCEPT, **(headers or {})}, timeout=10)


async def test_loopback_needs_the_generated_token_and_it_stays_private(hermes_home):
    """No token, a wrong one, a prefix of the right one, another scheme: 401. The token is made once,
    0600 in a 0700 home, shown once on stderr, never logged, and the same at the next start."""
    with http_server(mcp_env(hermes_home)) as served:
        token = served.token
        refused = {
            "missing": _post(served.url),
            "wrong": _post(served.url, {"authorization": "Bearer nope"}),
            "same length": _post(served.url, {"authorization": "Bearer " + "x" * len(token)}),
            "prefix": _post(served.url, {"authorization": "Bearer " + token[:-1]}),
            "longer": _post(served.url, {"authorization": "Bearer " + token + "x"}),
            "basic": _post(served.url, {"authorization": "Basic " + token}),
            "bare": _post(served.url, {"authorization": token}),
            "query": httpx.post(f"{served.url}?token={token}", json=INITIALIZE, headers=ACCEPT, timeout=10),
            "get": httpx.get(served.url, headers=ACCEPT, timeout=10),
        }
        ok = _post(served.url, {"authorization": f"Bearer {token}"})
        lower = _post(served.url, {"authorization": f"bearer {token}"})
    for name, response in refused.items():
        assert response.status_code == 401, name
        assert token not in response.text
    assert refused["missing"].headers["www-authenticate"].startswith("Bearer")
    assert ok.status_code == 200 and lower.status_code == 200
    path = hermes_home / "mcp-token"
    assert path.read_text().strip() == token and len(token) >= 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(hermes_home.stat().st_mode) == 0o700
    assert [line for line in served.stderr.splitlines() if token in line] == [f"Authorization: Bearer {token}"]
    assert str(path) in served.stderr
    log = (hermes_home / "logs" / "mcp.log").read_text()
    assert token not in log and "bearer token required" in log
    assert not [p for p in hermes_home.iterdir() if p.name.startswith(".mcp-token")], "no temporary copies left"
    with http_server(mcp_env(hermes_home)) as again:
        assert again.token == token


async def test_a_token_set_in_the_environment_overrides_the_file(hermes_home):
    with http_server(mcp_env(hermes_home, extra={"HERMES_MCP_TOKEN": TOKEN})) as served:
        missing = _post(served.url)
        wrong = _post(served.url, {"authorization": "Bearer nope"})
        async with _authorized(TOKEN) as http:
            async with Client(streamable_http_client(served.url, http_client=http), mode="legacy", cache=None) as client:
                tools = await client.list_tools()
    assert served.token == TOKEN and "HERMES_MCP_TOKEN" in served.stderr
    assert missing.status_code == 401 and wrong.status_code == 401
    assert len(tools.tools) == 13
    assert not (hermes_home / "mcp-token").exists()
    assert TOKEN not in (hermes_home / "logs" / "mcp.log").read_text()


@pytest.mark.parametrize(
    "headers, status",
    [({"host": "evil.example"}, 421), ({"host": "attacker.test:80"}, 421), ({"origin": "http://evil.example"}, 403)],
)
async def test_dns_rebinding_is_refused_even_with_the_token(hermes_home, headers, status):
    with http_server(mcp_env(hermes_home)) as served:
        response = _post(served.url, {"authorization": f"Bearer {served.token}", **headers})
        good = _post(served.url, {"authorization": f"Bearer {served.token}", "origin": served.url.rsplit("/", 1)[0]})
    assert response.status_code == status and good.status_code == 200


async def test_the_token_never_reaches_the_model_or_the_store(hermes_home, tmp_path):
    """A copy of the token in a project file: what the agent reads of it reaches neither the model nor the store."""
    project = tmp_path / "project"
    project.mkdir()
    allow_projects(hermes_home, project)
    script = [call("read_file", {"path": "leak.txt"}, "c1"), {"text": "read it"}]
    with ScriptedOpenAIServer(script) as model:
        with http_server(mcp_env(hermes_home, model.base_url)) as served:
            (project / "leak.txt").write_text(f"MCP_TOKEN={served.token}\n")
            async with _authorized(served.token) as http:
                async with Client(streamable_http_client(served.url, http_client=http), mode="legacy", cache=None) as client:
                    view = data(await client.call_tool("ask", {"prompt": "read leak.txt", "cwd": str(project), "mode": "read-only"}))
    token = served.token
    assert view["status"] == "done", view
    tool_results = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert "MCP_TOKEN=" in str(tool_results), "the file was read"
    assert token not in str(model.requests) and token not in str(view)
    for path in hermes_home.glob("state.db*"):
        assert token.encode() not in path.read_bytes()


def test_a_token_file_others_can_read_is_refused(hermes_home):
    path = hermes_home / "mcp-token"
    path.write_text("x" * 43 + "\n")
    os.chmod(path, 0o644)
    proc = subprocess.run([hermes_mcp(), "--http", "127.0.0.1:0"], capture_output=True, text=True, env=mcp_env(hermes_home), timeout=30)
    assert proc.returncode == 2 and proc.stdout == ""
    assert str(path) in proc.stderr and "readable by other users" in proc.stderr and "x" * 43 not in proc.stderr


@pytest.mark.parametrize(
    "address, extra, message",
    [
        ("0.0.0.0:8765", {}, "without a bearer token set on purpose"),
        ("127.0.0.1:8765", {"HERMES_MCP_TOKEN": "short"}, "too short"),
        ("nonsense", {}, "HOST:PORT"),
    ],
)
def test_unsafe_or_malformed_addresses_are_refused(hermes_home, address, extra, message):
    proc = subprocess.run(
        [hermes_mcp(), "--http", address], capture_output=True, text=True, env=mcp_env(hermes_home, extra=extra), timeout=30
    )
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stdout == ""
    assert not (hermes_home / "mcp-token").exists()


def test_help_documents_the_token_and_the_trust_flag():
    proc = subprocess.run([hermes_mcp(), "--help"], capture_output=True, text=True, timeout=30, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "--trust-client-approvals" in text and "client's model approve this server's own pending actions" in text
    assert "bearer token" in text and "mcp-token" in text
    assert Path(hermes_mcp()).exists()
