"""Server overhead per tool step: an instant scripted model asks for N reads of small files.

Each step reads a different small file (the reference answers a repeated read of one file with
"unchanged" and then refuses it). Per step = (turn time) / (steps + 1 model calls); the model's
own round trip is measured alone with the server's own Python and ``openai`` SDK against the
same scripted model and subtracted. Also reports the server's resident memory once idle after
the turns (no model request for 0.5 s). Where the reference is installed
(benchmarks/reference.py), its ``hermes-acp`` is measured the same way with its own read tool,
and the ratios reference / ours are printed. Model requests outside the turns (a title, the
reference's background review) are answered at once with a short text and counted.

``--history 10,2000``: the same turns in sessions that already hold that many messages (written
to the store before the server starts, then opened with ``session/load``), one session per size
in one server, their rounds interleaved; prints each size side by side and the ratio of the
largest to the smallest. Each request of a long session is larger, so the model's round trip is
also measured with the largest request of each session sent as it is (``same_size``), and the
overhead beyond it printed too. The model's window is set large (2M tokens) so that no request
is compressed. No reference (it cannot open our sessions).
Run: .venv/bin/python benchmarks/acp_step_overhead.py [--steps N] [--rounds N] [--history N,N] [--reference-venv PATH]
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
from core.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolResultMessage, UserMessage, dump_message
from hermes_cli.scripted_model import ScriptedOpenAIServer

# Run with each server's own interpreter, so that the round trip is the one its SDK makes.
ROUND_TRIP = """
import asyncio, statistics, sys, time
import openai

async def main(base_url, rounds, body_file=None):
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench-000000", max_retries=0)
    body = None
    if body_file:  # a request of the server's, sent as it is (as the server sends it)
        import json
        with open(body_file) as handle:
            body = json.load(handle)
        model = body.pop("model", "scripted")
        body.pop("stream", None)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        if body is None:
            stream = await client.chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": "x"}], stream=True, stream_options={"include_usage": True}
            )
        else:
            stream = await client.chat.completions.create(model=model, messages=[], stream=True, extra_body=body)
        async for _chunk in stream:
            pass
        times.append(time.perf_counter() - started)
    await client.close()
    print(statistics.median(times) * 1000)

asyncio.run(main(*sys.argv[1:2], int(sys.argv[2]), *sys.argv[3:4]))
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


