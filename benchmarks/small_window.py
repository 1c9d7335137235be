"""A long turn in small context windows: twelve 7 KB files read one per step, then an answer.

A real ``hermes-acp`` runs the turn against the scripted model, once per window (configured as
``[providers.openai] context_window`` in config.toml, as a user sets it for a local model). For
each window it prints: the turn's model requests, the largest one in estimated tokens (its
bytes / 3.5, the ratio of the agent's own estimate) beside the window, and with the reply it may
ask for (``max_tokens``) added, the largest context the
agent reported in ``usage_update``, the summary requests and how many steps each buys, the tokens
sent in the turn (the same estimate, summed), and how often a request did not repeat the one
before it byte for byte as its prefix (a prompt-cache miss; a compression causes one).
Run: .venv/bin/python benchmarks/small_window.py [--windows 8000,32000,128000] [--files 12] [--file-kb 7] [--rounds 1]
[--code DIR] (``--code``: run the server from another tree of the repository, for a before/after)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import acp
from acp.schema import ClientCapabilities

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hermes_cli.scripted_model import ScriptedOpenAIServer  # noqa: E402

BIN = Path(sys.executable).parent
SUMMARY_MARK = "Summarise the conversation above"
CHARS_PER_TOKEN = 3.5  # the agent's estimate (core.learning.compression.estimate_tokens)


def estimated_tokens(body: dict) -> int:
    """A request's size in tokens by the agent's ratio: its JSON bytes / 3.5."""
    return math.ceil(len(json.dumps(body)) / CHARS_PER_TOKEN)


def file_text(index: int, size: int) -> str:
    """About ``size`` bytes of code-like lines, different in every file."""
    lines, total, n = [], 0, 0
    while total < size:
        line = f"def handler_{index}_{n}(request, retries={n % 7}):  # step {n} of module {index}\n"
        lines.append(line)
        total += len(line)
        n += 1
    return "".join(lines)[:size]


def is_summary(body: dict) -> bool:
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
    return SUMMARY_MARK in text


class Script:
    """The model of the turn: read file i at step i, then answer; a summary request gets a summary."""

    def __init__(self, files: int) -> None:
        self.files = files
        self.step = 0

    def __call__(self, body: dict) -> dict:
        if is_summary(body):
            done = ", ".join(f"file{i:02d}.py" for i in range(self.step))
            return {"text": f"SUMMARY: the user asked to read the project's files one by one; read so far: {done}."}
        if not body.get("tools"):
            return {"text": "ok"}
        step, self.step = self.step, self.step + 1
        if step < self.files:
            return {"tool_calls": [{"id": f"read{step}", "name": "read_file", "arguments": {"path": f"file{step:02d}.py"}}]}
        return {"text": f"I read all {self.files} files.", "chunk_size": 200}


class Client:
    def __init__(self) -> None:
        self.usage: list[tuple[int, int]] = []

    async def session_update(self, session_id, update, **_):
        if getattr(update, "session_update", None) == "usage_update":
            self.usage.append((update.used, update.size))

    async def request_permission(self, options, session_id, tool_call, **_):
        raise AssertionError("reading inside the project never asks")

    def on_connect(self, conn):
        pass


def prefix_misses(bodies: list[dict]) -> int:
    """Requests of the turn (summary requests aside) whose messages do not start with the
    previous request's, byte for byte, or whose tools differ from its."""
    misses = 0
    for before, after in zip(bodies, bodies[1:]):
        head = json.dumps(before["messages"])[:-1]
        if not json.dumps(after["messages"]).startswith(head) or before.get("tools") != after.get("tools"):
            misses += 1
    return misses


async def run_turn(window: int, files: int, file_kb: float, home: Path, project: Path, code: str = "") -> dict:
    script = Script(files)
    with ScriptedOpenAIServer(script) as server:
        (home / "config.toml").write_text(
            'model = "openai:scripted"\n\n[providers.openai]\n'
            f'base_url = "{server.base_url}"\napi_key = "sk-bench-000000000000"\ncontext_window = {window}\n'
        )
        env = {"HERMES_EDITOR_HOME": str(home), "HOME": str(home.parent / "user-home"), "PATH": os.environ["PATH"], "HERMES_QUIET": "1"}
        if code:
            env["PYTHONPATH"] = code
        client = Client()
        async with acp.spawn_agent_process(
            client, str(BIN / "hermes-acp"), env=env, cwd=str(project), transport_kwargs={"stderr": subprocess.DEVNULL}
        ) as (conn, _process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            started = time.perf_counter()
            answer = await conn.prompt(session_id=sid, prompt=[acp.text_block(f"Read the {files} files of this project, one at a time.")])
            elapsed = time.perf_counter() - started
        assert answer.stop_reason == "end_turn", answer
        bodies = list(server.requests)
    summaries = [b for b in bodies if is_summary(b)]
    steps = [b for b in bodies if b.get("tools") and not is_summary(b)]
    assert len(steps) == files + 1, f"{len(steps)} steps for {files} reads and an answer"
    sizes = [estimated_tokens(b) for b in bodies]
    replies = [int(b.get("max_completion_tokens") or b.get("max_tokens") or 0) for b in bodies]
    return {
        "window": window,
        "requests": len(bodies),
        "steps": len(steps),
        "largest_request_tokens": max(sizes),
        "largest_request_plus_reply": max(size + reply for size, reply in zip(sizes, replies)),
        "largest_reported_used": max((used for used, _ in client.usage), default=0),
        "reported_size": max((size for _, size in client.usage), default=0),
        "summary_requests": len(summaries),
        "steps_per_summary": round(len(steps) / len(summaries), 1) if summaries else None,
        "tokens_sent": sum(sizes),
        "prefix_misses": prefix_misses(steps),
        "turn_ms": round(elapsed * 1000, 1),
    }


async def main(windows: list[int], files: int, file_kb: float, rounds: int, code: str = "") -> dict:
    results: dict[int, list[dict]] = {w: [] for w in windows}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        for i in range(files):
            (project / f"file{i:02d}.py").write_text(file_text(i, int(file_kb * 1024)))
        for r in range(rounds):
            for window in windows:  # rounds interleaved across windows
                home = Path(tmp) / f"home-{window}-{r}"
                home.mkdir(mode=0o700)
                results[window].append(await run_turn(window, files, file_kb, home, project, code))
    rows = []
    for window, runs in results.items():
        row = dict(runs[0])
        row["turn_ms"] = round(statistics.median(r["turn_ms"] for r in runs), 1)
        row["over_window"] = row["largest_request_plus_reply"] > window or row["largest_reported_used"] > window
        rows.append(row)
    figures = {"benchmark": "small_window", "files": files, "file_kb": file_kb, "rounds": rounds, "windows": rows}
    return {**figures, "code": code} if code else figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", default="8000,32000,128000", help="context windows in tokens, comma-separated")
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--file-kb", type=float, default=7.0)
    parser.add_argument("--rounds", type=int, default=1, help="turns per window (figures other than time are the same each round)")
    parser.add_argument("--code", default="", metavar="DIR", help="run the server from another tree of the repository (a before/after)")
    args = parser.parse_args()
    code = str(Path(args.code).resolve()) if args.code else ""
    figures = asyncio.run(main([int(w) for w in args.windows.split(",")], args.files, args.file_kb, args.rounds, code))
    print(json.dumps(figures, indent=2))
