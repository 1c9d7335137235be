"""Time to edit a 10 MB file and produce its diff, through the one dispatch path.

The edit is a one-line replacement near the middle of a 10 MB source file, made with edit_file
on the local host in auto mode: read, match, stale check, diffs (the user's and the model's),
checkpoint into the shadow repository, atomic write. Also timed on their own: the matching
(exact, and tolerant after an indentation slip) and the diffs.

Run: .venv/bin/python benchmarks/edit_large_file.py [--rounds 5] [--mb 10]
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.host.checkpoints import Checkpoints
from core.host.local import LocalHost
from core.messages import ToolCallPart
from core.policy.approvals import ApprovalBroker, ApprovalPolicy
from core.tools.context import ToolContext
from core.tools.diffs import FileLedger, display_diff
from core.tools.dispatch import run_tool
from toolsets import toolset
from toolsets.editor.common import unified_diff
from toolsets.editor.edits import apply_edit


def make_source(megabytes: int) -> str:
    lines, size, i = [], 0, 0
    while size < megabytes * 1_000_000:
        line = f"def function_{i}(value):\n    return value * {i} + {i % 7}  # computed\n\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines)


async def one_round(root: Path, text: str, target_index: int) -> dict:
    path = root / "big.py"
    path.write_text(text)
    old = f"    return value * {target_index} + {target_index % 7}  # computed\n"
    new = f"    return value * {target_index} + 1  # edited\n"

    async def emit(_event) -> None:
        return None

    ctx = ToolContext(
        session_id="bench",
        cwd=root,
        roots=[root],
        host=LocalHost(),
        policy=ApprovalPolicy(mode="auto", roots=[root]),
        broker=ApprovalBroker(None),
        emit=emit,
        turn_id=f"turn-{time.monotonic_ns()}",
        checkpoints=Checkpoints(root.parent / "checkpoints"),
        files=FileLedger(),
    )
    tools = {t.name: t for t in toolset("editor")}
    started = time.perf_counter()
    run = await run_tool(
        tools, ToolCallPart(id="c", name="edit_file", arguments={"path": "big.py", "old_string": old, "new_string": new}), ctx
    )
    total = time.perf_counter() - started
    assert not run.failed, run.result.content
    assert path.read_text().count("# edited") == 1

    started = time.perf_counter()
    applied = apply_edit(text, old, new)
    match = time.perf_counter() - started
    started = time.perf_counter()
    # The same edit with its lines indented one level too deep: the tolerant (line by line) path.
    header = f"def function_{target_index}(value):\n"
    slipped = apply_edit(text, "    " + header + "    " + old, "    " + header + "    " + new)
    tolerant = time.perf_counter() - started
    assert slipped.note.startswith("indentation")
    started = time.perf_counter()
    model_diff = unified_diff(text, applied.text, "big.py")
    user_diff = display_diff(path, text, applied.text)
    diffs = time.perf_counter() - started
    return {
        "edit_file_total_ms": total * 1000,
        "exact_match_ms": match * 1000,
        "tolerant_match_ms": tolerant * 1000,
        "diffs_ms": diffs * 1000,
        "model_diff_bytes": len(model_diff),
        "user_diff_bytes": len(user_diff.old_text or "") + len(user_diff.new_text),
    }


async def measure(rounds: int, megabytes: int) -> dict:
    text = make_source(megabytes)
    target = text.count("def function_") // 2
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("HERMES_EDITOR_HOME", str(Path(tmp) / "home"))
        for n in range(rounds):
            root = Path(tmp) / f"project-{n}"
            root.mkdir()
            results.append(await one_round(root.resolve(), text, target))
    figures = {key: round(statistics.median(r[key] for r in results), 1) for key in results[0]}
    return {"benchmark": "edit_large_file", "file_bytes": len(text.encode()), "lines": text.count("\n"), "rounds": rounds, **figures}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mb", type=int, default=10)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.rounds, args.mb)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