def model_round_trip(python: str, base_url: str, rounds: int, body: dict | None = None) -> float:
    """Median milliseconds of one streamed request, a one-word one or ``body`` as it is."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as handle:
        extra = []
        if body is not None:
            json.dump(body, handle)
            handle.flush()
            extra = [handle.name]
        out = subprocess.run([python, "-c", ROUND_TRIP, base_url, str(rounds), *extra], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


async def idle(server: ScriptedOpenAIServer, quiet: float = 0.5, limit: float = 30) -> None:
    """Wait until the server has sent the model nothing for ``quiet`` seconds."""
    deadline = time.monotonic() + limit
    seen = -1
    while time.monotonic() < deadline and seen != len(server.requests):
        seen = len(server.requests)
        await asyncio.sleep(quiet)


def cpu_ms(pid: int) -> float:
    """CPU time the process has used, in milliseconds: the run time of each of its threads (in
    nanoseconds, /proc/PID/task/*/schedstat), or its user and system ticks where that is missing."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as handle:
                total += int(handle.read().split()[0])
        return total / 1e6
    except (OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


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


def seeded_history(count: int) -> list[Message]:
    """``count`` earlier messages: exchanges of a question, a read, its output and an answer."""
    out: list[Message] = []
    i = 0
    while len(out) + 4 <= count:
        call = ToolCallPart(id=f"s{i}", name="read_file", arguments={"path": f"notes-{i % 50}.txt"})
        out.append(UserMessage.of(f"Step {i}: what does notes {i % 50} say?"))
        out.append(AssistantMessage(parts=[TextPart(text="Reading it."), call], model="openai:scripted"))
        out.append(ToolResultMessage(tool_call_id=f"s{i}", tool_name="read_file", content=f"note {i}: all is well\n" * 3))
        out.append(AssistantMessage(parts=[TextPart(text=f"Notes {i % 50} say all is well (step {i}).")], model="openai:scripted"))
        i += 1
    while len(out) < count:
        out.append(UserMessage.of("And then?") if len(out) % 2 == 0 else AssistantMessage(parts=[TextPart(text="Nothing more.")]))
    return out


# Run with the server's code (``--code``), so that the store has the schema that code makes.
SEED = """
import asyncio, json, sys
from core.messages import load_message
from core.store import SessionStore

async def main(db, cwd, plan):
    ids = {}
    async with SessionStore.open(db) as store:
        for size, messages in plan.items():
            record = await store.create_session(cwd=cwd, surface="acp", model="openai:scripted", title=f"{size} messages")
            for message in messages:
                await store.append_message(record.id, load_message(message))
            ids[size] = record.id
    print(json.dumps(ids))

asyncio.run(main(sys.argv[1], sys.argv[2], json.load(sys.stdin)))
"""


def seed_sessions(db: Path, cwd: Path, sizes: list[int], code: str = "") -> dict[int, str]:
    """A stored session per size holding that many messages; their ids by size."""
    plan = {size: [dump_message(m) for m in seeded_history(size)] for size in sizes}
    env = {**os.environ, "PYTHONPATH": code} if code else None
    # Not from the current folder: ``python -c`` would import the code there before PYTHONPATH's.
    out = subprocess.run(
        [sys.executable, "-c", SEED, str(db), str(cwd)],
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=db.parent,
    )
    return {int(size): sid for size, sid in json.loads(out.stdout).items()}


async def measure_histories(
    command: list[str], env_for: Callable[[str], dict], project: Path, db: Path, steps: int, rounds: int, sizes: list[int]
) -> dict:
    """Per size, the overhead per step of turns in a session that already holds that many
    messages; the sizes' rounds interleaved in one server. After each turn the model's round trip
    is measured from here (the same SDK as the server's), for a one-word request and for the
    turn's last request sent as it is, so that each turn's figure subtracts a round trip taken
    under the same load."""
    import openai

    ids = seed_sessions(db, project, sizes, env_for("").get("PYTHONPATH", ""))

    def read_call(path: str) -> tuple[str, dict]:
        return "read_file", {"path": path}

    async def round_trip(model: openai.AsyncOpenAI, body: dict | None, times: int = 5) -> float:
        took = []
        for _ in range(times):
            started = time.perf_counter()
            if body is None:
                stream = await model.chat.completions.create(
                    model="scripted", messages=[{"role": "user", "content": "x"}], stream=True, stream_options={"include_usage": True}
                )
            else:
                stream = await model.chat.completions.create(model="scripted", messages=[], stream=True, extra_body=body)
            async for _chunk in stream:
                pass
            took.append(time.perf_counter() - started)
        return statistics.median(took) * 1000

    with ScriptedOpenAIServer(script(steps, read_call)) as server:
        client = QuietClient(allow=False)
        model = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-bench-000000", max_retries=0)
        # (step, small round trip, same-size round trip, server CPU per step)
        rows: dict[int, list[tuple[float, float, float, float]]] = {size: [] for size in sizes}
        largest: dict[int, dict] = {}
        calls = 0  # model requests of the measured turns
        async with acp.spawn_agent_process(
            client, command[0], *command[1:], env=env_for(server.base_url), cwd=project, transport_kwargs={"stderr": subprocess.DEVNULL}
        ) as (conn, process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
            for size in sizes:
                await conn.load_session(cwd=str(project), session_id=ids[size], mcp_servers=[])
                await conn.prompt(session_id=ids[size], prompt=[acp.text_block("warm up")])
            await round_trip(model, None)  # the SDK's own first-use costs
            for _ in range(rounds):
                for size in sizes:
                    before = len(server.requests)
                    cpu = cpu_ms(process.pid)
                    started = time.perf_counter()
                    answer = await conn.prompt(session_id=ids[size], prompt=[acp.text_block("read it")])
                    step = (time.perf_counter() - started) * 1000 / (steps + 1)
                    cpu = (cpu_ms(process.pid) - cpu) / (steps + 1)
                    assert answer.stop_reason == "end_turn", answer
                    calls += sum(1 for r in server.requests[before:] if turn_of(r) is not None and _session_of(r, size))
                    # The turn's last request: the largest it sent.
                    last = dict(server.requests[-1])
                    assert turn_of(last) is not None and _session_of(last, size), (
                        f"the turn's last request: {turn_of(last)}, {[(m.get('role'), text_of(m)[:40]) for m in last.get('messages', [])][-3:]}"
                    )
                    largest[size] = last
                    body = {k: v for k, v in last.items() if k not in ("model", "stream")}
                    rows[size].append((step, await round_trip(model, None), await round_trip(model, body), cpu))
            await idle(server)
            idle_rss = rss_kb(process.pid)
        await model.close()
        assert calls == len(sizes) * rounds * (steps + 1), f"{calls} model calls in {len(sizes) * rounds} turns of {steps} steps"
    figures = {}
    for size in sizes:
        step = statistics.median(r[0] for r in rows[size])
        figures[str(size)] = {
            "messages_in_last_request": len(largest[size]["messages"]),
            "last_request_kb": round(len(json.dumps(largest[size])) / 1024, 1),
            "step_ms": round(step, 2),
            "model_round_trip_ms": round(statistics.median(r[1] for r in rows[size]), 2),
            "overhead_per_step_ms": round(statistics.median(r[0] - r[1] for r in rows[size]), 2),
            "model_round_trip_same_size_ms": round(statistics.median(r[2] for r in rows[size]), 2),
            "overhead_beyond_same_size_ms": round(statistics.median(r[0] - r[2] for r in rows[size]), 2),
            "server_cpu_per_step_ms": round(statistics.median(r[3] for r in rows[size]), 2),
        }
    low, high = figures[str(min(sizes))], figures[str(max(sizes))]
    return {
        "histories": figures,
        "largest_over_smallest": {
            key: ratio(high[key], low[key])
            for key in ("step_ms", "overhead_per_step_ms", "overhead_beyond_same_size_ms", "server_cpu_per_step_ms")
        },
        "idle_rss_mb": round(idle_rss / 1024, 1),
    }


def _session_of(body: dict, size: int) -> bool:
    """Whether a turn request belongs to the session seeded with ``size`` messages (told apart by
    how many messages come before its first prompt)."""
    messages = body.get("messages") or []
    first = next((i for i, m in enumerate(messages) if m.get("role") == "user" and text_of(m).startswith(PROMPTS)), None)
    return first is not None and first - (1 if messages and messages[0].get("role") == "system" else 0) == size


async def run(steps: int, rounds: int, reference: Reference | None, histories: list[int] | None = None, code: str = "") -> dict:
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
                **({"PYTHONPATH": code} if code else {}),
            }

        def read_call(path: str) -> tuple[str, dict]:
            return "read_file", {"path": path}

        command = [str(Path(sys.executable).parent / "hermes-acp")]
        if histories:
            db = Path(tmp) / "ours" / "home" / "state.db"
            db.parent.mkdir(parents=True)
            # Steady steps, not compression: a window the longest session stays well inside.
            (db.parent / "config.toml").write_text("[providers.openai]\ncontext_window = 2000000\n")
            figures = await measure_histories(command, env_for, project, db, steps, rounds, histories)
            return {"benchmark": "acp_step_overhead", "steps_per_turn": steps, "rounds": rounds, **figures, "target_ratio": 1.5}
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
    parser.add_argument(
        "--history", default="", metavar="N,N", help="messages already in the session, per size (e.g. 10,2000); no reference"
    )
    parser.add_argument("--code", default="", metavar="DIR", help="run the server from another tree of the repository (a before/after)")
    add_option(parser)
    args = parser.parse_args()
    histories = sorted({int(n) for n in args.history.split(",") if n.strip()})
    reference = None if histories else find(args.reference_venv)
    code = str(Path(args.code).resolve()) if args.code else ""
    result = asyncio.run(run(args.steps, args.rounds, reference, histories, code))
    if code:
        result["code"] = code
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
