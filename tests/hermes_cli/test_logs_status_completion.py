"""``hermes-editor logs``, ``status`` and ``completion``, through the real entry point with a temporary home."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
SECRET = "sk-test-logs-secret-0123456789abcdef"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_") and k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["HERMES_EDITOR_HOME"] = str(home)
    return env


def hermes_editor(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = BIN / "hermes-editor"
    assert path.exists(), f"{path} is missing: install the project (pip install -e .[test])"
    return subprocess.run([str(path), *args], capture_output=True, text=True, env=_env(home), timeout=120)


def write_log(home: Path, surface: str, *messages: str) -> None:
    """Log ``messages`` the way a surface does: core.logs set up in a process of its own."""
    code = (
        "import logging, sys\n"
        "from core.logs import setup_logging\n"
        f"setup_logging({surface!r})\n"
        "for m in sys.argv[1:]:\n"
        "    logging.getLogger('test').info(m)\n"
    )
    env = _env(home) | {"HERMES_QUIET": "1"}
    subprocess.run([sys.executable, "-c", code, *messages], check=True, env=env, timeout=60)


def test_logs_tail_merge_and_surface(tmp_path: Path) -> None:
    assert hermes_editor(tmp_path, "logs").returncode == 1  # nothing logged yet
    write_log(tmp_path, "acp", *(f"acp line {i}" for i in range(60)))
    write_log(tmp_path, "mcp", "mcp line")
    write_log(tmp_path, "acp", "acp last", f"key {SECRET} in a line")

    default = hermes_editor(tmp_path, "logs")
    assert default.returncode == 0, default.stderr
    lines = default.stdout.splitlines()
    assert len(lines) == 50
    assert lines[-3].startswith("mcp") and lines[-3].endswith("mcp line")
    assert lines[-2].startswith("acp") and lines[-2].endswith("acp last")  # merged by time
    assert "sk-test-logs" not in default.stdout

    three = hermes_editor(tmp_path, "logs", "-n", "3", "--surface", "acp").stdout.splitlines()
    assert len(three) == 3
    assert three[0].endswith("INFO test: acp line 59") and three[1].endswith("acp last")
    assert not any("mcp line" in line for line in three)

    mcp = hermes_editor(tmp_path, "logs", "--surface", "mcp").stdout.splitlines()
    assert len(mcp) == 1 and mcp[0].endswith("INFO test: mcp line")


def test_logs_follow_prints_new_lines_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    write_log(tmp_path, "gateway", "before follow")
    proc = subprocess.Popen(
        [str(BIN / "hermes-editor"), "logs", "-f", "--surface", "gateway"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()

    def wait_for(text: str) -> None:
        while True:
            line = lines.get(timeout=60)
            if text in line:
                return

    try:
        wait_for("before follow")
        write_log(tmp_path, "gateway", "after follow started")
        wait_for("after follow started")
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr


def test_status_plain_and_json(tmp_path: Path) -> None:
    plain = hermes_editor(tmp_path, "status")
    assert plain.returncode == 0, plain.stderr
    assert "hermes-acp:" in plain.stdout and "not tracked" in plain.stdout
    assert "hermes-gateway: not running" in plain.stdout
    assert "none configured" in plain.stdout
    assert "sandbox:" in plain.stdout and "store:" in plain.stdout

    found = json.loads(hermes_editor(tmp_path, "status", "--json").stdout)
    assert found["surfaces"]["acp"] == {"running": None, "tracked": False, "last_logged": None}
    assert found["surfaces"]["gateway"]["running"] is False
    assert found["model"] == {"model": None, "error": None}
    assert found["store"]["exists"] is False and found["store"]["sessions"] == 0
    assert set(found["sandbox"]) == {"name", "detail"}

    (tmp_path / "config.toml").write_text(f'model = "openai:gpt-4.1"\n\n[providers.openai]\napi_key = "{SECRET}"\n', encoding="utf-8")
    write_log(tmp_path, "acp", "hello")
    configured = hermes_editor(tmp_path, "status")
    assert "openai:gpt-4.1" in configured.stdout and SECRET not in configured.stdout
    assert "last logged" in configured.stdout
    found = json.loads(hermes_editor(tmp_path, "status", "--json").stdout)
    assert found["model"] == {"model": "openai:gpt-4.1", "error": None}
    assert found["surfaces"]["acp"]["last_logged"] is not None

    (tmp_path / "config.toml").write_text('model = "nonsense"\n', encoding="utf-8")
    broken = hermes_editor(tmp_path, "status")
    assert broken.returncode == 0 and "configuration error" in broken.stdout
    found = json.loads(hermes_editor(tmp_path, "status", "--json").stdout)
    assert found["model"]["model"] is None and found["model"]["error"]


def test_status_counts_the_store(tmp_path: Path) -> None:
    code = (
        "import asyncio\n"
        "from core.store import SessionStore\n"
        "async def main():\n"
        "    async with SessionStore.open() as store:\n"
        "        await store.create_session(cwd='/tmp', surface='acp')\n"
        "asyncio.run(main())\n"
    )
    made = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    if made.returncode != 0:
        pytest.skip(f"creating a session this way is not available: {made.stderr[-300:]}")
    found = json.loads(hermes_editor(tmp_path, "status", "--json").stdout)
    assert found["store"]["exists"] is True and found["store"]["sessions"] == 1 and found["store"]["size_bytes"] > 0


def _top_level_commands() -> list[str]:
    from hermes_cli.__main__ import _parser

    help_text = subprocess.run([str(BIN / "hermes-editor"), "--help"], capture_output=True, text=True, timeout=60).stdout
    parser = _parser()
    names = [name for action in parser._subparsers._group_actions for name in action.choices] if parser._subparsers else []
    assert names and all(name in help_text for name in names)
    return names


def test_completion_scripts_name_every_command(tmp_path: Path) -> None:
    commands = _top_level_commands()
    assert {"logs", "status", "completion", "sessions", "cron"} <= set(commands)

    bash = hermes_editor(tmp_path, "completion", "bash")
    assert bash.returncode == 0
    script = tmp_path / "hermes-editor.bash"
    script.write_text(bash.stdout, encoding="utf-8")
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    top = next(line for line in bash.stdout.splitlines() if line.strip().startswith("'')"))
    assert all(f" {name} " in f" {top.split(chr(39))[3]} " for name in commands)

    # The bash function completes for real: after "cron", the cron actions.
    probe = (
        f"source {script}\n"
        "COMP_WORDS=(hermes-editor cron ''); COMP_CWORD=2; _hermes_editor; echo \"${COMPREPLY[@]}\"\n"
        'COMP_WORDS=(hermes-editor st); COMP_CWORD=1; _hermes_editor; echo "${COMPREPLY[@]}"\n'
    )
    replies = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60).stdout.splitlines()
    assert {"add", "list", "runs"} <= set(replies[0].split())
    assert replies[1].split() == ["status"]

    for shell in ("zsh", "fish"):
        out = hermes_editor(tmp_path, "completion", shell)
        assert out.returncode == 0 and out.stdout.strip()
        assert all(name in out.stdout for name in commands)
