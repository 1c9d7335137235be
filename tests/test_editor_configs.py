"""The ready-to-paste editor configurations are valid and launch hermes-acp."""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_zed_and_jetbrains_configs_launch_hermes_acp():
    for name in ("zed-settings.json", "jetbrains-acp.json"):
        config = json.loads((ROOT / "editor-configs" / name).read_text())
        server = config["agent_servers"]["Hermes"]
        assert server["command"] == "hermes-acp" and server["args"] == []


def test_readme_zed_block_is_valid_json():
    text = (ROOT / "README.md").read_text()
    block = text.split("```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(block)["agent_servers"]["Hermes"]["type"] == "custom"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    command = ".venv/bin/python -m pytest"
    assert f"The test command on its own is `{command}`" in readme
    assert ci.rstrip().splitlines()[-1] == command
