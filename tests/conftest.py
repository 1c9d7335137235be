"""Every test gets a temporary state home and HOME; real model calls are impossible."""

from __future__ import annotations

import os
import socket

import pytest

_REAL_KEYS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENROUTER_API_KEY",
    "HERMES_MODEL",
    "TELEGRAM_BOT_TOKEN",
    "DISCORD_BOT_TOKEN",
    "SLACK_BOT_TOKEN",
    "SLACK_APP_TOKEN",
    "SLACK_SIGNING_SECRET",
    "WHATSAPP_ACCESS_TOKEN",
    "WHATSAPP_APP_SECRET",
    "WHATSAPP_VERIFY_TOKEN",
    "MATRIX_ACCESS_TOKEN",
    "MATRIX_PASSWORD",
    "EMAIL_PASSWORD",
    "VOICE_STT_API_KEY",
    "VOICE_TTS_API_KEY",
)


@pytest.fixture(autouse=True)
def hermes_home(tmp_path, monkeypatch):
    """A fresh state home, HOME, and no credentials from the developer's environment."""
    home = tmp_path / "hermes-home"
    home.mkdir()
    monkeypatch.setenv("HERMES_EDITOR_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    (tmp_path / "user-home").mkdir()
    for key in _REAL_KEYS:
        monkeypatch.delenv(key, raising=False)
    return home


@pytest.fixture(autouse=True)
def _umask_per_test():
    """A CLI ``main()`` called in-process makes the umask private; the next test gets it back."""
    import core.state_home

    umask = os.umask(0o022)
    os.umask(umask)
    remembered = core.state_home._user_umask
    yield
    os.umask(umask)
    core.state_home._user_umask = remembered


@pytest.fixture(autouse=True)
def _no_outside_network(monkeypatch):
    """Sockets may only connect to loopback: a test that reaches a real provider fails."""
    real_connect = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "localhost", "::1") and not host.startswith("/"):
            raise OSError(f"tests may not connect to {host}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield


def pytest_configure(config):
    os.environ.setdefault("HERMES_QUIET", "")
