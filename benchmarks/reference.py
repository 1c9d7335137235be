"""The reference the benchmarks compare with: hermes-agent, installed in its own virtualenv.

Where it is: ``--reference-venv PATH`` on each script, else ``$HERMES_REFERENCE_VENV``, else
``/tmp/peer`` when that holds ``bin/hermes-acp``. An empty value means no reference, and the
scripts print our figures only. ``benchmarks/install_reference.sh`` installs it.

How it is configured: a temporary ``HOME`` with ``HERMES_HOME=$HOME/.hermes`` whose
``config.yaml`` points the ``custom`` provider at the same scripted model as ours (model
``scripted``, the scripted server's base URL, a placeholder key, and ``context_length`` so that
it does not look the model up on the network). Nothing touches the real home.

Ratios are ``reference / ours``: above 1 means the reference takes longer (or sends more, or
uses more memory) than ours.

Also here: a minimal line-based ACP/MCP client (:class:`Lines`) that both sides are driven
with when a script times raw JSON-RPC exchanges.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ENV_VAR = "HERMES_REFERENCE_VENV"
DEFAULT_VENV = Path("/tmp/peer")
MODEL = "scripted"
API_KEY = "sk-bench-000000"
CONTEXT_LENGTH = 256_000  # what it assumes anyway for an unknown model, after a network look-up


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reference-venv",
        default=None,
        metavar="PATH",
        help=f"virtualenv holding hermes-agent to compare with ('' for none; default ${ENV_VAR}, else {DEFAULT_VENV} if present)",
    )


@dataclass(frozen=True)
class Reference:
    venv: Path
    version: str

    @property
    def name(self) -> str:
        return f"hermes-agent {self.version}"

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    @property
    def acp_command(self) -> list[str]:
        return [str(self.venv / "bin" / "hermes-acp")]

    @property
    def mcp_command(self) -> list[str]:
        # hermes-agent serves MCP through its main CLI (mcp_serve.py: the messaging bridge).
        return [str(self.venv / "bin" / "hermes"), "mcp", "serve"]

    @staticmethod
    def read_call(path: str) -> tuple[str, dict]:
        """Its file-read tool and arguments (tools/file_tools.py: read_file with path, offset, limit)."""
        return "read_file", {"path": path}

    def env(self, home: Path, base_url: str | None = None) -> dict[str, str]:
        """A fresh home under ``home``, pointed at the scripted model at ``base_url`` if given."""
        hermes_home = home / ".hermes"
        hermes_home.mkdir(parents=True, exist_ok=True)
        if base_url is not None:
            (hermes_home / "config.yaml").write_text(
                "model:\n"
                "  provider: custom\n"
                f"  default: {MODEL}\n"
                f"  base_url: {base_url}\n"
                f"  api_key: {API_KEY}\n"
                f"  context_length: {CONTEXT_LENGTH}\n"
            )
        return {
            "PATH": f"{self.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(home),
            "HERMES_HOME": str(hermes_home),
        }


def find(value: str | None) -> Reference | None:
    """The reference named by the option's value (None: not given), or None when there is none."""
    if value is None:
        value = os.environ.get(ENV_VAR)
    if value is None:
        if not (DEFAULT_VENV / "bin" / "hermes-acp").exists():
            return None
        value = str(DEFAULT_VENV)
    if not value:
        return None
    venv = Path(value).expanduser().absolute()
    if not (venv / "bin" / "hermes-acp").exists():
        raise SystemExit(f"no hermes-agent in {venv} (expected {venv}/bin/hermes-acp); see benchmarks/install_reference.sh")
    found = sorted(venv.glob("lib/python*/site-packages/hermes_agent-*.dist-info"))
    version = found[-1].name.removeprefix("hermes_agent-").removesuffix(".dist-info") if found else "?"
    return Reference(venv, version)


def interleaved(rounds: int, ours, theirs=None) -> tuple[list, list]:
    """One uncounted round of each (it warms the filesystem cache and lets the reference seed
    its home), then ``rounds`` of each, alternating; ``theirs`` None: ours only."""
    ours()
    if theirs is not None:
        theirs()
    mine, other = [], []
    for _ in range(rounds):
        mine.append(ours())
        if theirs is not None:
            other.append(theirs())
    return mine, other


def ratio(theirs: float, ours: float) -> float | None:
    """reference / ours, or None when ours is zero."""
    return round(theirs / ours, 2) if ours else None


class Lines:
    """One JSON-RPC message per line over a child's stdin/stdout.

    ``call`` waits for the answer to its request, skipping notifications; requests from the
    agent are answered: a permission request with its first "allow" option, anything else with
    "method not found".
    """

    def __init__(self, proc: subprocess.Popen) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.stdin: IO[bytes] = proc.stdin
        self.stdout: IO[bytes] = proc.stdout
        self.next_id = 1
        self.permission_requests = 0

    def send(self, message: dict) -> None:
        self.stdin.write(json.dumps(message).encode() + b"\n")
        self.stdin.flush()

    def call(self, method: str, params: dict) -> dict:
        ident = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        while True:
            line = self.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed its output before answering {method}")
            message = json.loads(line)
            if "method" in message:
                if "id" in message:
                    self.answer(message)
                continue
            if message.get("id") == ident:
                if "result" not in message:
                    raise RuntimeError(f"{method}: {message}")
                return message["result"]

    def answer(self, request: dict) -> None:
        if request["method"] == "session/request_permission":
            self.permission_requests += 1
            options = request["params"].get("options") or []
            allow = next((o for o in options if str(o.get("kind", "")).startswith("allow")), options[0] if options else {})
            result: dict[str, Any] = {"outcome": {"outcome": "selected", "optionId": allow.get("optionId")}}
            self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})
        else:
            error = {"code": -32601, "message": f"method not found: {request['method']}"}
            self.send({"jsonrpc": "2.0", "id": request["id"], "error": error})

    def close(self, timeout: float = 30) -> None:
        self.stdin.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def spawn(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, Lines]:
    """Start a stdio server; returns the perf_counter time just before the spawn and its client."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    return started, Lines(proc)
