"""hermes-gateway with a profile: a second bot (or scheduler) in its own home, and never one made by a typo."""

from __future__ import annotations

import subprocess

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import BIN, cli
from tests.hermes_gateway.test_cron_without_bot import scheduler_env, stop, wait_until


def test_the_gateway_runs_in_its_profile_and_holds_it(hermes_home):
    assert cli(hermes_home, "profiles", "create", "bot2").returncode == 0
    bot2 = hermes_home / "profiles" / "bot2"
    (bot2 / "config.toml").write_text("[gateway]\nshutdown_grace = 5\n[cron]\ntick = 0.5\n", encoding="utf-8")
    with ScriptedOpenAIServer([]) as model:
        proc = subprocess.Popen(
            [str(BIN / "hermes-gateway"), "run", "--profile", "bot2"],
            env=scheduler_env(hermes_home, model.base_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:

            def running() -> bool:
                if proc.poll() is not None:
                    raise AssertionError(f"hermes-gateway exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
                return cli(hermes_home, "--profile", "bot2", "gateway", "status").returncode == 0

            wait_until(running, 30, "the profile's gateway to hold its lock")
            # Its lock, status and log are the profile's; the main home has no gateway running.
            assert (bot2 / "gateway" / "scheduler.json").is_file() and (bot2 / "logs" / "gateway.log").is_file()
            assert not (hermes_home / "gateway").exists()
            assert cli(hermes_home, "gateway", "status").returncode != 0
            busy = cli(hermes_home, "profiles", "remove", "bot2", "--yes")
            assert busy.returncode == 1 and f"in use by hermes-gateway (pid {proc.pid})" in busy.stderr, busy.stderr
            assert bot2.is_dir()
        finally:
            code, _, err = stop(proc)
    assert code == 0, err
    assert cli(hermes_home, "profiles", "remove", "bot2", "--yes").returncode == 0


def test_a_missing_profile_starts_no_gateway(hermes_home):
    result = subprocess.run(
        [str(BIN / "hermes-gateway"), "--profile", "bto2", "run"],
        env=scheduler_env(hermes_home, "http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "no profile named 'bto2'" in result.stderr and "hermes-editor profiles create bto2" in result.stderr
    assert not (hermes_home / "profiles").exists()
