"""The real npm client acpx drives hermes-acp through a write-with-approval turn."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from tests.acp_harness import ROOT, agent_env, hermes_acp, schema_path
from tests.fakes.openai_server import ScriptedOpenAIServer


def _acpx() -> str:
    schema_path()  # installs the npm test clients when they are missing
    path = ROOT / "node_modules/.bin/acpx"
    assert path.exists(), "acpx is missing: run 'npm install' in the repository root"
    return str(path)


def test_acpx_write_with_approval(hermes_home, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "hello.txt", "content": "hello from acpx\n"}}]},
        {"text": "Wrote hello.txt."},
    ]
    with ScriptedOpenAIServer(script) as server:
        env = agent_env(hermes_home, server.base_url)
        proc = subprocess.run(
            [_acpx(), "--agent", hermes_acp(), "--cwd", str(project), "--approve-all", "--format", "json", "exec", "write hello"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (project / "hello.txt").read_text() == "hello from acpx\n"
    messages = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    permission = [m for m in messages if m.get("method") == "session/request_permission"]
    assert permission and permission[0]["params"]["toolCall"]["content"][0]["type"] == "diff"
    statuses = [m["params"]["update"].get("status") for m in messages if m.get("method") == "session/update"]
    assert "completed" in statuses
    prompt_result = [m for m in messages if "result" in m and isinstance(m["result"], dict) and "stopReason" in m["result"]]
    assert prompt_result and prompt_result[-1]["result"]["stopReason"] == "end_turn"


def _run_acpx(env, project, *args, timeout=60):
    """acpx with hermes-acp. A command that reaches acpx's queue owner as it exits at the end of
    its TTL is refused by acpx ("Queue owner is shutting down") before hermes-acp sees it; acpx
    starts a new owner for the next command, so that one is sent again."""
    for _ in range(3):
        done = subprocess.run(
            [_acpx(), "--agent", hermes_acp(), "--cwd", str(project), *args], capture_output=True, text=True, env=env, timeout=timeout
        )
        if "Queue owner is shutting down" not in done.stderr:
            break
    return done


def _acpx_env(hermes_home, base_url):
    env = agent_env(hermes_home, base_url)
    env["HOME"] = str(hermes_home.parent / "user-home")
    return env


def _processes_of(hermes_home) -> list[int]:
    """Processes (other than this one) started with this state home: acpx's queue owner, hermes-acp."""
    mine = f"HERMES_EDITOR_HOME={hermes_home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if mine in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


def _wait_until_gone(hermes_home, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while (alive := _processes_of(hermes_home)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive, f"still running after {timeout}s: {alive}"


def _methods(stdout: str) -> list[str]:
    return [m.get("method") for m in (json.loads(l) for l in stdout.splitlines() if l.startswith("{")) if "method" in m]


def test_acpx_persistent_session_set_mode_and_model(hermes_home, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (hermes_home / "config.toml").write_text('[providers.openai]\nmodels = ["other-model"]\n')
    with ScriptedOpenAIServer([{"text": "first answer"}, {"text": "second answer"}]) as server:
        env = _acpx_env(hermes_home, server.base_url)
        assert _run_acpx(env, project, "sessions", "new").returncode == 0
        first = _run_acpx(env, project, "--ttl", "1", "--format", "json", "prompt", "remember the word tangerine")
        assert first.returncode == 0, first.stderr[-2000:]
        assert _run_acpx(env, project, "set-mode", "auto").returncode == 0
        assert _run_acpx(env, project, "set", "model", "openai:other-model").returncode == 0
        _wait_until_gone(hermes_home)  # the queue owner (and with it hermes-acp) exits after its 1 s TTL
        second = _run_acpx(env, project, "--ttl", "1", "--format", "json", "prompt", "which word?")
        assert second.returncode == 0, second.stderr[-2000:]
    methods = _methods(second.stdout)
    # A fresh hermes-acp process reattached the stored session (acpx prefers session/resume).
    assert "initialize" in methods and ({"session/resume", "session/load"} & set(methods))
    assert "session/new" not in methods
    last = server.requests[-1].get("body", server.requests[-1])
    assert last["model"] == "other-model"
    assert any("tangerine" in str(m.get("content")) for m in last["messages"]), "the second prompt sees the first"


def test_acpx_cancel(hermes_home, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    with ScriptedOpenAIServer([{"text": "word " * 200, "chunk_size": 5, "delay": 0.1}]) as server:
        env = _acpx_env(hermes_home, server.base_url)
        assert _run_acpx(env, project, "sessions", "new").returncode == 0
        running = subprocess.Popen(
            [_acpx(), "--agent", hermes_acp(), "--cwd", str(project), "--format", "json", "prompt", "talk"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        # The turn is under way: the model's reply is streaming to hermes-acp.
        server.wait_for(lambda: server.frames_sent >= 3, 30, "the reply to start streaming")
        cancel = _run_acpx(env, project, "cancel")
        out, err = running.communicate(timeout=60)
    assert cancel.returncode == 0, cancel.stderr[-2000:]
    assert '"stopReason":"cancelled"' in out, err[-2000:]
