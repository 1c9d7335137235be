"""Telegram failing at start-up: the real ``hermes-gateway run`` retries the platform with backoff
while the scheduler keeps running, logs every failure, says so in ``gateway status``, and
exits cleanly on SIGTERM/SIGINT at any point."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.telegram_server import FakeTelegram
from tests.hermes_gateway.harness import BIN, OWNER, cli, gateway_env, write_config


def wait_until(fact, timeout: float, what: str, proc: subprocess.Popen[str] | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"hermes-gateway exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        value = fact()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def launch(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([str(BIN / "hermes-gateway"), "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> tuple[int, str]:
    """Signal the gateway and collect its exit code and stderr (killed if it hangs: the test then fails)."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"hermes-gateway did not exit after {signal.Signals(sig).name}; stderr: {err}") from None
    return proc.returncode, err


def telegram_state(home: Path) -> dict:
    """The ``telegram`` record of the bot's status file ({} before it is written)."""
    for path in (home / "gateway").glob("bot-*.json"):
        try:
            return json.loads(path.read_text(encoding="utf-8")).get("telegram") or {}
        except ValueError:
            return {}  # caught mid-write
    return {}


def log_text(home: Path) -> str:
    path = home / "logs" / "gateway.log"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_jobs_run_while_telegram_is_down_and_chat_works_once_it_is_back(hermes_home, project, telegram):
    telegram.fail_methods["getMe"] = 10_000  # Telegram answers 502 Bad Gateway until told otherwise
    write_config(hermes_home, project)
    added = cli(hermes_home, "cron", "add", "every 1h", "check the build", "--project", str(project))
    job_id = added.stdout.split("Added job ")[1].split(":")[0]
    assert cli(hermes_home, "cron", "run", job_id).returncode == 0
    with ScriptedOpenAIServer([{"text": "All green."}, {"text": "Hello again."}]) as model:
        proc = launch(gateway_env(hermes_home, telegram, model.base_url))
        try:

            def job_done() -> list[dict] | None:
                rows = json.loads(cli(hermes_home, "cron", "runs", job_id, "--json").stdout)
                return rows if rows and rows[0]["status"] not in ("running", "queued") else None

            rows = wait_until(job_done, 60, "the queued job to run", proc)
            assert rows[0]["status"] == "ok" and rows[0]["result"] == "All green.", rows
            assert not any(m == "getUpdates" for m, _ in telegram.calls)  # it ran while Telegram was still down
            wait_until(lambda: telegram_state(hermes_home).get("attempts"), 30, "a failed attempt", proc)
            state = telegram_state(hermes_home)
            assert state["state"] == "retrying" and "Bad Gateway" in state["error"], state
            status = cli(hermes_home, "gateway", "status")
            assert status.returncode == 0 and ": running" in status.stdout, status.stdout
            assert "telegram: retrying" in status.stdout and "Bad Gateway" in status.stdout, status.stdout
            assert "Telegram start-up failed (attempt 1)" in log_text(hermes_home)

            with telegram._cond:
                telegram.fail_methods["getMe"] = 0  # Telegram is back
            wait_until(lambda: any(m == "getUpdates" for m, _ in telegram.calls), 60, "polling to start", proc)
            telegram.send_user_message(OWNER, "are you there?")
            telegram.wait_text(OWNER, "Hello again.", timeout=30)
            assert wait_until(lambda: telegram_state(hermes_home).get("state") == "connected", 30, "the connected state", proc)
            assert "telegram:" not in cli(hermes_home, "gateway", "status").stdout  # nothing to report once connected
        finally:
            code, err = finish(proc)
    assert code == 0, err
    assert "Telegram start-up failed (attempt 1)" in err and "Bad Gateway" in err, err
    assert "Traceback" not in err, err
    assert telegram.token not in err and telegram.token not in log_text(hermes_home)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_unreachable_telegram_is_retried_and_a_signal_ends_it_cleanly(hermes_home, project, telegram, sig):
    write_config(hermes_home, project)
    env = gateway_env(hermes_home, telegram, None)
    env.update(
        {
            "TELEGRAM_API_BASE_URL": f"http://127.0.0.1:{closed_port()}/bot",
            "OPENAI_API_KEY": "sk-test-not-a-real-key-123456",
            "HERMES_MODEL": "openai:unused",
        }
    )
    proc = launch(env)
    try:
        wait_until(lambda: (telegram_state(hermes_home).get("attempts") or 0) >= 2, 60, "two failed attempts", proc)
        state = telegram_state(hermes_home)
        assert state["state"] == "retrying" and "cannot reach Telegram" in state["error"], state
        assert state["retry_at"] > time.time() - 1
        assert cli(hermes_home, "gateway", "status").returncode == 0  # running, though Telegram is not
        logged = log_text(hermes_home)
        assert "attempt 1" in logged and "attempt 2" in logged and "cannot reach Telegram" in logged
    finally:
        code, err = finish(proc, sig)
    assert code == 0, err
    assert "cannot reach Telegram" in err and "retrying in" in err, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert cli(hermes_home, "gateway", "status").returncode == 1  # stopped: the lock went with the process


def test_a_rejected_token_is_named_and_the_gateway_keeps_running(hermes_home, project):
    with FakeTelegram(token="123456:the-token-telegram-knows-abcdefghijkl") as telegram:
        write_config(hermes_home, project)
        env = gateway_env(hermes_home, telegram, None)
        wrong = "123456:a-revoked-token-xyz-abcdefghijklmnop"
        env.update({"TELEGRAM_BOT_TOKEN": wrong, "OPENAI_API_KEY": "sk-test-not-a-real-key-123456", "HERMES_MODEL": "openai:unused"})
        proc = launch(env)
        try:
            wait_until(lambda: telegram_state(hermes_home).get("attempts"), 60, "the rejected attempt", proc)
            state = telegram_state(hermes_home)
            assert "rejected the bot token" in state["error"] and "TELEGRAM_BOT_TOKEN" in state["error"], state
            assert state["retry_at"] - time.time() > 60  # retried only slowly: a new token needs a restart
            status = cli(hermes_home, "gateway", "status")
            assert status.returncode == 0 and "rejected the bot token" in status.stdout, status.stdout
        finally:
            code, err = finish(proc)
    assert code == 0, err
    assert "Telegram rejected the bot token (401 Unauthorized)" in err, err
    assert wrong not in err and wrong not in log_text(hermes_home) and wrong not in status.stdout
    assert "Traceback" not in err, err
