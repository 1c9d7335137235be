"""The Claude Desktop and Cursor snippets in editor-configs/ are valid and start a working server."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.hermes_mcp.harness import connected, mcp_env

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ["claude_desktop_config.json", "cursor-mcp.json"]


@pytest.mark.parametrize("name", CONFIGS)
async def test_snippet_launches_hermes_mcp(hermes_home, name):
    config = json.loads((ROOT / "editor-configs" / name).read_text())
    assert list(config) == ["mcpServers"]
    server = config["mcpServers"]["hermes"]
    assert server["command"] == "/absolute/path/to/.venv/bin/hermes-mcp" and server["args"] == [] and server["env"] == {}
    if name == "cursor-mcp.json":
        assert server["type"] == "stdio"
    # Cursor drops tools whose server + tool name exceed 60 characters.
    installed = Path(sys.executable).parent
    found = shutil.which(Path(server["command"]).name, path=f"{installed}{os.pathsep}{os.environ.get('PATH', '')}")
    assert found and Path(found).parent == installed
    env = {**mcp_env(hermes_home), **server["env"]}
    async with connected(env, args=tuple(server["args"])) as client:
        tools = (await client.list_tools()).tools
    assert len(tools) <= 40 and all(len("hermes") + len(t.name) <= 60 for t in tools)


async def test_http_snippet_connects_once_its_token_is_filled_in(hermes_home):
    """editor-configs/cursor-mcp-http.json: the URL hermes-mcp --http serves, the header it checks."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from tests.hermes_mcp.test_http import http_server

    config = json.loads((ROOT / "editor-configs" / "cursor-mcp-http.json").read_text())
    server = config["mcpServers"]["hermes"]
    assert server["url"] == "http://127.0.0.1:8765/mcp" and server["headers"] == {"Authorization": "Bearer <token>"}
    with http_server(mcp_env(hermes_home)) as served:
        # The snippet's port may be taken on a test machine: only the port differs.
        url = server["url"].replace("127.0.0.1:8765", served.url.split("/")[2])
        headers = {name: value.replace("<token>", served.token) for name, value in server["headers"].items()}
        async with httpx2.AsyncClient(headers=headers) as http:
            async with Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None) as client:
                tools = (await client.list_tools()).tools
        async with httpx2.AsyncClient(headers=server["headers"]) as http:  # pasted as is: refused
            refused = await http.post(url, json={}, headers={"accept": "application/json, text/event-stream"})
    assert len(tools) == 13
    assert refused.status_code == 401
