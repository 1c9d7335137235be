"""Hostile input on hermes-mcp's stdin: JSON-RPC errors, still serving, stdout protocol-only."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hermes_mcp.harness import hermes_mcp, mcp_env

METHODS = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "notifications/initialized",
    "notifications/cancelled",
    "logging/setLevel",
    "nonsense",
    "",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
tool_calls = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["sessions_search", "session_read", "task_status", "skill_view", "memory_read", "nope"])
        | st.text(max_size=10),
        "arguments": st.dictionaries(
            st.sampled_from(["query", "session_id", "task_id", "name", "cursor", "limit", "page"]), json_values, max_size=3
        ),
    }
)
requests = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0"]), "method": st.sampled_from(METHODS) | st.text(max_size=12) | st.integers()},
    optional={"id": st.none() | st.integers() | st.text(max_size=6) | st.booleans(), "params": json_values | tool_calls},
)
hostile = requests.map(json.dumps) | json_values.map(json.dumps) | st.text(max_size=150).filter(lambda t: "\n" not in t and "\r" not in t)


class Server:
    def __init__(self, home) -> None:
        self.proc = subprocess.Popen(
            [hermes_mcp()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=mcp_env(home), bufsize=0
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.reader = threading.Thread(target=lambda: [self.lines.put(l) for l in self.proc.stdout], daemon=True)
        self.reader.start()
        self.next_id = 9_000_000

    def send(self, line: str) -> None:
        self.proc.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        self.proc.stdin.flush()

    def ping(self) -> list[dict]:
        self.next_id += 1
        self.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": "ping"}))
        seen, deadline = [], time.monotonic() + 30
        while True:
            raw = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            message = json.loads(raw)
            assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", raw
            if message.get("id") == self.next_id:
                assert message.get("result") == {}, message
                return seen
            seen.append(message)

    def close(self) -> int:
        """Close stdin (the client goes away) and wait for the exit; killed if it does not come."""
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise


def test_hostile_lines_never_break_hermes_mcp(hermes_home):
    server = Server(hermes_home)
    try:
        server.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}},
                }
            )
        )
        server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        server.ping()

        @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(st.lists(hostile, min_size=1, max_size=4))
        def feed(lines: list[str]) -> None:
            for line in lines:
                server.send(line)
            for message in server.ping():
                if "error" in message:
                    assert isinstance(message["error"].get("code"), int)

        feed()
        assert server.proc.poll() is None, "hermes-mcp exited on hostile input"
    finally:
        server.close()


def _vm(pid: int, field: str) -> int:
    """A /proc/<pid>/status figure (VmRSS, VmHWM) in bytes."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def test_fifty_megabyte_and_over_long_lines(hermes_home):
    """Huge lines get answers (a result, -32700, or -32600 past MAX_LINE) and memory stays bounded."""
    from hermes_mcp.stdio import MAX_LINE

    server = Server(hermes_home)
    stdin = server.proc.stdin

    def stream(prefix: bytes, fill: bytes, size: int, suffix: bytes) -> None:
        """One line of ``size`` filler bytes between prefix and suffix, written a megabyte at a time."""
        stdin.write(prefix)
        piece = fill * (1024 * 1024 // len(fill))
        left = size
        while left > 0:
            stdin.write(piece[:left])
            left -= len(piece)
        stdin.write(suffix + b"\n")
        stdin.flush()

    try:
        # The very first line is over-long: read before the SDK serves, answered once it does.
        stream(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"pad": "', b"p", MAX_LINE, b'"}}')
        server.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}},
                }
            )
        )
        server.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        before = server.ping()
        assert before[0] == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": f"Invalid Request: message longer than {MAX_LINE} bytes"},
        }
        assert before[1]["id"] == 2 and before[1]["result"]["serverInfo"]["name"] == "hermes"
        baseline = _vm(server.proc.pid, "VmRSS")

        # Three times the limit: skipped without being held, then the server answers on.
        stream(b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"pad": "', b"q", 3 * MAX_LINE, b'"}}')
        assert [m["error"]["code"] for m in server.ping()] == [-32600]
        assert _vm(server.proc.pid, "VmHWM") - baseline < 2 * MAX_LINE

        # 50 MB: a real tool call (one 50 MB word to search for), then 50 MB that is not JSON.
        stream(
            b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "sessions_search", "arguments": {"query": "',
            b"x",
            50_000_000,
            b'"}}}',
        )
        stream(b"", b"not json at all ", 50_000_000, b"")
        answers = server.ping()
        while not any(m.get("id") == 4 for m in answers):  # the tool call runs beside the ping
            answers.append(json.loads(server.lines.get(timeout=60)))
        assert all(m.get("jsonrpc") == "2.0" for m in answers)
        assert [m["error"]["code"] for m in answers if m.get("id") is None] == [-32700]
        (result,) = [m for m in answers if m.get("id") == 4]
        # A tool error that names the limit (the query is too long to search), not a hang.
        assert result["result"]["isError"] is True, str(result)[:500]
        assert (
            "at most 2,000" in result["result"]["content"][0]["text"] and "50,000,000 characters" in result["result"]["content"][0]["text"]
        )
        assert server.proc.poll() is None
    finally:
        code = server.close()
    assert code == 0
    # Nothing else on stdout after the answers (every line was JSON-RPC, checked as it came).
    server.reader.join(timeout=10)
    assert not server.reader.is_alive() and server.lines.empty()
