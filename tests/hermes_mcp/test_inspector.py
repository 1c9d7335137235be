"""The MCP Inspector CLI (npm @modelcontextprotocol/inspector) against the real hermes-mcp."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from core.messages import UserMessage
from core.store import SessionStore
from tests.hermes_mcp.harness import hermes_mcp

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "@modelcontextprotocol/inspector"


def _inspector() -> Path:
    """The Inspector's launcher, installed from package.json on first use."""
    launcher = ROOT / "node_modules" / ".bin" / "mcp-inspector"
    if not launcher.exists():
        wanted = json.loads((ROOT / "package.json").read_text()).get("devDependencies", {})
        if PACKAGE not in wanted:
            pytest.skip(f"{PACKAGE} is not in package.json yet")
        subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=ROOT, check=True, capture_output=True)
    return launcher


def _run(hermes_home: Path, *args: str, quiet: bool = False) -> dict:
    command = [str(_inspector()), "--cli", hermes_mcp(), "-e", f"HERMES_EDITOR_HOME={hermes_home}", "-e", "HERMES_QUIET=1", *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    if quiet:
        assert "Warning" not in proc.stderr and "Error" not in proc.stderr, proc.stderr[-3000:]
    return json.loads(proc.stdout)


async def test_inspector_lists_tools_calls_search_and_lists_resources(hermes_home):
    async with SessionStore.open() as store:
        record = await store.create_session(cwd="/work/p", surface="acp", title="flux work")
        await store.append_message(record.id, UserMessage.of("the flux capacitor needs a fix"))
    # --strict: every schema-portability finding in full; none is allowed.
    tools = _run(hermes_home, "--method", "tools/list", "--strict", quiet=True)
    assert len(tools["tools"]) == 13 and tools["tools"][0]["name"] == "ask"
    found = _run(hermes_home, "--method", "tools/call", "--tool-name", "sessions_search", "--tool-arg", "query=flux capacitor")
    assert found["isError"] is False
    (hit,) = found["structuredContent"]["hits"]
    assert hit["session_id"] == record.id and "[flux]" in hit["snippet"]
    resources = _run(hermes_home, "--method", "resources/list")
    uris = [r["uri"] for r in resources["resources"]]
    assert "hermes://sessions" in uris and f"hermes://sessions/{record.id}" in uris
