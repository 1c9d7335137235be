"""Replay time: session/load of a stored session with N messages, answered.

For each size: the time from the request to the answer once the server has started, the time
from the spawn, the updates sent, and the server's peak resident memory (VmHWM) by the answer.
Building a large session takes a while (each message is its own transaction, as the agent
writes them): ``--db PATH`` keeps the store built there and reuses it on later runs.
``--diff-lines N`` makes every diff N lines long on each side (20 by default): large messages,
to see the memory a replay holds stay bounded.
Run: .venv/bin/python benchmarks/acp_replay.py [--messages 5000[,50000]] [--rounds N] [--db PATH] [--code DIR] [--diff-lines N]
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
from typing import Any

from core.messages import AssistantMessage, FileDiff, TextPart, ToolCallPart, ToolResultMessage, UserMessage
from core.store import SessionStore


async def build_long_session(db: Path, cwd: Path, count: int, diff_lines: int = 20) -> str:
    """A session of ``count`` messages in groups of four: ask, call a tool, its diff (of
    ``diff_lines`` lines each side), answer."""
    store = await SessionStore.open(db)
    try:
        record = await store.create_session(cwd=str(cwd), surface="acp", model="openai:scripted", title="long")
        for i in range(count // 4):
            path = str(cwd / f"file{i % 50}.py")
            await store.append_message(record.id, UserMessage.of(f"Step {i}: change file {i % 50}"))
            call = ToolCallPart(id=f"c{i}", name="edit_file", arguments={"path": path, "old_string": "a", "new_string": "b"})
            await store.append_message(record.id, AssistantMessage(parts=[TextPart(text=f"Editing step {i}."), call]))
            diff = FileDiff(path=path, old_text="a = 1\n" * diff_lines, new_text="b = 1\n" * diff_lines)
            await store.append_message(
                record.id, ToolResultMessage(tool_call_id=f"c{i}", tool_name="edit_file", content="Edited.", diffs=[diff])
            )
            await store.append_message(record.id, AssistantMessage(parts=[TextPart(text=f"Done with step {i}.")]))
        return record.id
    finally:
        await store.close()


async def stored_session(db: Path, cwd: Path, count: int, diff_lines: int = 20) -> str:
    """The id of the session of ``count`` messages in ``db`` (titled for its size), built when missing."""
    title = f"long {count}" if diff_lines == 20 else f"long {count}, diffs of {diff_lines} lines"
    store = await SessionStore.open(db)
    try:
        for record in await store.list_sessions(limit=1000):
            if record.title == title and record.cwd == str(cwd) and await store.message_count(record.id) == count:
                return record.id
    finally:
        await store.close()
    session_id = await build_long_session(db, cwd, count, diff_lines)
    store = await SessionStore.open(db)
    try:
        await store.update_session(session_id, title=title)
    finally:
        await store.close()
    return session_id


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def one_round(env: dict, cwd: Path, session_id: str, *, warm: bool) -> tuple[float, int, float]:
    """Milliseconds until session/load is answered, the updates sent before the answer, and the
    server's peak resident memory (MB) by then.

    ``warm``: timed from the request, once the server has fully started (its ACP SDK loads
    after it answers ``initialize``); otherwise from the spawn.
    """
    spawned = time.perf_counter()
    command = str(Path(sys.executable).parent / "hermes-acp")
    proc = subprocess.Popen([command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin and stdout

    def send(message: dict) -> None:
        stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        stdin.flush()

    send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    stdout.readline()
    if warm:
        send({"id": 9, "method": "session/list", "params": {}})
        stdout.readline()
    started = time.perf_counter() if warm else spawned
    send({"id": 2, "method": "session/load", "params": {"cwd": str(cwd), "sessionId": session_id, "mcpServers": []}})
    updates = 0
    while True:
        message = json.loads(stdout.readline())
        if message.get("id") == 2:
            assert "result" in message, message
            break
        updates += 1
    elapsed = time.perf_counter() - started
    peak = peak_rss_mb(proc.pid)
    stdin.close()
    proc.wait(timeout=30)
    return elapsed * 1000, updates, peak


def main() -> int:
    import asyncio

    from hermes_cli.scripted_model import ScriptedOpenAIServer

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", default="5000", metavar="N[,N]", help="messages in the session; several sizes separated by commas")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", default="", metavar="PATH", help="keep the built sessions in this store and reuse them")
    parser.add_argument("--code", default="", metavar="DIR", help="run the server from another tree of the repository (a before/after)")
    parser.add_argument("--diff-lines", type=int, default=20, metavar="N", help="lines on each side of every diff (large messages)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.messages.split(",") if n.strip()]
    with ScriptedOpenAIServer([]) as server, tempfile.TemporaryDirectory() as tmp:
        home, cwd = Path(tmp) / "home", Path(args.db).resolve().parent / "replay-project" if args.db else Path(tmp) / "project"
        home.mkdir()
        cwd.mkdir(exist_ok=True)
        if args.db:
            (home / "state.db").symlink_to(Path(args.db).resolve())
        session_ids = {size: asyncio.run(stored_session(home / "state.db", cwd, size, args.diff_lines)) for size in sizes}
        env = {
            "PATH": os.environ["PATH"],
            "HOME": tmp,
            "HERMES_EDITOR_HOME": str(home),
            "HERMES_QUIET": "1",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-bench-000000",
            "HERMES_MODEL": "openai:scripted",
        }
        if args.code:
            env["PYTHONPATH"] = str(Path(args.code).resolve())
        results = []
        for size in sizes:
            warm = [one_round(env, cwd, session_ids[size], warm=True) for _ in range(args.rounds)]
            cold = [one_round(env, cwd, session_ids[size], warm=False) for _ in range(args.rounds)]
            times, spawned = [r[0] for r in warm], [r[0] for r in cold]
            results.append(
                {
                    "messages": size,
                    "updates_sent": warm[0][1],
                    "load_ms": {"median": round(statistics.median(times), 1), "max": round(max(times), 1)},
                    "spawn_to_loaded_ms": {"median": round(statistics.median(spawned), 1), "max": round(max(spawned), 1)},
                    "peak_rss_mb": round(statistics.median(r[2] for r in cold), 1),
                }
            )
    result: dict[str, Any] = (
        {"benchmark": "acp_replay", **results[0]} if len(results) == 1 else {"benchmark": "acp_replay", "sizes": results}
    )
    if args.code:
        result["code"] = env["PYTHONPATH"]
    if args.diff_lines != 20:
        result["diff_lines"] = args.diff_lines
    result["target"] = {"spawn_to_loaded_ms_at_50000": 1500}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
