"""Cancel latency: session/cancel sent -> session/prompt answered with stopReason "cancelled".

Two cases: during a slow model stream, and during a running command (`sleep 30`, run by the
local host because this client offers no terminal). Prints JSON medians.
Run: .venv/bin/python benchmarks/acp_cancel.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hermes_cli.scripted_model import ScriptedOpenAIServer


class Raw:
    def __init__(self, env: dict) -> None:
        command = str(Path(sys.executable).parent / "hermes-acp")
        self.proc = subprocess.Popen(
            [command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True
        )

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        return json.loads(self.proc.stdout.readline())

    def until(self, predicate) -> dict:
        while True:
            message = self.read()
            if message.get("method") == "session/request_permission":
                self.send({"id": message["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}})
            if predicate(message):
                return message

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def one_round(env: dict, project: Path, case: str) -> float:
    raw = Raw(env)
    raw.send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    raw.read()
    raw.send({"id": 2, "method": "session/new", "params": {"cwd": str(project), "mcpServers": []}})
    sid = raw.read()["result"]["sessionId"]
    raw.send({"id": 3, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": case}]}})
    if case == "stream":
        raw.until(lambda m: m.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk")
    else:
        raw.until(lambda m: m.get("params", {}).get("update", {}).get("status") == "in_progress")
        time.sleep(0.3)
    started = time.perf_counter()
    raw.send({"method": "session/cancel", "params": {"sessionId": sid}})
    answer = raw.until(lambda m: m.get("id") == 3)
    elapsed = (time.perf_counter() - started) * 1000
    assert answer["result"]["stopReason"] == "cancelled", answer
    raw.close()
    return elapsed


def script(body: dict) -> dict:
    last = body["messages"][-1]
    text = last["content"] if isinstance(last["content"], str) else last["content"][0]["text"]
    if text == "stream":
        return {"text": "word " * 2000, "chunk_size": 5, "delay": 0.02}
    return {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "sleep 30"}}]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    result = {"benchmark": "acp_cancel", "rounds": args.rounds, "target_ms": 500}
    with ScriptedOpenAIServer(script) as server, tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        env = {
            "PATH": os.environ["PATH"],
            "HOME": tmp,
            "HERMES_EDITOR_HOME": str(Path(tmp) / "home"),
            "HERMES_QUIET": "1",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-bench-000000",
            "HERMES_MODEL": "openai:scripted",
        }
        for case in ("stream", "command"):
            values = [one_round(env, project, case) for _ in range(args.rounds)]
            result[f"cancel_during_{case}_ms"] = {"median": round(statistics.median(values), 1), "max": round(max(values), 1)}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
