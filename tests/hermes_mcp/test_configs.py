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
    assert server["command"] == "hermes-mcp" and server["args"] == [] and server["env"] == {}
    if name == "cursor-mcp.json":
        assert server["type"] == "stdio"
    # Cursor drops tools whose server + tool name exceed 60 characters.
    installed = Path(sys.executable).parent
    found = shutil.which(server["command"], path=f"{installed}{os.pathsep}{os.environ.get('PATH', '')}")
    assert found and Path(found).parent == installed
    env = {**mcp_env(hermes_home), **server["env"]}
    async with connected(env, args=tuple(server["args"])) as client:
        tools = (await client.list_tools()).tools
    assert len(tools) <= 40 and all(len("hermes") + len(t.name) <= 60 for t in tools)
