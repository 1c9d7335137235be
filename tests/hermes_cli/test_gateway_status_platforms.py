"""``hermes-editor gateway status`` names each platform of a running gateway and says which one is
still retrying (from the status file the gateway writes, its lock held), and reads an older
gateway's Telegram-only status file too."""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

from tests.hermes_cli.entry import hermes_editor


def _status(home: Path, name: str, data: dict) -> Path:
    directory = home / "gateway"
    directory.mkdir(exist_ok=True)
    (directory / f"{name}.json").write_text(json.dumps({"pid": 4321, "started_at": time.time(), "heartbeat": time.time(), **data}))
    return directory / f"{name}.lock"


def test_each_platform_is_named_and_one_retrying_says_why(hermes_home):
    lock = _status(
        hermes_home,
        "bot-abc",
        {
            "projects": ["app"],
            "cron_enabled": True,
            "platforms": {
                "telegram": {"state": "connected", "account": "@hermes_bot", "attempts": 0},
                "discord": {"state": "retrying", "account": "", "attempts": 3, "retry_at": time.time() + 60, "error": "gateway refused"},
            },
        },
    )
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        shown = hermes_editor("gateway", "status")
    finally:
        os.close(fd)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "bot-abc: running (pid 4321, telegram @hermes_bot, discord ?)" in shown.stdout
    assert "  discord: retrying (failed 3 times, next try " in shown.stdout and "): gateway refused" in shown.stdout
    assert "  telegram:" not in shown.stdout, "a connected platform needs no line of its own"
    stopped = hermes_editor("gateway", "status")
    assert stopped.returncode == 1 and "bot-abc: not running" in stopped.stdout and "discord: retrying" not in stopped.stdout


def test_an_older_telegram_only_status_file_still_reads(hermes_home):
    _status(hermes_home, "bot-old", {"bot": "old_bot", "mode": "polling", "telegram": {"state": "connected"}})
    shown = hermes_editor("gateway", "status")
    assert shown.returncode == 1 and "bot-old: not running (pid 4321, telegram @old_bot, polling)" in shown.stdout
