"""``hermes-mcp --http``: streamable HTTP on loopback, and a bearer token that is required once set."""

from __future__ import annotations

import contextlib
import re
import subprocess
from collections.abc import Iterator

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.hermes_mcp.harness import ERAS, data, hermes_mcp, mcp_env

TOKEN = "test-token-0123456789abcdef"


@contextlib.contextmanager
def http_server(env: dict, address: str = "127.0.0.1:0") -> Iterator[str]:
    """Start hermes-mcp --http; yields the endpoint URL it announces."""
    proc = subprocess.Popen([hermes_mcp(), "--http", address], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        url = None
        for line in proc.stderr:
            found = re.search(r"serving MCP at (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url, f"no address announced; exit code {proc.poll()}"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.stdout.read() == "", "nothing but protocol: HTTP mode writes nothing to stdout"


@pytest.mark.parametrize("mode", ERAS)
async def test_streamable_http_serves_both_eras(hermes_home, mode):
    with http_server(mcp_env(hermes_home)) as url:
        async with Client(url, mode=mode, cache=None) as client:
            tools = await client.list_tools()
            found = data(await client.call_tool("sessions_search", {"query": "anything"}))
            resources = await client.list_resources()
    assert len(tools.tools) == 14
    assert found == {"hits": [], "next_cursor": None}
    assert "hermes://sessions" in [str(r.uri) for r in resources.resources]


async def test_a_configured_token_is_required(hermes_home):
    env = mcp_env(hermes_home, extra={"HERMES_MCP_TOKEN": TOKEN})
    with http_server(env) as url:
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        headers = {"accept": "application/json, text/event-stream"}
        missing = httpx.post(url, json=body, headers=headers, timeout=10)
        wrong = httpx.post(url, json=body, headers={**headers, "authorization": "Bearer nope"}, timeout=10)
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client:
                tools = await client.list_tools()
    assert missing.status_code == 401 and wrong.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert TOKEN not in missing.text
    assert len(tools.tools) == 14


@pytest.mark.parametrize(
    "address, extra, message",
    [
        ("0.0.0.0:8765", {}, "without a bearer token"),
        ("127.0.0.1:8765", {"HERMES_MCP_TOKEN": "short"}, "too short"),
        ("nonsense", {}, "HOST:PORT"),
    ],
)
def test_unsafe_or_malformed_addresses_are_refused(hermes_home, address, extra, message):
    proc = subprocess.run([hermes_mcp(), "--http", address], capture_output=True, text=True, env=mcp_env(hermes_home, extra=extra), timeout=30)
    assert proc.returncode == 2
    assert message in proc.stderr and proc.stdout == ""
