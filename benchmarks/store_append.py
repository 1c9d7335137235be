"""Appending a message to the store: p50/p95/p99 over many appends, with and without a large history.

Run: .venv/bin/python benchmarks/store_append.py [--count 2000] [--prefill 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from core.messages import AssistantMessage, TextPart, ToolCallPart, ToolResultMessage, UserMessage
from core.store import SessionStore

MESSAGES = [
    UserMessage.of("Please refactor the parser so that it handles nested brackets and report the result."),
    AssistantMessage(
        parts=[TextPart(text="Reading the parser first."), ToolCallPart(id="c", name="read_file", arguments={"path": "src/parser.py"})]
    ),
    ToolResultMessage(tool_call_id="c", tool_name="read_file", content="     1\tdef parse(text):\n" * 40),
    AssistantMessage(parts=[TextPart(text="The parser now handles nested brackets; tests pass.")]),
]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def measure(count: int, prefill: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        store = await SessionStore.open(Path(tmp) / "state.db")
        try:
            filler = await store.create_session(cwd=tmp, surface="acp")
            for i in range(prefill):
                await store.append_message(filler.id, MESSAGES[i % 4])
            session = await store.create_session(cwd=tmp, surface="acp")
            times = []
            for i in range(count):
                started = time.perf_counter()
                await store.append_message(session.id, MESSAGES[i % 4])
                times.append((time.perf_counter() - started) * 1000)
        finally:
            await store.close()
    return {
        "prefilled_messages": prefill,
        "appends": count,
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(percentile(times, 0.95), 3),
        "p99_ms": round(percentile(times, 0.99), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--prefill", type=int, default=100_000)
    args = parser.parse_args()
    results = [asyncio.run(measure(args.count, 0)), asyncio.run(measure(args.count, args.prefill))]
    print(json.dumps({"benchmark": "store_append", "target_p95_ms": 2, "runs": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
