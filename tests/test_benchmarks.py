"""Each benchmark still runs and prints its figures as JSON (no timing is asserted).

The reference (benchmarks/reference.py) is switched off here, so only our figures are made.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "script, args, key",
    [
        ("acp_startup.py", ["--rounds", "1"], "first_session_ms"),
        ("acp_startup.py", ["--rounds", "1", "--code", ".", "--acpx"], "code_over_ours"),
        ("first_answer_budget.py", ["--rounds", "1"], "parts_cpu_ms"),
        ("acp_cancel.py", ["--rounds", "1"], "cancel_during_command_ms"),
        ("first_request.py", [], "bytes"),
        ("acp_replay.py", ["--rounds", "1", "--messages", "200"], "load_ms"),
        ("acp_replay.py", ["--rounds", "1", "--messages", "100,200"], "sizes"),
        ("edit_large_file.py", ["--rounds", "1", "--mb", "1"], "edit_file_total_ms"),
        ("store_append.py", ["--count", "50", "--prefill", "100"], "runs"),
        ("acp_step_overhead.py", ["--rounds", "1", "--steps", "3"], "overhead_per_step_ms"),
        ("acp_step_overhead.py", ["--rounds", "1", "--steps", "2", "--history", "10,40"], "largest_over_smallest"),
        ("mcp_startup.py", ["--rounds", "1"], "initialize_ms"),
        ("search_1m.py", ["--rounds", "1", "--messages", "2000"], "queries"),
        # Past --generated messages the sessions are copies; raw FTS5 capped; a few appends timed.
        (
            "search_1m.py",
            ["--rounds", "1", "--messages", "4000", "--generated", "2000", "--raw-rounds", "1", "--appends", "5"],
            "append_p95_ms",
        ),
        ("sandbox_spawn.py", ["--rounds", "1"], "spawn"),
        ("sandbox_spawn.py", ["--rounds", "1", "--code", "."], "cpu_ms"),
        ("code_shape.py", ["HEAD", "HEAD"], "after"),
        ("host_overhead.py", ["--rounds", "2"], "hosts"),
        ("host_overhead.py", ["--rounds", "1", "--hosts", "local,local-sandboxed", "--code", "."], "hosts"),
        ("small_window.py", ["--windows", "8000", "--files", "6"], "windows"),
        ("gateway_chats.py", ["--rounds", "1", "--chats", "3", "--messages", "2", "--paired", "1"], "overhead_p95_ms"),
        ("prompt_cache.py", ["--steps", "6", "--wire", "openai", "--window", "0"], "runs"),
    ],
)
def test_benchmark_prints_its_figures(script, args, key):
    env = {**os.environ, "HERMES_REFERENCE_VENV": ""}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert key in json.loads(proc.stdout)
