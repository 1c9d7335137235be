"""Run the real ``hermes-gateway`` process with any set of platforms, each against its local fake.

``start_gateway`` writes a config.toml (one project ``app``, another ``other``, the platform
sections the test gives) and waits until every platform named in ``wait_for`` reports
``connected`` in the gateway's status file. The scripted model (``tests.fakes.openai_server``)
is reached through the usual environment variables.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent

__all__ = ["BIN", "GatewayProcess", "cli", "gateway_status", "start_gateway", "wait_until", "write_config"]


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "the condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; that value is returned."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def write_config(home: Path, project: Path, sections: str, *, gateway_extra: str = "") -> None:
    """config.toml: the two projects, fast cron ticks, and ``sections`` (the platforms' tables)."""
    home.mkdir(parents=True, exist_ok=True)
    (project.parent / "other").mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        f"""
log_level = "debug"
[gateway]
shutdown_grace = 5
projects = {{ app = "{project}", other = "{project.parent / "other"}" }}
{gateway_extra}
[cron]
tick = 0.5
catch_up_grace = 3600
delivery_retry_delay = 0.3

{sections}
""",
        encoding="utf-8",
    )


def gateway_env(home: Path, model_url: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        "HERMES_EDITOR_HOME": str(home),
        "HOME": str(home.parent / "user-home"),
        "PATH": os.environ["PATH"],
        "HERMES_QUIET": "1",
    }
    if model_url:
        env.update({"OPENAI_BASE_URL": model_url, "OPENAI_API_KEY": "sk-test-not-a-real-key-123456", "HERMES_MODEL": "openai:scripted"})
    env.update(extra or {})
    return env


def gateway_status(home: Path) -> dict[str, Any]:
    """The newest status file the gateway wrote ({} before the first)."""
    files = sorted((home / "gateway").glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in files:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
    return {}


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``hermes-editor`` with this state home."""
    env = {**os.environ, "HERMES_EDITOR_HOME": str(home), "HERMES_QUIET": "1"}
    return subprocess.run([str(BIN / "hermes-editor"), *args], capture_output=True, text=True, env=env, timeout=60)


class GatewayProcess:
    """``hermes-gateway run`` as a child process; stopped with SIGTERM (then killed) on exit."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self._err_path = home / "gateway-stderr.log"

    def start(self, wait_for: Iterable[str], timeout: float = 40.0) -> GatewayProcess:
        """Start, and wait until each platform in ``wait_for`` is connected."""
        self._err = self._err_path.open("w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [str(BIN / "hermes-gateway"), "run"], env=self.env, stdout=subprocess.PIPE, stderr=self._err, text=True
        )
        names = list(wait_for)

        def connected() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"hermes-gateway exited {self.proc.returncode}: {self.stderr()}")
            platforms = gateway_status(self.home).get("platforms") or {}
            return all((platforms.get(n) or {}).get("state") == "connected" for n in names)

        try:
            wait_until(connected, timeout, f"{', '.join(names)} to connect")
        except AssertionError:
            self.stop()
            raise AssertionError(f"platforms {names} did not connect; stderr:\n{self.stderr()[-4000:]}") from None
        return self

    def stderr(self) -> str:
        try:
            return self._err_path.read_text(encoding="utf-8")
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> tuple[int, str]:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate(timeout=10)
        self._err.close()
        return self.proc.returncode, self.stderr()

    def __enter__(self) -> GatewayProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()


def start_gateway(
    home: Path,
    project: Path,
    sections: str,
    *,
    model: Any = None,
    wait_for: Iterable[str] = (),
    env: dict[str, str] | None = None,
    gateway_extra: str = "",
) -> GatewayProcess:
    """Write the config with ``sections`` and start a gateway talking to ``model`` (a
    ``ScriptedOpenAIServer``, or None for no model)."""
    write_config(home, project, sections, gateway_extra=gateway_extra)
    return GatewayProcess(home, gateway_env(home, model.base_url if model else None, env)).start(wait_for)
