"""Time to first session: spawn hermes-acp -> initialize answered -> session/new answered ->
first prompt ("say hello") answered.

Prints JSON with the median and spread over several rounds. Uses the bundled scripted model
on 127.0.0.1 (it answers "hello" at once) so that no network is involved. Where the reference
is installed (benchmarks/reference.py), its ``hermes-acp`` runs the same exchange against the
same model, interleaved round by round with ours, and the ratios reference / ours are printed.
Run: .venv/bin/python benchmarks/acp_startup.py [--rounds N] [--reference-venv PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.reference import Reference, add_option, find, interleaved, ratio, spawn
from hermes_cli.scripted_model import ScriptedOpenAIServer

FIGURES = ("initialize_ms", "first_session_ms", "first_prompt_ms")


def one_round(command: list[str], env: dict, project: Path) -> dict:
    started, rpc = spawn(command, env, project)
    rpc.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    initialized = time.perf_counter()
    session = rpc.call("session/new", {"cwd": str(project), "mcpServers": []})
    created = time.perf_counter()
    answer = rpc.call("session/prompt", {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": "say hello"}]})
    answered = time.perf_counter()
    assert answer.get("stopReason") == "end_turn", answer
    rpc.close()
    return {
        "initialize_ms": (initialized - started) * 1000,
        "first_session_ms": (created - started) * 1000,
        "first_prompt_ms": (answered - started) * 1000,
    }


def summary(rounds: list[dict]) -> dict:
    result = {}
    for key in FIGURES:
        values = [r[key] for r in rounds]
        result[key] = {"median": round(statistics.median(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=9)
    add_option(parser)
    args = parser.parse_args()
    reference: Reference | None = find(args.reference_venv)
    command = [str(Path(sys.executable).parent / "hermes-acp")]
    with ScriptedOpenAIServer(lambda body: {"text": "hello"}) as server, tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(Path(tmp) / "ours"),
            "HERMES_EDITOR_HOME": str(Path(tmp) / "ours" / "home"),
            "HERMES_QUIET": "1",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-bench-000000",
            "HERMES_MODEL": "openai:scripted",
        }
        theirs_env = reference.env(Path(tmp) / "reference", server.base_url) if reference else {}
        ours, theirs = interleaved(
            args.rounds,
            lambda: one_round(command, env, project),
            (lambda: one_round(reference.acp_command, theirs_env, project)) if reference else None,
        )
    result = {"benchmark": "acp_startup", "rounds": args.rounds, "machine": f"{os.cpu_count()} cores", **summary(ours)}
    if reference:
        result["reference"] = {"name": reference.name, "command": "hermes-acp", **summary(theirs)}
        result["reference_over_ours"] = {key: ratio(result["reference"][key]["median"], result[key]["median"]) for key in FIGURES}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
