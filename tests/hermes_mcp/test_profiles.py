"""hermes-mcp with a profile (``--profile`` or ``HERMES_EDITOR_PROFILE``): what a client writes lands in that profile only."""

from __future__ import annotations

import subprocess

import pytest

from tests.hermes_mcp.harness import connected, data, hermes_mcp, mcp_env


@pytest.mark.parametrize("how", ["flag", "variable"])
async def test_memory_written_over_mcp_lands_in_the_profile(hermes_home, how):
    marker = f"MCP-PROFILE-MARK-{how}"
    args, extra = (("--profile", "claude"), {}) if how == "flag" else ((), {"HERMES_EDITOR_PROFILE": "claude"})
    async with connected(mcp_env(hermes_home, extra=extra), args=args) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        added = data(await client.call_tool("memory_add", {"text": f"Uses {marker} for builds", "file": "memory"}))
        read = data(await client.call_tool("memory_read", {}))
    assert {"memory_add", "memory_read"} <= tools
    assert marker in added["entry"]
    assert any(marker in f["text"] for f in read["files"])
    profile = hermes_home / "profiles" / "claude"
    # Made on first use, private like the main home, and the only place the entry is.
    assert (profile.stat().st_mode & 0o777) == 0o700
    assert marker in (profile / "memories" / "MEMORY.md").read_text()
    assert not (hermes_home / "memories").exists() or marker not in (hermes_home / "memories" / "MEMORY.md").read_text()


def test_a_bad_profile_name_is_refused_before_anything_is_made(tmp_path):
    home = tmp_path / "fresh-home"
    result = subprocess.run(
        [hermes_mcp(), "--profile", "../escape"], input="", capture_output=True, text=True, env=mcp_env(home), timeout=60
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "--profile: '../escape' is not a profile name" in result.stderr
    assert not home.exists() and not (tmp_path / "escape").exists()
