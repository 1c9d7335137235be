"""benchmarks/mcp_startup.py still runs and prints its figures (timings are never asserted)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_startup_benchmark_prints_its_figures():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "mcp_startup.py"), "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout)
    assert {"initialize_ms", "tools_list_ms", "initialize_from_sdk_ms", "tool_list_bytes"} <= set(figures)
    assert figures["initialize_ms"]["median"] > 0
