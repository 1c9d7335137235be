"""Server overhead per tool step: an instant scripted model asks for N reads of small files.

Each step reads a different small file (the reference answers a repeated read of one file with
"unchanged" and then refuses it). Per step = (turn time) / (steps + 1 model calls); the model's
own round trip is measured alone with the server's own Python and ``openai`` SDK against the
same scripted model and subtracted. Also reports the server's resident memory once idle after
the turns (no model request for 0.5 s). Where the reference is installed
(benchmarks/reference.py), its ``hermes-acp`` is measured the same way with its own read tool,
and the ratios reference / ours are printed. Model requests outside the turns (a title, the
reference's background review) are answered at once with a short text and counted.
Run: .venv/bin/python benchmarks/acp_step_overhead.py [--steps N] [--rounds N] [--reference-venv PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import acp
from acp.schema import AllowedOutcome, ClientCapabilities, RequestPermissionResponse

from benchmarks.reference import Reference, add_option, find, ratio
from hermes_cli.scripted_model import ScriptedOpenAIServer

# Run with each server's own interpreter, so that the round trip is the one its SDK makes.
ROUND_TRIP = """
import asyncio, statistics, sys, time
import openai

async def main(base_url, rounds):
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
    print(statistics.median(times) * 1000)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


class QuietClient:
    def __init__(self, allow: bool) -> None:
        self.allow = allow
        self.permission_requests = 0

    async def session_update(self, session_id, update, **_):
        return None

    async def request_permission(self, options, session_id, tool_call, **_):
        if not self.allow:
            raise AssertionError("a read inside the project never asks")
        self.permission_requests += 1
        chosen = next((o for o in options if str(o.kind).startswith("allow")), options[0])
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id))

    def on_connect(self, conn):
        pass


PROMPTS = ("warm up", "read it")


def text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def turn_of(body: dict) -> tuple[int, int] | None:
    """(turn, reads done in it) for a request of one of our turns; None for side requests
    (a title, the reference's background review) that are not part of a turn. A server may
    append a reminder to the prompt, so a prompt is recognised by how it starts."""
    if not body.get("tools"):
        return None
    messages = body.get("messages") or []
    # A request-only reminder may come after the tool results as a user message of its own.
    messages = [m for m in messages if not (m.get("role") == "user" and text_of(m).startswith("[Ephemeral reminder"))]
    ours = [m.get("role") == "user" and text_of(m).startswith(PROMPTS) for m in messages]
    reads = 0
    for message, prompt in zip(reversed(messages), reversed(ours)):
        if message.get("role") == "user":
            if not prompt:
                return None
            break
        reads += message.get("role") == "tool"
    return sum(ours), reads


def script(steps: int, read: Callable[[str], tuple[str, dict]]):
    """In each turn: ``steps`` reads, each of a different small file, then an answer. Side
    requests get a short answer at once."""

    def respond(body: dict) -> dict:
        position = turn_of(body)
        if position is None:
            return {"text": "ok"}
        turn, reads = position
        if reads >= steps:
            return {"text": "done", "chunk_size": 100}
        name, arguments = read(f"small-{turn}-{reads}.txt")
        return {"tool_calls": [{"id": f"c{turn}-{reads}", "name": name, "arguments": arguments}]}

    return respond


def model_round_trip(python: str, base_url: str, rounds: int) -> float:
    out = subprocess.run([python, "-c", ROUND_TRIP, base_url, str(rounds)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


async def idle(server: ScriptedOpenAIServer, quiet: float = 0.5, limit: float = 30) -> None:
    """Wait until the server has sent the model nothing for ``quiet`` seconds."""
    deadline = time.monotonic() + limit
    seen = -1
    while time.monotonic() < deadline and seen != len(server.requests):
        seen = len(server.requests)
        await asyncio.sleep(quiet)


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def measure(
    command: list[str],
    env_for: Callable[[str], dict],
    python: str,
    read: Callable[[str], tuple[str, dict]],
    project: Path,
    steps: int,
    rounds: int,
    allow: bool,
) -> dict:
    """One server: ``env_for(base_url)`` gives its environment for the scripted model's URL."""
    with ScriptedOpenAIServer(script(steps, read)) as server:
        env = env_for(server.base_url)
        client = QuietClient(allow)
        per_step = []
        async with acp.spawn_agent_process(
            client, command[0], *command[1:], env=env, cwd=project, transport_kwargs={"stderr": subprocess.DEVNULL}
        ) as (conn, process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("warm up")])
            for _ in range(rounds):
                started = time.perf_counter()
                answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("read it")])
                per_step.append((time.perf_counter() - started) * 1000 / (steps + 1))
                assert answer.stop_reason == "end_turn", answer
            await idle(server)
            idle_rss = rss_kb(process.pid)
        calls = sum(1 for r in server.requests if turn_of(r) is not None)
        side_requests = len(server.requests) - calls
        model_ms = model_round_trip(python, server.base_url, 30)
    assert calls == (rounds + 1) * (steps + 1), f"{calls} model calls for {rounds + 1} turns of {steps} steps"
    step = statistics.median(per_step)
    return {
        "step_ms": round(step, 2),
        "model_round_trip_ms": round(model_ms, 2),
        "overhead_per_step_ms": round(step - model_ms, 2),
        "idle_rss_mb": round(idle_rss / 1024, 1),
        "permission_requests": client.permission_requests,
        "side_requests": side_requests,
    }


async def run(steps: int, rounds: int, reference: Reference | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        for turn in range(1, rounds + 2):
            for n in range(steps):
                (project / f"small-{turn}-{n}.txt").write_text("hello\n" * 20)

        def env_for(base_url: str) -> dict:
            return {
                "PATH": os.environ["PATH"],
                "HOME": str(Path(tmp) / "ours"),
                "HERMES_EDITOR_HOME": str(Path(tmp) / "ours" / "home"),
                "HERMES_QUIET": "1",
                "OPENAI_BASE_URL": base_url,
                "OPENAI_API_KEY": "sk-bench-000000",
                "HERMES_MODEL": "openai:scripted",
            }

        def read_call(path: str) -> tuple[str, dict]:
            return "read_file", {"path": path}

        command = [str(Path(sys.executable).parent / "hermes-acp")]
        ours = await measure(command, env_for, sys.executable, read_call, project, steps, rounds, allow=False)
        del ours["permission_requests"]
        result = {"benchmark": "acp_step_overhead", "steps_per_turn": steps, "rounds": rounds, **ours}
        if reference:
            home = Path(tmp) / "reference"
            theirs = await measure(
                reference.acp_command,
                lambda base_url: reference.env(home, base_url),
                reference.python,
                reference.read_call,
                project,
                steps,
                rounds,
                allow=True,
            )
            result["reference"] = {"name": reference.name, "read_tool": reference.read_call("x")[0], **theirs}
            result["reference_over_ours"] = {
                key: ratio(theirs[key], ours[key]) for key in ("step_ms", "overhead_per_step_ms", "idle_rss_mb")
            }
    result["targets"] = {"overhead_per_step_ms": 5, "idle_rss_mb": 90}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    add_option(parser)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args.steps, args.rounds, find(args.reference_venv))), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
