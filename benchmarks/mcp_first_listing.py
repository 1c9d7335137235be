"""Cold start of hermes-mcp up to its first listings: spawn -> ``tools/list``, ``prompts/list``, ``resources/list``.

A client such as Claude Desktop lists tools, prompts and resources right after the handshake;
until those answers come, the server shows as starting. Each round spawns ``hermes-mcp`` on
stdio in a state home holding a skill, both memory files and a few sessions, and sends what
such a client sends, in both protocol eras:

- the handshake era (2025-11-25): ``initialize``, ``notifications/initialized``, then the
  three listings;
- the 2026-07-28 era: the three listings, each carrying the per-request envelope.

Every answer is timed from the spawn. The same rounds run with the early answers switched off
(``HERMES_MCP_NO_FAST_INIT=1``: the SDK answers everything, as a server without an early path
would), and, for the first spawn after an install or an upgrade, with no tool listing kept
from an earlier start (``cold``). Prints JSON with the median and spread of each figure.
Timings are never asserted anywhere.

Run: .venv/bin/python benchmarks/mcp_first_listing.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LISTINGS = ("tools/list", "prompts/list", "resources/list")
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def _messages(era: str) -> list[dict]:
    if era == "2025-11-25":
        listings = [{"jsonrpc": "2.0", "id": n + 2, "method": m} for n, m in enumerate(LISTINGS)]
        return [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *listings]
    return [{"jsonrpc": "2.0", "id": n + 2, "method": m, "params": {"_meta": ENVELOPE}} for n, m in enumerate(LISTINGS)]


def one_round(command: list[str], env: dict, cwd: Path, era: str) -> dict[str, float]:
    """Spawn, send the era's opening at once (as clients pipeline it), time each answer from the spawn."""
    messages = _messages(era)
    names = {m["id"]: m["method"] for m in messages if "id" in m}
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    assert proc.stdin and proc.stdout
    figures: dict[str, float] = {}
    try:
        # What a client sends before its first answer, then each listing as soon as it may.
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        proc.stdin.flush()
        while len(figures) < len(names):
            line = proc.stdout.readline()
            assert line, "hermes-mcp closed its output"
            answer = json.loads(line)
            if answer.get("id") in names:
                assert "result" in answer, answer
                figures[names[answer["id"]] + "_ms"] = (time.perf_counter() - started) * 1000
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return figures


async def _seed(home: Path) -> None:
    """A skill, both memory files and five sessions, as a home in use has."""
    os.environ["HERMES_EDITOR_HOME"] = str(home)
    from core.messages import UserMessage
    from core.store import SessionStore

    skill = home / "skills" / "release-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: release-notes\ndescription: Write release notes from the git log\n---\nRead the log.\n")
    memories = home / "memories"
    memories.mkdir(exist_ok=True)
    (memories / "MEMORY.md").write_text("The project uses uv.\n")
    (memories / "USER.md").write_text("Prefers short answers.\n")
    async with SessionStore.open() as store:
        for n in range(5):
            record = await store.create_session(cwd=f"/work/p{n}", surface="acp", model="openai:x", title=f"session {n}")
            await store.append_message(record.id, UserMessage.of(f"fix bug {n}"))


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}


def _summarise(rounds: list[dict[str, float]]) -> dict:
    return {key: summary([r[key] for r in rounds]) for key in rounds[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--code",
        metavar="DIR",
        help="measure the hermes-mcp of another tree of this repository (for example `git archive REV` unpacked), "
        "its packages first on PYTHONPATH, with this virtualenv's libraries",
    )
    args = parser.parse_args()
    command = [str(Path(sys.executable).parent / "hermes-mcp")]
    result: dict = {
        "benchmark": "mcp_first_listing",
        "command": "hermes-mcp (stdio); a home with a skill, memory and 5 sessions",
        "rounds": args.rounds,
        "machine": f"{os.cpu_count()} cores",
    }
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        home = base / "home"
        home.mkdir()
        (base / "user").mkdir()
        asyncio.run(_seed(home))
        env = {"PATH": os.environ["PATH"], "HOME": str(base / "user"), "HERMES_EDITOR_HOME": str(home), "HERMES_QUIET": "1"}
        if args.code:
            env["PYTHONPATH"] = str(Path(args.code).resolve())
            result["code"] = env["PYTHONPATH"]
        sdk_env = {**env, "HERMES_MCP_NO_FAST_INIT": "1"}
        for era in ("2025-11-25", "2026-07-28"):
            one_round(command, env, base, era)  # the first start keeps what later starts reuse
            early = []
            sdk = []
            cold = []
            for _ in range(args.rounds):
                early.append(one_round(command, env, base, era))
                sdk.append(one_round(command, sdk_env, base, era))
                shutil.rmtree(home / "cache", ignore_errors=True)
                cold.append(one_round(command, env, base, era))
            result[era] = {"early": _summarise(early), "sdk_only": _summarise(sdk), "cold": _summarise(cold)}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
