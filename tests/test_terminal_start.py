"""hermes-acp and hermes-mcp started by hand on a terminal say what they are, and Ctrl-C ends them quietly.

Started the way editors and MCP clients start them (stdin a pipe) they print nothing extra.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

from tests.acp_harness import agent_env

BIN = Path(sys.executable).parent
NOTE = {"hermes-acp": "hermes-acp: the hermes-editor agent server", "hermes-mcp": "hermes-mcp: the hermes-editor MCP server"}
INITIALIZE = {
    "hermes-acp": {"protocolVersion": 1, "clientCapabilities": {}},
    "hermes-mcp": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
}
QUIET_ENDS = (0, 130, -signal.SIGINT)  # returned, or ended by SIGINT as an unhandled KeyboardInterrupt does


def _binary(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{path} is missing: install the project (pip install -e .[test])"
    return str(path)


def _env(home: Path) -> dict[str, str]:
    """The test's state home (made private, so that nothing is said about it) and no real keys."""
    home.chmod(0o700)
    return agent_env(home, None)


def _read_until(stream: IO[bytes], end: bytes, timeout: float = 30.0) -> bytes:
    """Bytes from ``stream`` up to and including ``end``; fails after ``timeout`` seconds or at EOF."""
    fd = stream.fileno()
    got = b""
    deadline = time.monotonic() + timeout
    while end not in got:
        left = deadline - time.monotonic()
        assert left > 0, f"no {end!r} within {timeout} s; got {got!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, f"EOF before {end!r}; got {got!r}"
            got += chunk
    return got


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.parametrize("name", ["hermes-acp", "hermes-mcp"])
def test_on_a_terminal_it_says_what_it_is_once_and_ctrl_c_ends_it_quietly(name: str, hermes_home: Path) -> None:
    main_end, terminal = pty.openpty()
    proc = subprocess.Popen([_binary(name)], stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(hermes_home))
    os.close(terminal)
    try:
        assert proc.stderr is not None
        err = _read_until(proc.stderr, b"Ctrl-C quits.\n")
        proc.send_signal(signal.SIGINT)
        out, rest = proc.communicate(timeout=30)
    finally:
        _stop(proc)
        os.close(main_end)
    text = (err + rest).decode()
    assert proc.returncode in QUIET_ENDS, (proc.returncode, text)
    assert "Traceback" not in text, text
    assert "KeyboardInterrupt" not in text, text
    notes = [line for line in text.splitlines() if line.startswith(NOTE[name])]
    assert len(notes) == 1, text
    assert "README" in notes[0] and "stdin/stdout" in notes[0]
    assert out == b""


@pytest.mark.parametrize("name", ["hermes-acp", "hermes-mcp"])
def test_started_with_pipes_it_prints_nothing_before_answering_and_sigint_leaves_no_traceback(name: str, hermes_home: Path) -> None:
    proc = subprocess.Popen([_binary(name)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(hermes_home))
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE[name]}
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        proc.stdin.flush()
        answer = json.loads(_read_until(proc.stdout, b"\n"))
        assert answer["id"] == 1 and "result" in answer, answer
        # Whatever was written to stderr before the answer is in the pipe by now.
        assert select.select([proc.stderr.fileno()], [], [], 0)[0] == [], os.read(proc.stderr.fileno(), 65536)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        _stop(proc)
    text = err.decode()
    assert proc.returncode in QUIET_ENDS, (proc.returncode, text)
    assert "Traceback" not in text, text
    assert NOTE[name] not in text
