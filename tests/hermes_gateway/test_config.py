"""The [telegram], [gateway] and [cron] sections: validation names the key; env overrides; checks before start."""

from __future__ import annotations

import pytest

from core.config import ConfigError, load_config
from hermes_gateway.app import Gateway, GatewayError, check_config

TOKEN = "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef1234"


def test_env_supplies_token_and_api_base(hermes_home):
    path = hermes_home / "config.toml"
    path.write_text('[telegram]\ntoken = "999:from-file"\n')
    config = load_config(env={"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_API_BASE_URL": "http://127.0.0.1:9/bot"})
    assert config.telegram.token.get_secret_value() == TOKEN and config.telegram.api_base_url == "http://127.0.0.1:9/bot"
    assert TOKEN in config.secrets and TOKEN not in repr(config)


def test_allowlist_takes_numeric_ids_only(hermes_home):
    (hermes_home / "config.toml").write_text('[telegram]\nallowed_users = ["@ada"]\n')
    with pytest.raises(ConfigError, match=r"config.toml, key 'telegram.allowed_users.0'"):
        load_config(env={})


def test_unknown_cron_setting_names_the_key(hermes_home):
    (hermes_home / "config.toml").write_text("[cron]\ngrace = 10\n")
    with pytest.raises(ConfigError, match="key 'cron.grace'"):
        load_config(env={})


def test_gateway_refuses_to_start_without_what_it_needs(hermes_home, tmp_path):
    (hermes_home / "config.toml").write_text("[cron]\nenabled = false\n")
    with pytest.raises(GatewayError, match="TELEGRAM_BOT_TOKEN"):
        Gateway(load_config(env={}))
    (hermes_home / "config.toml").write_text("[gateway]\nprojects = {}\n")
    with pytest.raises(GatewayError, match="projects"):
        check_config(load_config(env={"TELEGRAM_BOT_TOKEN": TOKEN}))
    (hermes_home / "config.toml").write_text(
        f'[gateway]\nprojects = {{ app = "{tmp_path}" }}\n[telegram]\nmode = "webhook"\nwebhook_url = "https://x.example/hook"\n'
    )
    with pytest.raises(GatewayError, match="webhook_secret"):
        check_config(load_config(env={"TELEGRAM_BOT_TOKEN": TOKEN}))
    (hermes_home / "config.toml").write_text(f'[gateway]\nprojects = {{ app = "{tmp_path / "missing"}" }}\n')
    with pytest.raises(GatewayError, match="not a directory"):
        check_config(load_config(env={"TELEGRAM_BOT_TOKEN": TOKEN}))
    (hermes_home / "config.toml").write_text(f'[gateway]\nprojects = {{ app = "{tmp_path}", b = "{tmp_path}" }}\n')
    assert list(check_config(load_config(env={"TELEGRAM_BOT_TOKEN": TOKEN}))) == ["app", "b"]  # the first is the default
