"""``hermes-editor setup`` against a real local server: the key for an OpenAI-compatible server, the
models the server reports offered by number, and a server that cannot be reached."""

from __future__ import annotations

import socket
import stat

from core.config import load_config
from tests.fakes.openai_server import ModelListServer
from tests.hermes_cli.entry import hermes_editor

KEY = "sk-test-local-server-key-5f4e3d2c1b"
MODELS = ["qwen3:8b", "llama3.2:3b", "mistral-small:24b"]

# The wizard's provider numbers.
OLLAMA, LMSTUDIO, OTHER = "4", "5", "6"


def test_openai_compatible_server_asks_a_key_and_offers_its_models(hermes_home):
    with ModelListServer(MODELS) as server:
        done = hermes_editor("setup", input=f"{OTHER}\n{server.base_url}\n{KEY}\n2\n")
        assert done.returncode == 0, done.stdout + done.stderr
        assert KEY not in done.stdout + done.stderr, "the key is never echoed"
        # The listing was asked with the key, at the OpenAI-compatible route.
        assert server.gets[0] == ("/v1/models", server.gets[0][1]) and server.gets[0][1]["authorization"] == f"Bearer {KEY}"
    out = done.stdout
    assert "API key for this server (Enter for none)" in out
    for number, name in enumerate(sorted(MODELS), 1):
        assert f"  {number}. {name}" in out
    path = hermes_home / "config.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = load_config(path, env={})
    assert config.model == f"custom:{sorted(MODELS)[1]}"
    provider = config.providers["custom"]
    assert provider.api_key is not None and provider.api_key.get_secret_value() == KEY
    assert provider.base_url == server.base_url


def test_the_key_may_be_empty_and_a_name_may_be_typed(hermes_home):
    with ModelListServer(MODELS) as server:
        done = hermes_editor("setup", input=f"{OTHER}\n{server.base_url}\n\nmy-own-model\n")
        assert "authorization" not in server.gets[0][1], "no key, no Authorization header"
    assert done.returncode == 0, done.stdout + done.stderr
    config = load_config(hermes_home / "config.toml", env={})
    assert config.model == "custom:my-own-model"
    assert config.providers["custom"].api_key is None
    assert "api_key" not in (hermes_home / "config.toml").read_text()


def test_ollama_lists_its_models_through_api_tags_and_defaults_to_the_suggested_one(hermes_home):
    # An Ollama without the OpenAI-compatible listing: the native /api/tags answers.
    with ModelListServer(MODELS, openai_list=False) as server:
        done = hermes_editor("setup", input=f"{OLLAMA}\n{server.base_url}\n\n")
        assert [path for path, _ in server.gets] == ["/v1/models", "/api/tags"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The server has 3 models:" in done.stdout
    # Enter takes the wizard's suggestion for Ollama when the server has it (qwen3:8b, number 3 of the sorted list).
    assert "Model (a number, or a name) [3]:" in done.stdout
    assert "API key" not in done.stdout, "a local Ollama is not asked for a key"
    assert load_config(hermes_home / "config.toml", env={}).model == "ollama:qwen3:8b"


def test_a_number_outside_the_list_is_asked_again(hermes_home):
    with ModelListServer(MODELS) as server:
        done = hermes_editor("setup", input=f"{LMSTUDIO}\n{server.base_url}\n7\n3\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "'7' is not one of 1-3" in done.stdout
    assert load_config(hermes_home / "config.toml", env={}).model == f"lmstudio:{sorted(MODELS)[2]}"


def test_an_unreachable_server_says_so_and_takes_a_typed_name(hermes_home):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"  # nothing listens here any more
    done = hermes_editor("setup", input=f"{LMSTUDIO}\n{url}\nlocal-model\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Could not list the server's models (cannot reach {url}: connection refused or host not found)" in done.stdout
    assert "Traceback" not in done.stderr
    config = load_config(hermes_home / "config.toml", env={})
    assert config.model == "lmstudio:local-model" and config.model_ref().config.base_url == url


def test_a_server_that_refuses_the_key_is_named(hermes_home):
    class Refusing(ModelListServer):
        def handle_get(self, path: str) -> object | None:
            return None  # 404 on both routes

    with Refusing(MODELS) as server:
        done = hermes_editor("setup", input=f"{OTHER}\n{server.base_url}\n{KEY}\nnamed-model\n")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "/v1/models: HTTP 404" in done.stdout and "/api/tags: HTTP 404" in done.stdout
    assert KEY not in done.stdout + done.stderr
    assert load_config(hermes_home / "config.toml", env={}).model == "custom:named-model"


def test_a_second_run_keeps_the_key_when_enter_is_pressed_and_lists_with_it(hermes_home):
    with ModelListServer(MODELS) as server:
        first = hermes_editor("setup", input=f"{OTHER}\n{server.base_url}\n{KEY}\n1\n")
        assert first.returncode == 0, first.stdout + first.stderr
        again = hermes_editor("setup", input=f"{OTHER}\n{server.base_url}\n\n3\n")
        assert again.returncode == 0, again.stdout + again.stderr
        assert [headers.get("authorization") for _, headers in server.gets] == [f"Bearer {KEY}"] * 2
        assert "API key for this server (Enter keeps the configured one)" in again.stdout
    assert KEY not in again.stdout + again.stderr
    config = load_config(hermes_home / "config.toml", env={})
    assert config.model == f"custom:{sorted(MODELS)[2]}"
    assert config.providers["custom"].api_key.get_secret_value() == KEY
