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


@pytest.mark.parametrize(
    ("text", "key", "nearest"),
    [
        ("modle = 'x'\n", "modle", "model"),
        ("[learnings]\n", "learnings", "learning"),
        ("[providers.openai]\napi_kye = 'x'\n", "providers.openai.api_kye", "api_key"),
        ("[learning]\ncompat_file = 'never'\n", "learning.compat_file", "compat_files"),
        ("[telegram]\nallowed_user = [1]\n", "telegram.allowed_user", "allowed_users"),
        ("[gateway]\nownr = 1\n", "gateway.ownr", "owner"),
        ("[mcp]\nproject = []\n", "mcp.project", "projects"),
        ("[sandbox]\nhid = []\n", "sandbox.hid", "hide"),
    ],
)
def test_unknown_key_suggests_the_nearest(hermes_home, text, key, nearest):
    config_path().write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(env={})
    message = str(info.value)
    assert str(config_path()) in message and f"key '{key}'" in message and f"did you mean `{nearest}`?" in message


def test_unknown_key_without_a_near_one_asks_for_the_spelling(hermes_home):
    config_path().write_text("zzzzzz = 1\n")
    with pytest.raises(ConfigError, match="zzzzzz.*not a known setting") as info:
        load_config(env={})
    assert "did you mean" not in str(info.value) and "check the spelling" in str(info.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('model = "openai:"\n', "model"),
        ('model = ":"\n', "model"),
        ('model = ":gpt-4"\n', "model"),
        ('fallback_models = ["openai:gpt-4.1", "anthropic:"]\n', "fallback_models.1"),
        ('[learning]\nsummary_model = ":x"\n', "learning.summary_model"),
    ],
)
def test_model_without_provider_or_name_is_rejected_at_load(hermes_home, text, key):
    config_path().write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(env={"OPENAI_API_KEY": "sk-1234567"})
    message = str(info.value)
    assert str(config_path()) in message and f"key '{key}'" in message and '"openai:gpt-4.1"' in message
    assert info.value.key == key and info.value.env is None


@pytest.mark.parametrize("value", ["openai:", ":", ":gpt-4"])
def test_bad_hermes_model_is_blamed_on_the_variable(hermes_home, value):
    config_path().write_text('model = "openai:gpt-4.1"\n')
    with pytest.raises(ConfigError) as info:
        load_config(env={"OPENAI_API_KEY": "sk-1234567", "HERMES_MODEL": value})
    message = str(info.value)
    assert message.startswith("environment variable HERMES_MODEL:") and "HERMES_MODEL=openai:gpt-4.1" in message
    assert "config.toml," not in message and str(config_path()) not in message
    assert info.value.env == "HERMES_MODEL" and info.value.path is None


def test_unresolvable_hermes_model_is_blamed_on_the_variable(hermes_home):
    config = load_config(env={"HERMES_MODEL": "anthropic:claude-x", "OPENAI_API_KEY": "sk-1234567"})
    with pytest.raises(ConfigError) as info:
        config.model_ref()
    message = str(info.value)
    assert message.startswith("environment variable HERMES_MODEL:") and "ANTHROPIC_API_KEY" in message
    assert str(config_path()) not in message
    picked = config.model_copy(update={"model": "anthropic:claude-y"})
    with pytest.raises(ConfigError, match="key 'model'"):
        picked.model_ref()
    config_path().write_text('model = "anthropic:claude-x"\n')
    from_file = load_config(env={"OPENAI_API_KEY": "sk-1234567"})
    with pytest.raises(ConfigError) as info:
        from_file.model_ref()
    assert str(info.value).startswith(f"{config_path()}, key 'model':")
    assert from_file.model_ref("openai:gpt-x").label == "openai:gpt-x"


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
