"""The per-command cost of the sandbox: ``true`` spawned outside it and inside it, side by side.

Outside is the path ``LocalHost`` takes without a confinement (``/bin/sh -c true`` through an
asyncio subprocess); inside is ``LocalHost`` with a ``Confinement`` on a temporary project that
holds a ``.git`` directory (so the protected paths are bound read-only again, as in a real
project). Both are timed as the bare spawn (argv already built, spawn -> exit) and as the
host's whole ``run_command`` (argv, environment, spawn, output pump, exit); the rounds are
interleaved so that both sides see the same machine. Also timed on their own: what the tool
path adds before a sandboxed command (``protected_entries`` of the roots) and building the
bubblewrap argv (which scans the roots and the home for paths to hide). Prints JSON: median and
p95 of each, the difference inside - outside, and what the host's ``run_command`` adds to a bare
spawn of ``/bin/sh -c true`` (``run_command_over_bare``: the unsandboxed and the sandboxed
command, each minus the bare spawn outside, medians), and the processor time each of the four
takes (``cpu_ms``: ours and the command's whole tree, mean per command; steadier than the
elapsed times on a busy machine). ``--code DIR`` measures another tree of the repository (a
``git worktree`` of an older revision, for a before/after).

Run: .venv/bin/python benchmarks/sandbox_spawn.py [--rounds 50] [--code DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.code_tree import use_code_tree

CODE = use_code_tree()

from core.host import sandbox  # noqa: E402
from core.host.local import LocalHost  # noqa: E402
from core.host.sandbox import Confinement, protected_entries  # noqa: E402


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def summary(values: list[float]) -> dict:
    return {"median_ms": round(statistics.median(values), 2), "p95_ms": round(percentile(values, 0.95), 2)}


def side_by_side(outside: list[float], inside: list[float]) -> dict:
    out, into = summary(outside), summary(inside)
    return {
        "outside": out,
        "inside": into,
        "inside_minus_outside": {key: round(into[key] - out[key], 2) for key in out},
        "inside_over_outside": round(into["median_ms"] / out["median_ms"], 1) if out["median_ms"] else None,
    }


def cpu_ms() -> float:
    """Processor time used so far by this process and every child it has reaped (the whole tree
    of a command that has ended): unlike the elapsed time, it hardly moves with the machine's load."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime) * 1000


async def spawn(argv: list[str], env: dict[str, str], cwd: Path, cpu: list[float]) -> float:
    started, used = time.perf_counter(), cpu_ms()
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=str(cwd), env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    output, _ = await proc.communicate()
    elapsed = (time.perf_counter() - started) * 1000
    cpu.append(cpu_ms() - used)
    assert proc.returncode == 0, output.decode(errors="replace")
    return elapsed


async def measure(rounds: int) -> dict:
    found = sandbox.status()
    if not found.active:
        raise SystemExit(f"no sandbox to measure: {found.detail}")

    async def show(_content) -> None:
        return None

    with tempfile.TemporaryDirectory(prefix="hermes-bench-") as tmp:
        os.environ.setdefault("HERMES_EDITOR_HOME", str(Path(tmp) / "state"))
        project = Path(tmp, "project").resolve()
        project.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        (project / "README.md").write_text("bench\n")
        confinement = Confinement((project,))
        host = LocalHost()
        try:
            plain_argv, plain_env = host.command_argv("true", project, None)
            boxed_argv, boxed_env = host.command_argv("true", project, confinement)
            figures: dict[str, list[float]] = {k: [] for k in ("spawn_out", "spawn_in", "run_out", "run_in", "protected", "argv")}
            cpu: dict[str, list[float]] = {k: [] for k in ("spawn_out", "spawn_in", "run_out", "run_in")}
            # Warm the page cache and the event loop's child watcher; the first command starts
            # whatever the host keeps for the next ones.
            await spawn(plain_argv, plain_env, project, [])
            await spawn(boxed_argv, boxed_env, project, [])
            await host.run_command("true", project, timeout=30, output_limit=65536, show=show)
            for _ in range(rounds):
                figures["spawn_out"].append(await spawn(plain_argv, plain_env, project, cpu["spawn_out"]))
                figures["spawn_in"].append(await spawn(boxed_argv, boxed_env, project, cpu["spawn_in"]))
                for key, given in (("run_out", None), ("run_in", confinement)):
                    started, used = time.perf_counter(), cpu_ms()
                    result = await host.run_command("true", project, timeout=30, output_limit=65536, show=show, confinement=given)
                    figures[key].append((time.perf_counter() - started) * 1000)
                    cpu[key].append(cpu_ms() - used)
                    assert result.exit_code == 0, result.output
                started = time.perf_counter()
                protected_entries(confinement.roots)
                figures["protected"].append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                host.command_argv("true", project, confinement)
                figures["argv"].append((time.perf_counter() - started) * 1000)
        finally:
            await host.aclose()
    bare = statistics.median(figures["spawn_out"])
    return {
        "benchmark": "sandbox_spawn",
        "command": "true",
        "code": CODE,
        "sandbox": found.detail,
        "rounds": rounds,
        "machine": f"{os.cpu_count()} cores",
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "spawn": side_by_side(figures["spawn_out"], figures["spawn_in"]),
        "run_command": side_by_side(figures["run_out"], figures["run_in"]),
        "run_command_over_bare": {
            "bare_spawn_outside_ms": round(bare, 2),
            "unsandboxed_ms": round(statistics.median(figures["run_out"]) - bare, 2),
            "sandboxed_ms": round(statistics.median(figures["run_in"]) - bare, 2),
        },
        # Mean processor time per command, ours and the command's whole tree (the guardian, a
        # process of its own that is never reaped while we run, is not in it).
        "cpu_ms": {key: round(statistics.fmean(values), 2) for key, values in cpu.items()},
        "protected_entries": summary(figures["protected"]),
        "sandbox_argv": summary(figures["argv"]),
        "bwrap_argv_items": len(boxed_argv),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--code", metavar="DIR", help="measure this tree of the repository instead (read before the imports)")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.rounds)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
