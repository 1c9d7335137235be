"""The one import rule, lazy heavy imports, and deliberate public names."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    """Surfaces never import each other; core never imports toolsets or a surface."""
    linter = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_import_contracts_can_fail(tmp_path):
    """A core module that imports a surface breaks the contract (so the check above means something)."""
    bad = ROOT / "core" / "_contract_probe.py"
    bad.write_text("import hermes_acp.server\n")
    try:
        linter = Path(sys.executable).parent / "lint-imports"
        proc = subprocess.run([str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    finally:
        bad.unlink()
    assert proc.returncode != 0 and "BROKEN" in proc.stdout


@pytest.mark.parametrize(
    "module",
    ["core.agent", "core.models", "core.models.openai_compat", "core.models.anthropic_messages", "hermes_acp.server", "toolsets"],
)
def test_heavy_sdks_load_lazily(module):
    code = (
        f"import sys, {module}\n"
        "heavy = [m for m in ('openai', 'anthropic', 'mcp', 'git') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "", f"importing {module} loaded {proc.stdout.strip()}"


@pytest.mark.parametrize("package", ["core.store", "core.messages", "core.events", "core.models.base", "core.config", "toolsets.editor"])
def test_public_names_are_deliberate(package):
    module = importlib.import_module(package)
    assert hasattr(module, "__all__"), f"{package} has no __all__"
    for name in module.__all__:
        assert hasattr(module, name), f"{package}.__all__ names {name}, which does not exist"
