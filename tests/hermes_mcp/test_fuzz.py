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

METHODS = ["initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read", "prompts/list",
           "prompts/get", "notifications/initialized", "notifications/cancelled", "logging/setLevel", "nonsense", ""]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
tool_calls = st.fixed_dictionaries(
    {"name": st.sampled_from(["sessions_search", "session_read", "task_status", "skill_view", "memory_read", "nope"]) | st.text(max_size=10),
     "arguments": st.dictionaries(st.sampled_from(["query", "session_id", "task_id", "name", "cursor", "limit", "page"]), json_values, max_size=3)}
)
requests = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0"]), "method": st.sampled_from(METHODS) | st.text(max_size=12) | st.integers()},
    optional={"id": st.none() | st.integers() | st.text(max_size=6) | st.booleans(), "params": json_values | tool_calls},
)
hostile = (
    requests.map(json.dumps)
    | json_values.map(json.dumps)
    | st.text(max_size=150).filter(lambda t: "\n" not in t and "\r" not in t)
)


class Server:
    def __init__(self, home) -> None:
        self.proc = subprocess.Popen([hermes_mcp()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=mcp_env(home), bufsize=0)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(l) for l in self.proc.stdout], daemon=True).start()
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


def test_hostile_lines_never_break_hermes_mcp(hermes_home):
    server = Server(hermes_home)
    try:
        server.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}))
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
        server.proc.stdin.close()
        server.proc.wait(timeout=20)
