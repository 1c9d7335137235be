"""Drive the real hermes-mcp process with the MCP SDK's client, in either protocol era."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

BIN = Path(sys.executable).parent
ERAS = ["legacy", "2026-07-28"]  # the 2025-11-25 handshake, and the per-request envelope era
SECRET_KEY = "sk-test-not-a-real-key-123456"


def hermes_mcp() -> str:
    path = BIN / "hermes-mcp"
    assert path.exists(), f"{path} is missing: install the project (pip install -e .[test])"
    return str(path)


def mcp_env(home: Path, base_url: str | None = None, *, model: str = "openai:scripted", extra: dict | None = None) -> dict:
    """The child's environment: the test's state home, the scripted model (if any), no real keys."""
    env = {"HERMES_EDITOR_HOME": str(home), "HOME": str(home.parent / "user-home"), "PATH": os.environ["PATH"], "HERMES_QUIET": "1"}
    if base_url:
        env.update({"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": SECRET_KEY, "HERMES_MODEL": model})
    env.update(extra or {})
    return env


@contextlib.asynccontextmanager
async def connected(
    env: dict,
    *,
    mode: str = "legacy",
    args: tuple[str, ...] = (),
    cwd: Path | None = None,
    roots: list[Path] | None = None,
    **client_options: Any,
) -> AsyncIterator[Client]:
    """Spawn hermes-mcp and connect; its stderr goes to ``$HERMES_EDITOR_HOME/stderr.log``.

    ``roots``: folders the client shares as MCP roots (as Cursor shares its open folder)."""
    if roots is not None:
        from mcp_types import ListRootsResult, Root

        async def list_roots(context: Any) -> ListRootsResult:
            return ListRootsResult(roots=[Root(uri=Path(r).as_uri(), name=Path(r).name) for r in roots])

        client_options.setdefault("list_roots_callback", list_roots)
    params = StdioServerParameters(command=hermes_mcp(), args=list(args), env=env, cwd=str(cwd) if cwd else None)
    stderr_path = Path(env["HERMES_EDITOR_HOME"]) / "stderr.log"
    with open(stderr_path, "a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode, cache=None, **client_options) as client:
            yield client


async def approvals_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``hermes-editor approvals ARGS`` as the user would in a terminal (without blocking the loop)."""
    env = {"HERMES_EDITOR_HOME": str(home), "HOME": str(home.parent / "user-home"), "PATH": os.environ["PATH"], "HERMES_QUIET": "1"}
    proc = await asyncio.create_subprocess_exec(
        str(BIN / "hermes-editor"),
        "approvals",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return subprocess.CompletedProcess(["hermes-editor", "approvals", *args], proc.returncode, out.decode(), err.decode())


def allow_projects(home: Path, *projects: Path) -> None:
    """List folders in ``[mcp] projects`` of the state home's config.toml, as a user would."""
    config = home / "config.toml"
    text = config.read_text() if config.exists() else ""
    assert "[mcp]" not in text, "list every project in one call"
    listed = ", ".join(json.dumps(str(p)) for p in projects)
    config.write_text(f"{text}\n[mcp]\nprojects = [{listed}]\n")


def data(result: Any) -> dict:
    """A successful tool result's structured content (and the same object in its text)."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def error_text(result: Any) -> str:
    assert result.is_error, result.structured_content
    return result.content[0].text


def call(name: str, args: dict, call_id: str = "call_1") -> dict:
    """A scripted model reply that calls one tool."""
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": args}]}
