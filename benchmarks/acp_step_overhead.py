"""Server overhead per tool step: an instant scripted model asks for a small read, N times.

Per step = (turn time) / (steps); the model's own round trip is measured alone with the same
SDK against the same server and subtracted. Also reports hermes-acp's resident memory when idle
after the turn. Run: .venv/bin/python benchmarks/acp_step_overhead.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import acp
from acp.schema import ClientCapabilities, RequestPermissionResponse

from hermes_cli.scripted_model import ScriptedOpenAIServer


class QuietClient:
    async def session_update(self, session_id, update, **_):
        return None

    async def request_permission(self, options, session_id, tool_call, **_):
        raise AssertionError("a read inside the project never asks")

    def on_connect(self, conn):
        pass


def script(steps: int):
    counter = {"n": 0}

    def respond(body: dict) -> dict:
        counter["n"] += 1
        if counter["n"] % (steps + 1) == 0:
            return {"text": "done", "chunk_size": 100}
        return {"tool_calls": [{"id": f"c{counter['n']}", "name": "read_file", "arguments": {"path": "small.txt"}}]}

    return respond


async def model_round_trip(base_url: str, rounds: int) -> float:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench-000000", max_retries=0)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        stream = await client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "x"}], stream=True, stream_options={"include_usage": True}
        )
        async for _chunk in stream:
            pass
        times.append(time.perf_counter() - started)
    await client.close()
    return statistics.median(times) * 1000


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def run(steps: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        (project / "small.txt").write_text("hello\n" * 20)
        with ScriptedOpenAIServer(script(steps)) as server:
            env = {
                "PATH": os.environ["PATH"], "HOME": tmp, "HERMES_EDITOR_HOME": str(Path(tmp) / "home"), "HERMES_QUIET": "1",
                "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-bench-000000", "HERMES_MODEL": "openai:scripted",
            }
            command = str(Path(sys.executable).parent / "hermes-acp")
            per_step, idle_rss = [], 0
            async with acp.spawn_agent_process(QuietClient(), command, env=env) as (conn, process):
                await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
                sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
                await conn.prompt(session_id=sid, prompt=[acp.text_block("warm up")])
                for _ in range(rounds):
                    started = time.perf_counter()
                    await conn.prompt(session_id=sid, prompt=[acp.text_block("read it")])
                    per_step.append((time.perf_counter() - started) * 1000 / (steps + 1))
                await asyncio.sleep(0.5)
                idle_rss = rss_kb(process.pid)
            model_ms = await model_round_trip(server.base_url, 30)
    step = statistics.median(per_step)
    return {
        "benchmark": "acp_step_overhead",
        "steps_per_turn": steps,
        "step_ms": round(step, 2),
        "model_round_trip_ms": round(model_ms, 2),
        "overhead_per_step_ms": round(step - model_ms, 2),
        "idle_rss_mb": round(idle_rss / 1024, 1),
        "targets": {"overhead_per_step_ms": 5, "idle_rss_mb": 90},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.steps, args.rounds)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
