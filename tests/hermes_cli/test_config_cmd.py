"""``hermes-editor config`` and a repeated ``setup``, through the real entry point with a temporary home."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from core.config import load_config

BIN = Path(sys.executable).parent
API_KEY = "sk-test-config-secret-0123456789abcdef"
BOT_TOKEN = "123456789:AAtest-config-bot-token-abcdefghijklmnop"

CONFIG = f"""\
# Written by hand: this comment stays.
model = "ollama:qwen3:8b"

[providers.ollama]
base_url = "http://127.0.0.1:11434/v1"  # the local server

[providers.openai]
api_key = "{API_KEY}"

[telegram]
token = "{BOT_TOKEN}"
allowed_users = [42]
"""


def hermes_editor(*args: str, input: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = BIN / "hermes-editor"
    assert path.exists(), f"{path} is missing: install the project (pip install -e .[test])"
    return subprocess.run(
        [str(path), *args],
        input=input,
        capture_output=True,
        text=True,
        env={**os.environ, "HERMES_QUIET": "1", **(env or {})},
        timeout=90,
        start_new_session=True,
    )


def write_config(home: Path, text: str = CONFIG) -> Path:
    path = home / "config.toml"
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_path_prints_the_config_file(hermes_home):
    result = hermes_editor("config", "path")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(hermes_home / "config.toml")


def test_show_prints_the_file_without_secrets_and_is_the_default(hermes_home):
    write_config(hermes_home)
    shown = hermes_editor("config", "show")
    assert shown.returncode == 0, shown.stderr
    assert "# Written by hand: this comment stays." in shown.stdout
    assert 'base_url = "http://127.0.0.1:11434/v1"  # the local server' in shown.stdout
    assert 'api_key = "***"' in shown.stdout and 'token = "***"' in shown.stdout
    assert "allowed_users = [42]" in shown.stdout
    assert API_KEY not in shown.stdout + shown.stderr and BOT_TOKEN not in shown.stdout + shown.stderr
    bare = hermes_editor("config")
    assert bare.returncode == 0 and bare.stdout == shown.stdout


def test_show_as_json_is_the_configuration_in_effect_with_secrets_as_set_or_null(hermes_home):
    write_config(
        hermes_home, CONFIG + '\n[mcp_servers.gh]\ncommand = "gh-mcp"\nenv = { GITHUB_TOKEN = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4" }\n'
    )
    shown = hermes_editor("config", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["model"] == "ollama:qwen3:8b"
    assert data["providers"]["openai"]["api_key"] == "set" and data["providers"]["ollama"]["api_key"] is None
    assert data["providers"]["ollama"]["base_url"] == "http://127.0.0.1:11434/v1"
    assert data["telegram"]["token"] == "set" and data["telegram"]["webhook_secret"] is None
    assert data["telegram"]["allowed_users"] == [42]
    assert data["mcp_servers"]["gh"]["env"] == {"GITHUB_TOKEN": "set"}
    assert data["retry"]["max_attempts"] >= 1, "the defaults are in it too"
    for secret in (API_KEY, BOT_TOKEN, "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4"):
        assert secret not in shown.stdout + shown.stderr
    assert json.loads(hermes_editor("config", "--json").stdout) == data

    # A key from the environment counts as set; an unloadable file is an error, not a half answer.
    (hermes_home / "config.toml").unlink()
    from_env = hermes_editor("config", "show", "--json", env={"ANTHROPIC_API_KEY": "sk-ant-test-env-0123456789abcdef"})
    assert json.loads(from_env.stdout)["providers"]["anthropic"]["api_key"] == "set"
    write_config(hermes_home, "retry = 3\n")
    broken = hermes_editor("config", "show", "--json")
    assert broken.returncode == 1 and broken.stdout == "" and "The configuration does not load" in broken.stderr


def test_show_without_a_config_points_at_setup(hermes_home):
    result = hermes_editor("config")
    assert result.returncode == 0
    assert "hermes-editor setup" in result.stdout


def test_get_prints_one_value_by_dotted_key(hermes_home):
    write_config(hermes_home)
    url = hermes_editor("config", "get", "providers.ollama.base_url")
    assert url.returncode == 0 and url.stdout == "http://127.0.0.1:11434/v1\n"
    users = hermes_editor("config", "get", "telegram.allowed_users")
    assert users.returncode == 0 and users.stdout.strip() == "[42]"
    secret = hermes_editor("config", "get", "providers.openai.api_key")
    assert secret.returncode == 0 and API_KEY not in secret.stdout and secret.stdout.strip() == "***"
    table = hermes_editor("config", "get", "telegram")
    assert table.returncode == 0 and "allowed_users = [42]" in table.stdout and BOT_TOKEN not in table.stdout
    missing = hermes_editor("config", "get", "providers.anthropic.base_url")
    assert missing.returncode == 1 and "is not set" in missing.stderr


def test_set_edits_one_key_and_keeps_the_rest(hermes_home):
    path = write_config(hermes_home)
    result = hermes_editor("config", "set", "providers.ollama.base_url", "http://10.0.0.2:11434/v1")
    assert result.returncode == 0, result.stderr
    number = hermes_editor("config", "set", "retry.max_attempts", "5")
    assert number.returncode == 0, number.stderr
    text = path.read_text()
    # Everything else is as it was, comments included, in the same order.
    assert text == CONFIG.replace("http://127.0.0.1:11434/v1", "http://10.0.0.2:11434/v1") + "\n[retry]\nmax_attempts = 5\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = load_config(path, env={})
    assert config.providers["ollama"].base_url == "http://10.0.0.2:11434/v1"
    assert config.retry.max_attempts == 5  # parsed as a TOML integer, not a string


def test_set_refuses_an_invalid_value_and_leaves_the_file_unchanged(hermes_home):
    path = write_config(hermes_home)
    for key, value, blamed in (
        ("retry.max_attempts", "many", "retry.max_attempts"),
        ("model", "openai:", "model"),
        ("gateway.no_such_key", "1", "gateway.no_such_key"),
    ):
        result = hermes_editor("config", "set", key, value)
        assert result.returncode == 1, result.stdout
        assert "Not changed" in result.stderr and f"key '{blamed}'" in result.stderr
        assert str(path) in result.stderr
        assert "Traceback" not in result.stderr
        assert path.read_text() == CONFIG
    assert sorted(p.name for p in hermes_home.iterdir() if p.name.startswith(".config")) == []


def test_setup_again_keeps_the_tables_it_does_not_ask_about(hermes_home):
    path = write_config(hermes_home, CONFIG + "\n[gateway]\nowner = 42\n")
    # 1 = OpenAI: a key, then a model.
    key = "sk-test-second-setup-key-987654321"
    result = hermes_editor("setup", input=f"1\n{key}\ngpt-4.1-mini\n")
    assert result.returncode == 0, result.stdout + result.stderr
    text = path.read_text()
    assert "# Written by hand: this comment stays." in text
    assert "[telegram]" in text and BOT_TOKEN in text and "allowed_users = [42]" in text
    assert "[gateway]\nowner = 42" in text
    config = load_config(path, env={})
    assert config.model == "openai:gpt-4.1-mini"
    assert config.providers["openai"].api_key.get_secret_value() == key
    assert config.providers["ollama"].base_url == "http://127.0.0.1:11434/v1"
    assert config.telegram.token.get_secret_value() == BOT_TOKEN
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert (hermes_home / "config.toml.bak").read_text().startswith(CONFIG)
