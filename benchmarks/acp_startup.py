"""Time to first session: spawn hermes-acp -> initialize answered -> session/new answered.

Prints JSON with the median and spread over several rounds. Uses the bundled scripted model
on 127.0.0.1 so that no network is involved. Run: .venv/bin/python benchmarks/acp_startup.py
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


def one_round(command: str, env: dict, project: Path) -> dict:
    started = time.perf_counter()
    proc = subprocess.Popen([command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}) + "\n")
    proc.stdin.flush()
    json.loads(proc.stdout.readline())
    initialized = time.perf_counter()
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(project), "mcpServers": []}}) + "\n")
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    created = time.perf_counter()
    assert "result" in answer, answer
    proc.stdin.close()
    proc.wait(timeout=10)
    return {"initialize_ms": (initialized - started) * 1000, "first_session_ms": (created - started) * 1000}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    command = str(Path(sys.executable).parent / "hermes-acp")
    with ScriptedOpenAIServer([]) as server, tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        project = Path(tmp) / "project"
        project.mkdir()
        env = {
            "PATH": os.environ["PATH"],
            "HOME": tmp,
            "HERMES_EDITOR_HOME": str(home),
            "HERMES_QUIET": "1",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-bench-000000",
            "HERMES_MODEL": "openai:scripted",
        }
        one_round(command, env, project)  # warm the filesystem cache; not counted
        rounds = [one_round(command, env, project) for _ in range(args.rounds)]
    result = {"benchmark": "acp_startup", "rounds": args.rounds, "machine": f"{os.cpu_count()} cores"}
    for key in ("initialize_ms", "first_session_ms"):
        values = [r[key] for r in rounds]
        result[key] = {"median": round(statistics.median(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
