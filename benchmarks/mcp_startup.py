"""Cold start of hermes-mcp: spawn -> ``initialize`` answered, and -> first ``tools/list`` answered.

``initialize`` is answered before the MCP SDK has loaded (see hermes_mcp.handshake);
``tools/list`` needs the SDK and the server, so it shows the rest of the start-up. The same
rounds are also run with the early answer switched off (HERMES_MCP_NO_FAST_INIT=1), which is
what a server that answers from the SDK would do. Prints JSON with the median and spread.
Where the reference is installed (benchmarks/reference.py), its MCP server (``hermes mcp
serve``) gets the same exchange, interleaved round by round with ours, and the ratios
reference / ours are printed.
Run: .venv/bin/python benchmarks/mcp_startup.py [--rounds N] [--reference-venv PATH]
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

from benchmarks.reference import add_option, find, interleaved, ratio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def one_round(command: list[str], env: dict, cwd: Path) -> dict:
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
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
        "tools": len(tools["result"]["tools"]),
    }


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    add_option(parser)
    args = parser.parse_args()
    reference = find(args.reference_venv)
    command = [str(Path(sys.executable).parent / "hermes-mcp")]
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        env = {"PATH": os.environ["PATH"], "HOME": tmp, "HERMES_EDITOR_HOME": str(Path(tmp) / "home"), "HERMES_QUIET": "1"}
        slow_env = {**env, "HERMES_MCP_NO_FAST_INIT": "1"}
        theirs_env = reference.env(Path(tmp) / "reference") if reference else {}
        rounds, theirs = interleaved(
            args.rounds,
            lambda: one_round(command, env, cwd),
            (lambda: one_round(reference.mcp_command, theirs_env, cwd)) if reference else None,
        )
        slow = [one_round(command, slow_env, cwd) for _ in range(args.rounds)]
    result = {
        "benchmark": "mcp_startup",
        "command": "hermes-mcp (stdio), initialize at protocol 2025-11-25",
        "rounds": args.rounds,
        "machine": f"{os.cpu_count()} cores",
        "initialize_ms": summary([r["initialize_ms"] for r in rounds]),
        "tools_list_ms": summary([r["tools_list_ms"] for r in rounds]),
        "initialize_from_sdk_ms": summary([r["initialize_ms"] for r in slow]),
        "tool_list_bytes": rounds[-1]["tool_list_bytes"],
        "tools": rounds[-1]["tools"],
    }
    if reference:
        result["reference"] = {
            "name": reference.name,
            "command": "hermes mcp serve (stdio)",
            "initialize_ms": summary([r["initialize_ms"] for r in theirs]),
            "tools_list_ms": summary([r["tools_list_ms"] for r in theirs]),
            "tool_list_bytes": theirs[-1]["tool_list_bytes"],
            "tools": theirs[-1]["tools"],
        }
        result["reference_over_ours"] = {
            key: ratio(result["reference"][key]["median"], result[key]["median"]) for key in ("initialize_ms", "tools_list_ms")
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
