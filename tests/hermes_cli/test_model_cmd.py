"""``hermes-editor model``: the configured choices, and setting the one ``model`` key, through the console script."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent

CONFIG = """# my settings
model = "local:small"  # the everyday one
fallback_models = ["local:big"]

[retry]
max_attempts = 2  # keep this

[providers.local]
profile = "openai-compatible"
base_url = "http://127.0.0.1:9/v1"
models = ["small", "big", "coder"]
"""


def model(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    Path(os.environ["HERMES_EDITOR_HOME"]).chmod(0o700)  # so that stderr holds only what the command says
    return subprocess.run(
        [str(BIN / "hermes-editor"), "model", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HERMES_QUIET": "1", **(env or {})},
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def test_the_listing_marks_the_current_model_and_says_where_each_is_configured(hermes_home):
    (hermes_home / "config.toml").write_text(CONFIG)
    result = model()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["*", "1", "local:small", "model"]
    assert lines[1].split() == ["2", "local:big", "fallback_models"]
    assert lines[2].split() == ["3", "local:coder", "providers.local.models"]
    assert len(lines) == 3


def test_json_listing(hermes_home):
    (hermes_home / "config.toml").write_text(CONFIG)
    rows = json.loads(model("--json").stdout)
    assert rows == [
        {"model": "local:small", "source": "model", "current": True},
        {"model": "local:big", "source": "fallback_models", "current": False},
        {"model": "local:coder", "source": "providers.local.models", "current": False},
    ]


def test_no_configuration_lists_nothing_and_says_how_to_configure(hermes_home):
    result = model()
    assert result.returncode == 0
    assert "No model is configured" in result.stdout and "hermes-editor setup" in result.stdout
    assert json.loads(model("--json").stdout) == []


def test_setting_a_model_edits_only_that_key(hermes_home):
    path = hermes_home / "config.toml"
    path.write_text(CONFIG)
    result = model("local:coder")
    assert result.returncode == 0, result.stderr
    assert "Default model: local:coder" in result.stdout
    assert path.read_text() == CONFIG.replace('model = "local:small"', 'model = "local:coder"')
    shown = subprocess.run([str(BIN / "hermes-editor"), "config", "get", "model"], capture_output=True, text=True, timeout=60)
    assert shown.stdout.strip() == "local:coder"
    assert model("--json").stdout.count('"current": true') == 1
    assert json.loads(model("--json").stdout)[0] == {"model": "local:coder", "source": "model", "current": True}


def test_a_model_of_an_unconfigured_provider_is_refused_and_the_file_kept(hermes_home):
    path = hermes_home / "config.toml"
    path.write_text(CONFIG)
    result = model("anthropic:claude-x")
    assert result.returncode == 1
    assert result.stderr.startswith("Not changed:")
    assert "'anthropic', which is not configured" in result.stderr and str(path) in result.stderr
    assert path.read_text() == CONFIG
    bad_form = model("local:")
    assert bad_form.returncode == 1 and "names no model after ':'" in bad_form.stderr
    assert path.read_text() == CONFIG


def test_hermes_model_in_the_environment_is_mentioned_as_an_override(hermes_home):
    (hermes_home / "config.toml").write_text(CONFIG)
    result = model(env={"HERMES_MODEL": "local:big"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].split()[:3] == ["*", "1", "local:small"], "the listing shows config.toml's key"
    assert "HERMES_MODEL=local:big is set: it overrides the default" in result.stdout


def test_on_a_terminal_a_number_picks_the_model(hermes_home):
    path = hermes_home / "config.toml"
    path.write_text(CONFIG)
    pid, fd = pty.fork()
    if pid == 0:  # the child
        os.execve(str(BIN / "hermes-editor"), [str(BIN / "hermes-editor"), "model"], {**os.environ, "TERM": "dumb"})
    seen = b""
    try:
        deadline = time.monotonic() + 60
        sent = False
        while True:
            if not sent and b"Pick a number" in seen:
                os.write(fd, b"3\r")
                sent = True
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                break
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    pass
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, seen.decode(errors="replace")
    assert b"Enter keeps local:small" in seen
    assert 'model = "local:coder"  # the everyday one' in path.read_text()
