"""The ready-to-paste editor configurations are valid and launch hermes-acp."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


CONFIGS = {
    "zed-settings.json": ("agent_servers",),
    "jetbrains-acp.json": ("agent_servers",),
    "vscode-settings.json": ("acp.agents",),
}
MCP_CONFIGS = {"claude_desktop_config.json": "hermes", "cursor-mcp.json": "hermes"}
PLACEHOLDER = "/absolute/path/to/.venv/bin/"


def test_editor_configs_launch_the_installed_hermes_acp():
    installed = Path(sys.executable).parent
    for name, (section,) in CONFIGS.items():
        config = json.loads((ROOT / "editor-configs" / name).read_text())
        server = config[section]["Hermes"]
        assert server["command"] == PLACEHOLDER + "hermes-acp" and server["args"] == []
        # The file the placeholder path names is what installing the project puts in the venv's bin/.
        found = shutil.which(Path(server["command"]).name, path=f"{installed}{os.pathsep}{os.environ.get('PATH', '')}")
        assert found and Path(found).parent == installed, name
        proc = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0 and proc.stdout.strip()


def test_every_snippet_names_its_server_by_an_absolute_placeholder_path():
    """Desktop apps do not see the shell's PATH; the READMEs say so and use the same placeholder."""
    for name, key in MCP_CONFIGS.items():
        server = json.loads((ROOT / "editor-configs" / name).read_text())["mcpServers"][key]
        assert server["command"] == PLACEHOLDER + "hermes-mcp", name
        assert Path(server["command"]).is_absolute()
    for name, (section,) in CONFIGS.items():
        command = json.loads((ROOT / "editor-configs" / name).read_text())[section]["Hermes"]["command"]
        assert Path(command).is_absolute(), name
    assert PLACEHOLDER in (ROOT / "editor-configs" / "README.md").read_text()
    assert f'"command": "{PLACEHOLDER}hermes-acp"' in (ROOT / "README.md").read_text()


def test_readme_zed_block_is_valid_json():
    text = (ROOT / "README.md").read_text()
    block = text.split("```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(block)["agent_servers"]["Hermes"]["type"] == "custom"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = "scripts/check"
    assert f"The test command on its own is `{command}`" in readme
    assert f"&& {command}\n```" in readme  # the whole-suite set-up ends with it
    assert ci.rstrip().splitlines()[-1] == command
    script = ROOT / command
    assert os.access(script, os.X_OK)
    steps = [line for line in script.read_text().splitlines() if line.startswith(".venv/bin/")]
    assert steps == [
        ".venv/bin/ruff format --check .",
        ".venv/bin/ruff check .",
        ".venv/bin/mypy",
        ".venv/bin/lint-imports",
        '.venv/bin/python -m pytest "$@"',
    ]
