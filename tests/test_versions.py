"""Every binary answers ``--version`` (and ``-V``) with one line, without a state home or its SDKs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.version import version

BIN = Path(sys.executable).parent
BINARIES = ["hermes-acp", "hermes-mcp", "hermes-gateway", "hermes-editor"]
MODULES = {
    "hermes-acp": "hermes_acp.__main__",
    "hermes-mcp": "hermes_mcp.__main__",
    "hermes-gateway": "hermes_gateway.__main__",
    "hermes-editor": "hermes_cli.__main__",
}
HEAVY = ("acp", "mcp", "mcp_types", "telegram", "openai", "anthropic", "httpx", "pydantic", "anyio", "core.config", "core.store")


def _run(binary: str, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    path = BIN / binary
    assert path.exists(), f"{path} is missing: install the project (pip install -e .[test])"
    env = {**os.environ, "HERMES_EDITOR_HOME": str(home)}
    return subprocess.run([str(path), *args], capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("flag", ["--version", "-V"])
@pytest.mark.parametrize("binary", BINARIES)
def test_version_prints_one_line_and_leaves_the_state_home_alone(tmp_path, binary, flag):
    home = tmp_path / "not-made" / "home"
    result = _run(binary, flag, home=home)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{binary} {version()}\n"
    assert result.stderr == ""
    assert not (tmp_path / "not-made").exists()


@pytest.mark.parametrize("binary", BINARIES)
def test_help_lists_version(tmp_path, binary):
    result = _run(binary, "--help", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    assert "-V, --version" in result.stdout


@pytest.mark.parametrize("binary", BINARIES)
def test_version_loads_no_sdk(binary):
    code = (
        f"import sys; from {MODULES[binary]} import main\n"
        "assert main(['--version']) == 0\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(','.join(heavy), file=sys.stderr)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{binary} {version()}\n"
    assert proc.stderr.strip() == ""
