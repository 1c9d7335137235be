"""Cron with no chat platform: ``hermes-gateway run`` runs the scheduler only, results stay in the store,
and ``cron add``/``cron run`` warn when no scheduler is running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import BIN, cli

WARNING = "no scheduler is running"


def write_config(home: Path) -> None:
    (home / "config.toml").write_text('log_level = "debug"\n[gateway]\nshutdown_grace = 5\n[cron]\ntick = 0.5\n', encoding="utf-8")


def scheduler_env(home: Path, model_url: str) -> dict[str, str]:
    """No TELEGRAM_BOT_TOKEN: the gateway has no platform."""
    return {
        "HERMES_EDITOR_HOME": str(home),
        "HOME": str(home.parent / "user-home"),
        "PATH": os.environ["PATH"],
        "HERMES_QUIET": "1",
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": "sk-test-not-a-real-key-123456",
        "HERMES_MODEL": "openai:scripted",
    }


def wait_until(fact, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fact()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def start_scheduler(home: Path, model_url: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [str(BIN / "hermes-gateway"), "run"], env=scheduler_env(home, model_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def running() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"hermes-gateway exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        return cli(home, "gateway", "status").returncode == 0

    try:
        wait_until(running, 30, "the scheduler-only gateway to hold its lock")
    except BaseException:
        proc.kill()
        proc.communicate(timeout=10)
        raise
    return proc


def stop(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
    return proc.returncode, out, err


def added_id(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.split("Added job ")[1].split(":")[0]


def test_job_runs_without_a_bot_and_its_output_shows_in_cron_runs(hermes_home, project):
    write_config(hermes_home)
    with ScriptedOpenAIServer([{"text": "All green."}]) as model:
        proc = start_scheduler(hermes_home, model.base_url)
        try:
            status = cli(hermes_home, "gateway", "status")
            assert "scheduler: running" in status.stdout and "scheduled jobs only" in status.stdout, status.stdout
            job_id = added_id(cli(hermes_home, "cron", "add", "every 1h", "check the build", "--project", str(project)))
            ran = cli(hermes_home, "cron", "run", job_id)
            assert ran.returncode == 0 and WARNING not in ran.stderr, ran.stdout + ran.stderr

            def finished() -> list[dict] | None:
                rows = json.loads(cli(hermes_home, "cron", "runs", job_id, "--json").stdout)
                return rows if rows and rows[0]["status"] not in ("running", "queued") and rows[0]["delivery_status"] != "pending" else None

            rows = wait_until(finished, 60, "the run to finish")
            assert rows[0]["status"] == "ok" and rows[0]["result"] == "All green.", rows
            assert rows[0]["delivery_status"] == "skipped" and "no chat platform" in rows[0]["delivery_error"], rows
            assert "All green." in cli(hermes_home, "cron", "runs", job_id).stdout
        finally:
            code, out, err = stop(proc)
    assert code == 0, err
    assert "running scheduled jobs only" in out and "Traceback" not in err, out + err
    assert cli(hermes_home, "gateway", "status").returncode == 1  # the lock went with the process


def test_cron_add_warns_only_when_no_scheduler_runs(hermes_home, project):
    write_config(hermes_home)
    alone = cli(hermes_home, "cron", "add", "every 1h", "check the build", "--project", str(project))
    job_id = added_id(alone)
    warning = [line for line in alone.stderr.splitlines() if WARNING in line]
    assert len(warning) == 1 and "hermes-gateway run" in warning[0], alone.stderr
    queued = cli(hermes_home, "cron", "run", job_id)
    assert queued.returncode == 0 and WARNING in queued.stderr and "hermes-gateway run" in queued.stderr
    with ScriptedOpenAIServer([{"text": "[SILENT]"}] * 4) as model:
        proc = start_scheduler(hermes_home, model.base_url)
        try:
            watched = cli(hermes_home, "cron", "add", "every 2h", "check again", "--project", str(project))
            added_id(watched)
            assert WARNING not in watched.stderr, watched.stderr
        finally:
            code, _, err = stop(proc)
    assert code == 0, err
