"""Hostile input on stdin: hermes-acp answers with JSON-RPC errors, keeps serving, and never
writes anything but protocol messages to stdout."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.acp_harness import agent_env, hermes_acp

METHODS = [
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/list",
    "session/resume",
    "session/close",
    "session/fork",
    "session/prompt",
    "session/cancel",
    "session/set_mode",
    "session/set_config_option",
    "fs/read_text_file",
    "_hermes/x",
    "nonsense",
    "",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
ids = st.none() | st.integers() | st.text(max_size=8) | st.booleans() | st.floats(allow_nan=False) | st.lists(st.integers(), max_size=2)
requests = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0", 2]), "method": st.sampled_from(METHODS) | st.text(max_size=15) | st.integers()},
    optional={
        "id": ids,
        "params": json_values
        | st.fixed_dictionaries({"sessionId": st.text(max_size=8), "cwd": st.text(max_size=12), "mcpServers": json_values}),
    },
)
hostile_lines = (
    requests.map(json.dumps)
    | json_values.map(json.dumps)
    | st.text(max_size=200).filter(lambda t: "\n" not in t and "\r" not in t)
    | st.binary(max_size=100).map(lambda b: b.decode("latin-1")).filter(lambda t: "\n" not in t and "\r" not in t)
)


class Agent:
    """One hermes-acp process, its stdout read line by line in a thread."""

    def __init__(self, home) -> None:
        self.proc = subprocess.Popen(
            [hermes_acp()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=agent_env(home, None),
            bufsize=0,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 10_000_000

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, line: str) -> None:
        self.proc.stdin.write(line.encode("utf-8", "surrogatepass") + b"\n")
        self.proc.stdin.flush()

    def ping(self) -> list[dict]:
        """Send a request we know the answer to; return every message that came before it."""
        self.next_id += 1
        self.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": "session/list", "params": {"cursor": "%bad%"}}))
        seen = []
        deadline = time.monotonic() + 20
        while True:
            raw = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            message = json.loads(raw)  # every stdout line must be JSON...
            assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", raw  # ...and JSON-RPC 2.0
            assert ("result" in message) != ("error" in message) or "method" in message, raw
            if message.get("id") == self.next_id:
                assert "error" in message  # a bad cursor (or no model) is an error, not a crash
                return seen
            seen.append(message)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=20)


def test_hostile_lines_get_errors_and_the_server_keeps_serving(hermes_home):
    agent = Agent(hermes_home)
    try:
        agent.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
        agent.ping()

        @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(st.lists(hostile_lines, min_size=1, max_size=5))
        def feed(lines: list[str]) -> None:
            for line in lines:
                agent.send(line)
            for message in agent.ping():
                if "error" in message:
                    assert isinstance(message["error"].get("code"), int) and message["error"].get("message")

        feed()
        assert agent.proc.poll() is None, "hermes-acp exited on hostile input"
    finally:
        agent.close()


def test_a_flood_of_notifications_is_absorbed(hermes_home):
    agent = Agent(hermes_home)
    try:
        for i in range(5000):
            agent.send(json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": f"s{i}"}}))
        assert agent.ping() == [], "notifications are never answered"
    finally:
        agent.close()
