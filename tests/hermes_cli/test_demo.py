"""``hermes-editor demo`` through its console script: who answers approvals, what it says is temporary, Ctrl-C."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from hermes_cli.demo_project import demo_script
from tests.fakes.openai_server import ScriptedOpenAIServer

BIN = Path(sys.executable).parent


def run_demo(*args: str, input: str = "", env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "hermes-editor"), "demo", *args],
        input=input,
        capture_output=True,
        text=True,
        env={**os.environ, "HERMES_QUIET": "1", **(env or {})},
        cwd=cwd,
        timeout=120,
        start_new_session=True,
    )


def test_the_scripted_model_runs_unattended_and_says_what_is_temporary(tmp_path):
    result = run_demo(env={"TMPDIR": str(tmp_path)}, cwd=tmp_path)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    match = re.search(r"Its project and store are temporary, in (\S+) \(removed when the demo ends\)\.", out)
    assert match, out
    assert Path(match.group(1)).parent == tmp_path.resolve()
    assert "answered automatically for the scripted model" in out
    assert "Allow?" not in out
    assert out.count("→ approved (allow once)") == 2
    assert "Stop reason: end_turn" in out
    assert not list(tmp_path.glob("hermes-demo-*"))


def test_a_real_model_asks_before_each_change_and_n_rejects_it(hermes_home, tmp_path):
    with ScriptedOpenAIServer(demo_script("python")) as server:
        (hermes_home / "config.toml").write_text(
            f'model = "local:scripted"\n[providers.local]\nprofile = "openai-compatible"\n'
            f'base_url = "{server.base_url}"\napi_key = "sk-test-demo-0123456789"\n'
        )
        result = run_demo(input="n\n", env={"TMPDIR": str(tmp_path)}, cwd=tmp_path)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "Using your model local:scripted" in out
    assert "bundled scripted model" not in out
    assert "You will be asked before each change" in out
    assert re.search(r"Its project is temporary, in \S+ \(removed when the demo ends\); the session is stored in your state home", out)
    assert "Permission needed: Edit calc.py" in out
    assert "Allow? [y/N]" in out and "→ rejected" in out
    assert "I left calc.py unchanged" in out
    assert "approved" not in out
    assert "Stop reason: end_turn" in out
    # The session went to the user's store, which the demo leaves in place.
    assert (hermes_home / "state.db").exists()


def test_ctrl_c_while_asking_exits_quietly_and_stops_hermes_acp(hermes_home, tmp_path):
    hermes_home.chmod(0o700)  # so that stderr holds only what Ctrl-C prints
    proc = subprocess.Popen(
        [str(BIN / "hermes-editor"), "demo", "--scripted", "--interactive"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HERMES_QUIET": "1", "TMPDIR": str(tmp_path)},
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        out = _read_until(proc, "Allow?")
        agent_pid = int(re.search(r"Started hermes-acp \(.*pid (\d+)\)", out).group(1))
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)  # stdin stays open: the question is still waiting for an answer
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stdout is not None and proc.stderr is not None
    out += proc.stdout.read().decode()
    stderr = proc.stderr.read().decode()
    proc.stdin.close()
    assert proc.returncode == 130, out + stderr
    assert "Traceback" not in stderr + out
    assert stderr.strip().splitlines() == ["Interrupted."]
    assert not _alive(agent_pid), "hermes-acp is stopped with the demo"
    assert not list(tmp_path.glob("hermes-demo-*")), "the temporary files are removed"


def _read_until(proc: subprocess.Popen[bytes], marker: str, limit: float = 90.0) -> str:
    """Stdout up to and including ``marker`` (which may end without a newline)."""
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    data = b""
    deadline = time.monotonic() + limit
    while marker.encode() not in data:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {marker!r} in: {data.decode(errors='replace')}"
        if selector.select(remaining):
            chunk = os.read(proc.stdout.fileno(), 4096)
            assert chunk, f"the demo ended before {marker!r}: {data.decode(errors='replace')}"
            data += chunk
    selector.close()
    return data.decode()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
