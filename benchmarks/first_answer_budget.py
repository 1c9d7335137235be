"""Where the processor time of the first answer goes: spawn -> "say hello" answered, in parts.

``acp_startup.py`` gives the time and the server's total processor time to the first answer
(user + system, every thread). This script splits that total: a fresh Python process (this
virtualenv, the collector off as hermes-acp has it while starting) loads what hermes-acp loads
before its first answer, part by part in the server's order, and prints each part's processor
time; the interpreter's own start is measured alone (``python -c pass``); the real server then
answers the same exchange as in ``acp_startup.py`` (the scripted model on 127.0.0.1), and what
its total holds beyond the parts is printed as ``turn_and_the_rest`` (the handshake's answers,
the session, the store, the turn itself, the SDK's protocol models built on first use, the
threads' switches). Medians over rounds; every round starts new processes.

The parts are the floor of any path that answers through them: a part cannot cost less on the
server's path than alone, since everything the server does before its first answer runs on one
core in turn (the loading thread and the main thread share the interpreter lock).
Run: .venv/bin/python benchmarks/first_answer_budget.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.acp_startup import one_round, scripted_env  # noqa: E402
from hermes_cli.scripted_model import ScriptedOpenAIServer  # noqa: E402

# Run in a fresh interpreter: each part's processor time, in the order hermes-acp loads them.
PARTS = r"""
import gc
gc.disable()
import json, sys, time
laps = {}
last = time.process_time()
def lap(name):
    global last
    now = time.process_time()
    laps[name] = (now - last) * 1000
    last = now
import asyncio
lap("asyncio")
import hermes_acp.__main__
lap("entry_point")
import pydantic.main
lap("pydantic")
from core.config import load_config
config = load_config()
lap("config")
from hermes_acp.handshake import audio_supported, images_supported
images_supported(config), audio_supported(config)
lap("handshake_checks")
from hermes_acp.sdk_load import load_sdk
load_sdk()
lap("acp_sdk")
import hermes_acp.server
lap("server")
import core.agent.builder, toolsets
lap("agent_core_and_tools")
from core.models.openai_compat import _import_httpx
_import_httpx()
lap("httpx")
json.dump(laps, sys.stdout)
"""


def children_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def parts_round(env: dict, cwd: Path) -> dict:
    before = children_cpu_ms()
    subprocess.run([sys.executable, "-c", "pass"], env=env, cwd=cwd, check=True)
    start = children_cpu_ms() - before
    done = subprocess.run([sys.executable, "-c", PARTS], env=env, cwd=cwd, check=True, capture_output=True, text=True)
    return {"interpreter_start": start, **json.loads(done.stdout)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    command = [str(Path(sys.executable).parent / "hermes-acp")]
    rounds: list[dict] = []
    with ScriptedOpenAIServer(lambda body: {"text": "hello"}) as server, tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        env = {**scripted_env(Path(tmp) / "home", server.base_url), "PYTHONPATH": str(ROOT)}
        one_round(command, env, project)  # the store and the byte-code caches exist from here on
        for _ in range(args.rounds):
            parts = parts_round(env, project)
            served = one_round(command, env, project)
            parts["server_total_cpu"] = served["cpu_ms"]
            parts["first_prompt_ms"] = served["first_prompt_ms"]
            rounds.append(parts)
    names = [k for k in rounds[0] if k not in ("server_total_cpu", "first_prompt_ms")]
    medians = {k: round(statistics.median(r[k] for r in rounds), 1) for k in rounds[0]}
    parts_sum = round(sum(medians[k] for k in names), 1)
    result = {
        "benchmark": "first_answer_budget",
        "rounds": args.rounds,
        "machine": f"{os.cpu_count()} cores",
        "parts_cpu_ms": {k: medians[k] for k in names},
        "parts_sum_cpu_ms": parts_sum,
        "server_total_cpu_ms": medians["server_total_cpu"],
        "turn_and_the_rest_cpu_ms": round(medians["server_total_cpu"] - parts_sum, 1),
        "first_prompt_ms": medians["first_prompt_ms"],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
