"""The one import rule, lazy heavy imports, and deliberate public names."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "toolsets", "hermes_acp", "hermes_mcp", "hermes_gateway", "hermes_cli")


def test_import_contracts_hold():
    """Surfaces never import each other; core never imports toolsets or a surface."""
    linter = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_import_contracts_can_fail(tmp_path):
    """A core module that imports a surface breaks the contract (so the check above means something).

    The probe goes into a copy of the packages, so a run never writes into the source tree.
    """
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "core" / "_contract_probe.py").write_text("import hermes_acp.server\n")
    linter = Path(sys.executable).parent / "lint-imports"
    # The copy comes first on the path (lint-imports puts its working directory there too).
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([str(linter), "--no-cache"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert proc.returncode != 0 and "BROKEN" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "core._contract_probe -> hermes_acp.server" in proc.stdout
    assert not (ROOT / "core" / "_contract_probe.py").exists()


@pytest.mark.parametrize(
    "module",
    ["core.agent.loop", "core.models", "core.models.openai_compat", "core.models.anthropic_messages", "hermes_acp.server", "toolsets"],
)
def test_heavy_sdks_load_lazily(module):
    code = f"import sys, {module}\nheavy = [m for m in ('openai', 'anthropic', 'mcp', 'git') if m in sys.modules]\nprint(','.join(heavy))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "", f"importing {module} loaded {proc.stdout.strip()}"


@pytest.mark.parametrize("package", ["core.store", "core.messages", "core.events", "core.models.base", "core.config", "toolsets.editor"])
def test_public_names_are_deliberate(package):
    module = importlib.import_module(package)
    assert hasattr(module, "__all__"), f"{package} has no __all__"
    for name in module.__all__:
        assert hasattr(module, name), f"{package}.__all__ names {name}, which does not exist"
