"""Webhook mode: the real hermes-gateway process, its tornado listener and the fake Bot API (real HTTP)."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error

import pytest

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.telegram_server import FakeTelegram
from tests.hermes_gateway.harness import BIN, OWNER, STRANGER, GatewayProcess, gateway_env, write_config

SECRET = "s3cret_Token-for-tests"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def webhook_config(port: int, secret: str | None) -> str:
    lines = [
        'mode = "webhook"',
        'webhook_url = "https://bot.example/hermes/hook"',
        'webhook_listen = "127.0.0.1"',
        f"webhook_port = {port}",
    ]
    if secret is not None:
        lines.append(f'webhook_secret = "{secret}"')
    return "\n".join(lines)


def write_webhook_config(home, project, port, secret):
    write_config(home, project)
    # The [telegram] keys go in the [telegram] table the harness wrote.
    path = home / "config.toml"
    path.write_text(path.read_text().replace("[telegram]\n", "[telegram]\n" + webhook_config(port, secret) + "\n", 1))


def post(telegram: FakeTelegram, url: str, update: dict, secret: str | None, timeout: float = 20.0) -> int:
    """POST, retrying while the listener is still coming up (setWebhook is called just before it serves)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return telegram.post_webhook(url, update, secret)
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_webhook_mode_sets_the_webhook_and_only_takes_updates_with_the_secret(hermes_home, project, telegram):
    port = free_port()
    write_webhook_config(hermes_home, project, port, SECRET)
    url = f"http://127.0.0.1:{port}/hermes/hook"
    with ScriptedOpenAIServer([{"text": "Hello over the webhook."}]) as model:
        env = gateway_env(hermes_home, telegram, model.base_url)
        with GatewayProcess(env).start(telegram, ready_method="setWebhook") as gateway:
            params = next(p for m, p in telegram.calls if m == "setWebhook")
            assert params["url"] == "https://bot.example/hermes/hook" and params["secret_token"] == SECRET
            assert not any(m == "getUpdates" for m, _ in telegram.calls)  # no polling in webhook mode

            def update(user: int, text: str) -> dict:
                return {"update_id": telegram.new_update_id(), "message": telegram.user_message(user, text)}

            # Without the secret header, or with a wrong one: refused, and no work is done.
            assert post(telegram, url, update(OWNER, "forged without a secret"), None) == 403
            assert post(telegram, url, update(OWNER, "forged with a wrong secret"), "not-the-secret") == 403
            assert post(telegram, url, update(STRANGER, "a stranger, also forged"), SECRET + "x") == 403

            # With the right secret: handled like a polled update. Its reply comes after anything
            # a forged update could have caused, and it is the only thing sent.
            assert post(telegram, url, update(OWNER, "hi via webhook"), SECRET) == 200
            telegram.wait_text(OWNER, "Hello over the webhook.")
            assert [m["text"] for m in telegram.sent()] == ["Hello over the webhook."]
            code, _ = gateway.stop()
        assert code == 0
        assert len(model.requests) == 1
        prompt = str(model.requests[0]["messages"])
        assert "hi via webhook" in prompt and "forged" not in prompt
    assert telegram.sent(STRANGER) == []


@pytest.mark.parametrize("secret", [None, ""])
def test_webhook_mode_refuses_to_start_without_a_secret(hermes_home, project, telegram, secret):
    write_webhook_config(hermes_home, project, free_port(), secret)
    with ScriptedOpenAIServer([]) as model:
        env = gateway_env(hermes_home, telegram, model.base_url)
        result = subprocess.run([str(BIN / "hermes-gateway"), "run"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "Webhook mode needs [telegram] webhook_url and webhook_secret" in result.stderr
    assert telegram.calls == []  # refused before talking to Telegram


def test_webhook_secret_must_be_one_telegram_accepts(hermes_home, project, telegram):
    write_webhook_config(hermes_home, project, free_port(), "has spaces!")
    with ScriptedOpenAIServer([]) as model:
        env = gateway_env(hermes_home, telegram, model.base_url)
        result = subprocess.run([str(BIN / "hermes-gateway"), "run"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "webhook_secret must be 1-256 characters" in result.stderr
