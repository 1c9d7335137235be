"""Configuration: validation errors name file and key; environment overrides; no secret leaks."""

import pytest

from core.config import ConfigError, config_path, load_config


def test_defaults_without_a_file(hermes_home):
    config = load_config(env={})
    assert config.model is None and config.max_steps == 60 and config.providers == {}


def test_invalid_value_names_file_and_key(hermes_home):
    config_path().write_text('max_steps = "lots"\n')
    with pytest.raises(ConfigError) as info:
        load_config(env={})
    message = str(info.value)
    assert str(config_path()) in message and "max_steps" in message and "integer" in message


def test_unknown_key_and_bad_toml(hermes_home):
    config_path().write_text("modle = 'x'\n")
    with pytest.raises(ConfigError, match="modle.*not a known setting"):
        load_config(env={})
    config_path().write_text("model = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(env={})


def test_nested_key_is_named(hermes_home):
    config_path().write_text('[providers.local]\nbase_url = "http://x"\ntimeout = -1\n')
    with pytest.raises(ConfigError, match=r"providers\.local\.timeout"):
        load_config(env={})


def test_environment_overrides(hermes_home):
    config_path().write_text('model = "anthropic:claude-x"\n[providers.anthropic]\napi_key = "file-key-123456"\n')
    config = load_config(env={"ANTHROPIC_API_KEY": "env-key-654321", "OPENAI_API_KEY": "sk-o-123456", "HERMES_MODEL": "openai:gpt-x"})
    assert config.providers["anthropic"].api_key.get_secret_value() == "env-key-654321"
    ref = config.model_ref()
    assert ref.provider == "openai" and ref.model == "gpt-x"


def test_bare_model_name_needs_exactly_one_provider(hermes_home):
    one = load_config(env={"OPENAI_API_KEY": "sk-1234567", "HERMES_MODEL": "gpt-x"})
    assert one.model_ref().label == "openai:gpt-x"
    two = load_config(env={"OPENAI_API_KEY": "sk-1234567", "ANTHROPIC_API_KEY": "sk-ant-1234", "HERMES_MODEL": "gpt-x"})
    with pytest.raises(ConfigError, match="provider:model"):
        two.model_ref()
    colon = load_config(env={"OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "HERMES_MODEL": "qwen3:8b"})
    assert colon.model_ref().model == "qwen3:8b"


def test_unconfigured_provider_says_how(hermes_home):
    config = load_config(env={"HERMES_MODEL": "anthropic:claude-x", "OPENAI_API_KEY": "sk-1234567"})
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        config.model_ref()


def test_custom_compatible_provider_needs_base_url(hermes_home):
    config_path().write_text('[providers.box]\nprofile = "openai-compatible"\n')
    with pytest.raises(ConfigError, match=r"providers\.box\.base_url"):
        load_config(env={})


def test_secrets_stay_out_of_reprs_and_errors(hermes_home):
    config_path().write_text('[providers.openai]\napi_key = "sk-very-secret-000111"\nbogus = 1\n')
    with pytest.raises(ConfigError) as info:
        load_config(env={})
    assert "sk-very-secret" not in str(info.value)
    config_path().write_text('[providers.openai]\napi_key = "sk-very-secret-000111"\n')
    config = load_config(env={})
    assert "sk-very-secret" not in repr(config) and config.secrets == ["sk-very-secret-000111"]
