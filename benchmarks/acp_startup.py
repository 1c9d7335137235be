"""Time to first session: spawn hermes-acp -> initialize answered -> session/new answered ->
first prompt ("say hello") answered.

Prints JSON with the median and spread over several rounds. Uses the bundled scripted model
on 127.0.0.1 (it answers "hello" at once) so that no network is involved. ``cpu_ms`` is the
processor time the server spent until the prompt was answered (user + system, every thread): on
a busy machine it moves less than the wall-clock figures. Where the reference is installed
(benchmarks/reference.py), its ``hermes-acp`` runs the same exchange against the same model,
interleaved round by round with ours, and the ratios reference / ours are printed.

``--code DIR`` also measures the hermes-acp of another tree of this repository (a ``git
worktree`` of an older revision, say; its packages first on PYTHONPATH, with this virtualenv's
libraries), interleaved round by round with this one, and prints its figures under ``code``
with the ratios code / ours. ``--acpx`` also times ``acpx exec "say hello"`` (the npm client
scripts use, node_modules/.bin/acpx) from its start to its exit, for each tree, beside
``acpx --version`` (node and acpx starting alone).
Run: .venv/bin/python benchmarks/acp_startup.py [--rounds N] [--code DIR] [--acpx] [--reference-venv PATH]
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

from benchmarks.reference import Reference, add_option, find, interleaved, ratio, spawn
from hermes_cli.scripted_model import ScriptedOpenAIServer

FIGURES = ("initialize_ms", "first_session_ms", "first_prompt_ms")
ACPX = Path(__file__).resolve().parents[1] / "node_modules" / ".bin" / "acpx"


def cpu_ms(pid: int) -> float:
    """Processor time of a running process so far (user + system, all threads)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def scripted_env(home: Path, base_url: str) -> dict[str, str]:
    """The environment of a hermes-acp whose state lives under ``home`` and whose model is the
    scripted one at ``base_url``."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "HERMES_EDITOR_HOME": str(home / "home"),
        "HERMES_QUIET": "1",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "sk-bench-000000",
        "HERMES_MODEL": "openai:scripted",
    }


def one_round(command: list[str], env: dict, project: Path) -> dict:
    started, rpc = spawn(command, env, project)
    rpc.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    initialized = time.perf_counter()
    session = rpc.call("session/new", {"cwd": str(project), "mcpServers": []})
    created = time.perf_counter()
    answer = rpc.call("session/prompt", {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": "say hello"}]})
    answered = time.perf_counter()
    cpu = cpu_ms(rpc.proc.pid) if sys.platform == "linux" else None
    assert answer.get("stopReason") == "end_turn", answer
    rpc.close()
    result = {
        "initialize_ms": (initialized - started) * 1000,
        "first_session_ms": (created - started) * 1000,
        "first_prompt_ms": (answered - started) * 1000,
    }
    if cpu is not None:
        result["cpu_ms"] = cpu
    return result


def acpx_round(command: list[str], env: dict, project: Path) -> dict:
    """``acpx exec "say hello"`` from its start to its exit."""
    started = time.perf_counter()
    done = subprocess.run(
        [str(ACPX), "--agent", " ".join(command), "--cwd", str(project), "--approve-all", "--format", "quiet", "exec", "say hello"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    ended = time.perf_counter()
    if done.returncode != 0 or "hello" not in done.stdout:
        raise RuntimeError(f"acpx exec failed ({done.returncode}): {done.stdout[-500:]} {done.stderr[-1500:]}")
    return {"acpx_exec_ms": (ended - started) * 1000}


def acpx_alone(env: dict) -> dict:
    started = time.perf_counter()
    subprocess.run([str(ACPX), "--version"], capture_output=True, env=env, timeout=60, check=True)
    return {"acpx_version_ms": (time.perf_counter() - started) * 1000}


def summary(rounds: list[dict]) -> dict:
    result = {}
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        result[key] = {"median": round(statistics.median(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}
    return result


def merged(*parts: list[dict]) -> list[dict]:
    """Round-by-round figures of several measurements in one dict per round."""
    return [{k: v for part in row for k, v in part.items()} for row in zip(*parts, strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--code", metavar="DIR", help="also measure the hermes-acp of another tree of this repository")
    parser.add_argument("--acpx", action="store_true", help="also time `acpx exec` (node_modules/.bin/acpx)")
    add_option(parser)
    args = parser.parse_args()
    if args.acpx and not ACPX.exists():
        parser.error(f"{ACPX} is missing: run 'npm install' in the repository root")
    reference: Reference | None = find(args.reference_venv)
    command = [str(Path(sys.executable).parent / "hermes-acp")]
    with ScriptedOpenAIServer(lambda body: {"text": "hello"}) as server, tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        env = scripted_env(Path(tmp) / "ours", server.base_url)
        theirs_env = reference.env(Path(tmp) / "reference", server.base_url) if reference else {}
        # The other tree gets a state home of its own: its store may be of another schema version.
        code_env = {**env, "HOME": str(Path(tmp) / "code"), "HERMES_EDITOR_HOME": str(Path(tmp) / "code" / "home")} if args.code else {}
        if args.code:
            code_env["PYTHONPATH"] = str(Path(args.code).resolve())
        # Each round runs ours, then the other tree's, then the reference's (when asked for).
        rounds: dict[str, list] = {"ours": [], "code": [], "acpx": [], "acpx_code": [], "acpx_alone": []}

        def ours_round() -> dict:
            figures = one_round(command, env, project)
            if args.code:
                rounds["code"].append(one_round(command, code_env, project))
            if args.acpx:
                rounds["acpx_alone"].append(acpx_alone(env))
                rounds["acpx"].append(acpx_round(command, env, project))
                if args.code:
                    rounds["acpx_code"].append(acpx_round(command, code_env, project))
            return figures

        ours, theirs = interleaved(
            args.rounds,
            ours_round,
            (lambda: one_round(reference.acp_command, theirs_env, project)) if reference else None,
        )
    # interleaved() runs one uncounted warm-up round first.
    rounds = {key: values[1:] for key, values in rounds.items()}
    if args.acpx:
        ours = merged(ours, rounds["acpx"], rounds["acpx_alone"])
    result = {"benchmark": "acp_startup", "rounds": args.rounds, "machine": f"{os.cpu_count()} cores", **summary(ours)}
    if args.code:
        code = merged(rounds["code"], rounds["acpx_code"]) if args.acpx else rounds["code"]
        result["code"] = {"tree": code_env["PYTHONPATH"], **summary(code)}
        result["code_over_ours"] = {
            key: ratio(result["code"][key]["median"], result[key]["median"]) for key in result["code"] if key != "tree"
        }
    if reference:
        result["reference"] = {"name": reference.name, "command": "hermes-acp", **summary(theirs)}
        result["reference_over_ours"] = {
            key: ratio(result["reference"][key]["median"], result[key]["median"])
            for key in result["reference"]
            if key in result and key != "name" and key != "command"
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
