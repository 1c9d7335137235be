"""Run the real ``hermes-gateway`` process against the fake Bot API and the scripted model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.fakes.telegram_server import FakeTelegram

BIN = Path(sys.executable).parent
OWNER = 4242
STRANGER = 777


def write_config(home: Path, project: Path, *, extra: str = "", allowed: tuple[int, ...] = (OWNER,)) -> None:
    """A config.toml with one project and the owner on the allowlist."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f"""
log_level = "debug"
[telegram]
allowed_users = [{", ".join(str(a) for a in allowed)}]
poll_timeout = 1
edit_interval = 0.2
[gateway]
owner = {OWNER}
shutdown_grace = 5
projects = {{ app = "{project}", other = "{project.parent / "other"}" }}
[cron]
tick = 0.5
catch_up_grace = 3600
delivery_retry_delay = 0.3
{extra}
""",
        encoding="utf-8",
    )
    (project.parent / "other").mkdir(exist_ok=True)


def start(
    hermes_home: Path, project: Path, telegram: FakeTelegram, model: Any, *, extra: str = "", allowed: tuple[int, ...] = (OWNER,)
) -> GatewayProcess:
    """Write the config and start a gateway that talks to ``model`` (none when ``model`` is None)."""
    write_config(hermes_home, project, extra=extra, allowed=allowed)
    return GatewayProcess(gateway_env(hermes_home, telegram, model.base_url if model else None)).start(telegram)


def cli(hermes_home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``hermes-editor`` with this state home."""
    env = {**os.environ, "HERMES_EDITOR_HOME": str(hermes_home), "HERMES_QUIET": "1"}
    return subprocess.run([str(BIN / "hermes-editor"), *args], capture_output=True, text=True, env=env, timeout=60)


def settle(telegram: FakeTelegram, user: int = OWNER) -> None:
    """Return once the gateway has handled every update sent before this call.

    The gateway handles one chat's updates one at a time, in order; the reply to a ``/whoami``
    sent now is a fact that comes after everything queued before it in ``user``'s chat. Other
    chats are handled alongside: wait for their own replies.
    """
    seen = sum("User id" in m["text"] for m in telegram.sent(user))
    telegram.send_user_message(user, "/whoami")
    telegram.wait_for(lambda: sum("User id" in m["text"] for m in telegram.sent(user)) > seen, 20, "the /whoami reply")


def gateway_env(home: Path, telegram: FakeTelegram, model_url: str | None) -> dict[str, str]:
    env = {
        "HERMES_EDITOR_HOME": str(home),
        "HOME": str(home.parent / "user-home"),
        "PATH": os.environ["PATH"],
        "HERMES_QUIET": "1",
        "TELEGRAM_BOT_TOKEN": telegram.token,
        "TELEGRAM_API_BASE_URL": telegram.base_url,
    }
    if model_url:
        env.update({"OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "sk-test-not-a-real-key-123456", "HERMES_MODEL": "openai:scripted"})
    return env


class GatewayProcess:
    """``hermes-gateway run`` as a child process; stopped with SIGTERM (then killed) on exit."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.proc: subprocess.Popen[str] | None = None

    def start(self, telegram: FakeTelegram, *, ready_timeout: float = 30.0, ready_method: str = "getUpdates") -> GatewayProcess:
        """Start and wait until it calls ``ready_method`` (getUpdates when polling, setWebhook in webhook mode)."""
        polls_before = sum(1 for m, _ in telegram.calls if m == ready_method)
        self.proc = subprocess.Popen(
            [str(BIN / "hermes-gateway"), "run"], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"hermes-gateway exited {self.proc.returncode}: {self.proc.stderr.read() if self.proc.stderr else ''}")
            if sum(1 for m, _ in telegram.calls if m == ready_method) > polls_before:
                return self
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"hermes-gateway did not call {ready_method} in time")

    def stop(self, timeout: float = 30.0) -> tuple[int, str]:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
        return self.proc.returncode, err

    def __enter__(self) -> GatewayProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
