"""Replay time: session/load of a stored session with N messages, answered.

Run: .venv/bin/python benchmarks/acp_replay.py [--messages 5000]
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

from core.messages import AssistantMessage, FileDiff, TextPart, ToolCallPart, ToolResultMessage, UserMessage
from core.store import SessionStore


async def build_long_session(db: Path, cwd: Path, count: int) -> str:
    """A session of ``count`` messages in groups of four: ask, call a tool, its diff, answer."""
    store = await SessionStore.open(db)
    try:
        record = await store.create_session(cwd=str(cwd), surface="acp", model="openai:scripted", title="long")
        for i in range(count // 4):
            path = str(cwd / f"file{i % 50}.py")
            await store.append_message(record.id, UserMessage.of(f"Step {i}: change file {i % 50}"))
            call = ToolCallPart(id=f"c{i}", name="edit_file", arguments={"path": path, "old_string": "a", "new_string": "b"})
            await store.append_message(record.id, AssistantMessage(parts=[TextPart(text=f"Editing step {i}."), call]))
            diff = FileDiff(path=path, old_text="a = 1\n" * 20, new_text="b = 1\n" * 20)
            await store.append_message(
                record.id, ToolResultMessage(tool_call_id=f"c{i}", tool_name="edit_file", content="Edited.", diffs=[diff])
            )
            await store.append_message(record.id, AssistantMessage(parts=[TextPart(text=f"Done with step {i}.")]))
        return record.id
    finally:
        await store.close()


def one_round(env: dict, cwd: Path, session_id: str, *, warm: bool) -> tuple[float, int]:
    """Milliseconds until session/load is answered, and the updates sent before the answer.

    ``warm``: timed from the request, once the server has fully started (its ACP SDK loads
    after it answers ``initialize``); otherwise from the spawn.
    """
    spawned = time.perf_counter()
    command = str(Path(sys.executable).parent / "hermes-acp")
    proc = subprocess.Popen([command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    assert proc.stdin and proc.stdout

    def send(message: dict) -> None:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        proc.stdin.flush()

    send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    proc.stdout.readline()
    if warm:
        send({"id": 9, "method": "session/list", "params": {}})
        proc.stdout.readline()
    started = time.perf_counter() if warm else spawned
    send({"id": 2, "method": "session/load", "params": {"cwd": str(cwd), "sessionId": session_id, "mcpServers": []}})
    updates = 0
    while True:
        message = json.loads(proc.stdout.readline())
        if message.get("id") == 2:
            assert "result" in message, message
            break
        updates += 1
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=10)
    return elapsed * 1000, updates


def main() -> int:
    import asyncio

    from hermes_cli.scripted_model import ScriptedOpenAIServer

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with ScriptedOpenAIServer([]) as server, tempfile.TemporaryDirectory() as tmp:
        home, cwd = Path(tmp) / "home", Path(tmp) / "project"
        home.mkdir()
        cwd.mkdir()
        session_id = asyncio.run(build_long_session(home / "state.db", cwd, args.messages))
        env = {
            "PATH": os.environ["PATH"],
            "HOME": tmp,
            "HERMES_EDITOR_HOME": str(home),
            "HERMES_QUIET": "1",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-bench-000000",
            "HERMES_MODEL": "openai:scripted",
        }
        rounds = [one_round(env, cwd, session_id, warm=True) for _ in range(args.rounds)]
        cold = [one_round(env, cwd, session_id, warm=False)[0] for _ in range(args.rounds)]
    times = [r[0] for r in rounds]
    print(
        json.dumps(
            {
                "benchmark": "acp_replay",
                "messages": args.messages,
                "updates_sent": rounds[0][1],
                "load_ms": {"median": round(statistics.median(times), 1), "max": round(max(times), 1)},
                "spawn_to_loaded_ms": {"median": round(statistics.median(cold), 1), "max": round(max(cold), 1)},
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
