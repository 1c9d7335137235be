"""The wire itself: the early initialize answer, JSON-RPC errors, and nothing but protocol on stdout."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

from hermes_mcp import handshake
from tests.hermes_mcp.harness import hermes_mcp, mcp_env


def _initialize(version: str, request_id: int | str = 1) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "test", "version": "1"}},
    }


def _exchange(env: dict, messages: list, expect: int, *, timeout: float = 60) -> list[dict]:
    """Send raw lines (dicts are JSON-encoded), read ``expect`` answers, then close stdin.

    Every stdout line must be a JSON-RPC message; nothing else may appear after the answers.
    """
    proc = subprocess.Popen([hermes_mcp()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin and proc.stdout
    out: list[dict] = []
    try:
        proc.stdin.write("".join((m if isinstance(m, str) else json.dumps(m)) + "\n" for m in messages).encode())
        proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while len(out) < expect and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            message = json.loads(line)  # fails the test on anything that is not JSON
            assert message.get("jsonrpc") == "2.0", line
            out.append(message)
        proc.stdin.close()
        rest = proc.stdout.read()
        errors = proc.stderr.read()  # quiet (HERMES_QUIET): never enough to fill the pipe
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, errors.decode()[-3000:]
    assert rest == b"", rest[:2000]
    assert len(out) == expect, out
    return out


def test_the_early_answer_speaks_the_sdks_protocol_versions():
    assert handshake.HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    assert handshake.LATEST_HANDSHAKE_VERSION == LATEST_HANDSHAKE_VERSION


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2024-11-05", "2099-01-01"])
def test_the_early_initialize_answer_is_the_one_the_sdk_gives(hermes_home, version):
    env = mcp_env(hermes_home)
    fast = _exchange(env, [_initialize(version, "init-1")], 1)
    slow = _exchange({**env, "HERMES_MCP_NO_FAST_INIT": "1"}, [_initialize(version, "init-1")], 1)
    assert fast == slow
    expected = version if version in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    assert fast[0]["result"]["protocolVersion"] == expected
    assert fast[0]["result"]["capabilities"]["resources"]["listChanged"] is True


def _open_for_writing(fifo: Path, timeout: float = 30) -> int:
    """Open ``fifo`` for writing once its reader has opened it; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                raise
        time.sleep(0.01)


def test_initialize_is_answered_before_the_sdk_is_loaded(hermes_home):
    """The answer comes while the server is still being built: the build is held at its first step,
    reading the config file (a FIFO nobody writes to yet), and the answer is there all the same."""
    config = hermes_home / "config.toml"
    os.mkfifo(config, 0o600)
    proc = subprocess.Popen(
        [hermes_mcp()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=mcp_env(hermes_home)
    )
    try:
        proc.stdin.write((json.dumps(_initialize("2025-11-25")) + "\n").encode())
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 1 and "result" in answer
        # Let the build go on: the config reads as empty, and from now on it is a plain file.
        held = _open_for_writing(config)
        plain = hermes_home / "config.plain"
        plain.write_text("")
        os.replace(plain, config)
        os.close(held)
        # Then the SDK takes over the same connection: the handshake goes on, a request is served.
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
        proc.stdin.flush()
        tools = json.loads(proc.stdout.readline())
        assert tools["id"] == 2 and len(tools["result"]["tools"]) == 13
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert proc.returncode == 0


def test_protocol_misuse_is_a_json_rpc_error_and_stdout_stays_clean(hermes_home):
    messages = [
        _initialize("2025-11-25"),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "{this is not json",
        "[1, 2]",
        {"id": 10, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"arguments": {}}},
        {"jsonrpc": "2.0", "id": 6, "method": "prompts/get", "params": {"name": "no-such-skill"}},
        {"jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": {"uri": "hermes://sessions/nope"}},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "session_read", "arguments": {"session_id": "nope"}}},
        {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "sessions_list", "arguments": {"limit": "many"}}},
    ]
    out = _exchange(mcp_env(hermes_home), messages, 11)
    by_id = {m.get("id"): m for m in out}
    assert by_id[3]["error"]["code"] == -32601
    assert by_id[10]["error"]["code"] == -32600
    nulls = [m["error"]["code"] for m in out if m.get("id") is None]
    assert sorted(nulls) == [-32700, -32600], out
    assert by_id[4]["error"]["code"] == -32602 and "no_such_tool" in by_id[4]["error"]["message"]
    assert "error" in by_id[5] and by_id[5]["error"]["code"] == -32602
    assert by_id[6]["error"]["code"] == -32602 and "no-such-skill" in by_id[6]["error"]["message"]
    assert by_id[7]["error"]["code"] == -32602
    # Mistakes of the calling model are tool errors it can read and correct.
    for request_id in (8, 9):
        result = by_id[request_id]["result"]
        assert result["isError"] is True, by_id[request_id]
    assert "sessions_list" in by_id[8]["result"]["content"][0]["text"]
    assert "limit" in by_id[9]["result"]["content"][0]["text"]


def test_stray_output_goes_to_stderr_not_the_protocol(tmp_path):
    """After protect_stdio, print() and a child's output land on stderr; fd 0 reads nothing."""
    code = (
        "import os, subprocess, sys\n"
        "from hermes_mcp.stdio import protect_stdio\n"
        "pin, pout = protect_stdio()\n"
        "print('stray print')\n"
        "subprocess.run(['echo', 'child output'])\n"
        "subprocess.run(['cat'])\n"  # would steal protocol input if it inherited stdin
        "os.write(pout, b'protocol\\n')\n"
        "print(os.read(pin, 100).decode(), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], input="client line\n", capture_output=True, text=True, timeout=30, cwd=os.getcwd())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "protocol\n"
    assert "stray print" in proc.stderr and "child output" in proc.stderr and "client line" in proc.stderr


def test_version_and_help():
    version = subprocess.run([hermes_mcp(), "--version"], capture_output=True, text=True, timeout=30)
    assert version.returncode == 0 and version.stdout.startswith("hermes-mcp ")
    helped = subprocess.run([hermes_mcp(), "--help"], capture_output=True, text=True, timeout=30)
    assert helped.returncode == 0 and "--http" in helped.stdout


def test_nothing_heavy_loads_before_the_first_answer():
    code = (
        "import sys, hermes_mcp.__main__, hermes_mcp.handshake, hermes_mcp.stdio\n"
        "heavy = [m for m in ('mcp', 'mcp_types', 'pydantic', 'anyio', 'openai') if m in sys.modules]\n"
        "heavy += [m for m in sys.modules if m.startswith('core.') and m != 'core.version']\n"
        "print(','.join(heavy))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""
