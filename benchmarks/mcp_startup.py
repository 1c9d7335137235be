"""Cold start of hermes-mcp: spawn -> ``initialize`` answered, and -> first ``tools/list`` answered.

``initialize`` is answered before the MCP SDK has loaded (see hermes_mcp.handshake);
``tools/list`` needs the SDK and the server, so it shows the rest of the start-up. The same
rounds are also run with the early answer switched off (HERMES_MCP_NO_FAST_INIT=1), which is
what a server that answers from the SDK would do. Prints JSON with the median and spread.
Run: .venv/bin/python benchmarks/mcp_startup.py [--rounds N]
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

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def one_round(command: str, env: dict) -> dict:
    started = time.perf_counter()
    proc = subprocess.Popen([command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin and proc.stdout
    proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    initialized = time.perf_counter()
    assert "result" in answer, answer
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
    proc.stdin.flush()
    tools = json.loads(proc.stdout.readline())
    listed = time.perf_counter()
    assert len(tools["result"]["tools"]) > 0, tools
    proc.stdin.close()
    proc.wait(timeout=30)
    return {
        "initialize_ms": (initialized - started) * 1000,
        "tools_list_ms": (listed - started) * 1000,
        "tool_list_bytes": len(json.dumps(tools["result"], separators=(",", ":"))),
    }


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    command = str(Path(sys.executable).parent / "hermes-mcp")
    with tempfile.TemporaryDirectory() as tmp:
        env = {"PATH": os.environ["PATH"], "HOME": tmp, "HERMES_EDITOR_HOME": str(Path(tmp) / "home"), "HERMES_QUIET": "1"}
        slow_env = {**env, "HERMES_MCP_NO_FAST_INIT": "1"}
        one_round(command, env)  # warm the filesystem cache; not counted
        rounds = [one_round(command, env) for _ in range(args.rounds)]
        slow = [one_round(command, slow_env) for _ in range(args.rounds)]
    result = {
        "benchmark": "mcp_startup",
        "command": "hermes-mcp (stdio), initialize at protocol 2025-11-25",
        "rounds": args.rounds,
        "machine": f"{os.cpu_count()} cores",
        "initialize_ms": summary([r["initialize_ms"] for r in rounds]),
        "tools_list_ms": summary([r["tools_list_ms"] for r in rounds]),
        "initialize_from_sdk_ms": summary([r["initialize_ms"] for r in slow]),
        "tool_list_bytes": rounds[-1]["tool_list_bytes"],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
