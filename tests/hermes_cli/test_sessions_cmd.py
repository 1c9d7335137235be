"""``hermes-editor sessions rename|delete|stats`` through the installed console script."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from core.host.checkpoints import Checkpoints
from core.messages import UserMessage
from core.store import SessionStore

BIN = Path(sys.executable).parent / "hermes-editor"


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN), "sessions", *args],
        input="",
        capture_output=True,
        text=True,
        env={**os.environ, "HERMES_EDITOR_HOME": str(home), "HERMES_QUIET": "1"},
        timeout=90,
        start_new_session=True,
    )


def seed(home: Path, project: Path) -> None:
    """Three sessions: two recent (ids sharing the prefix "ab"), one idle for 40 days; and
    checkpoints for the first."""

    async def body() -> None:
        async with SessionStore.open(home / "state.db") as store:
            for sid, surface, text in (
                ("abc123", "acp", "quokka plans"),
                ("abd456", "mcp", "wombat notes"),
                ("old789", "gateway", "numbat"),
            ):
                await store.create_session(cwd=project, surface=surface, session_id=sid, title=f"about {text}")
                await store.append_message(sid, UserMessage.of(text))
            await store.add_usage("abc123", 1200, 300, cost_usd=0.25)
            await store.add_usage("abd456", 800, 100)
        target = project / "f.txt"
        target.write_text("one")
        await Checkpoints(home / "checkpoints").snapshot("abc123", "turn1", [target])

    asyncio.run(body())
    idle = time.time() - 40 * 86_400
    with sqlite3.connect(home / "state.db") as conn:
        conn.execute("UPDATE sessions SET created_at = ?, updated_at = ? WHERE id = 'old789'", (idle, idle))


def checkpoints_of(home: Path, session_id: str) -> int:
    return len(asyncio.run(Checkpoints(home / "checkpoints").list(session_id)))


def test_rename_by_unique_prefix_and_ambiguous_prefix(tmp_path):
    home = tmp_path / "home"
    seed(home, tmp_path)
    renamed = cli(home, "rename", "abc", "Quokka", "migration")
    assert renamed.returncode == 0, renamed.stderr
    assert "abc123" in renamed.stdout and "'Quokka migration'" in renamed.stdout
    shown = cli(home, "show", "abc1")
    assert shown.stdout.startswith("Quokka migration  abc123")

    ambiguous = cli(home, "rename", "ab", "x")
    assert ambiguous.returncode == 1
    assert "abc123" in ambiguous.stderr and "abd456" in ambiguous.stderr
    assert cli(home, "rename", "zzz", "x").returncode == 1


def test_delete_one_session_removes_messages_search_hits_and_checkpoints(tmp_path):
    home = tmp_path / "home"
    seed(home, tmp_path)
    assert checkpoints_of(home, "abc123") == 1
    assert "abc123" in cli(home, "search", "quokka").stdout

    deleted = cli(home, "delete", "abc")
    assert deleted.returncode == 0, deleted.stderr
    assert "Deleted abc123" in deleted.stdout and "(1 messages)" in deleted.stdout
    assert checkpoints_of(home, "abc123") == 0
    assert cli(home, "search", "quokka").returncode == 1
    assert cli(home, "show", "abc123").returncode == 1
    assert "abd456" in cli(home, "show", "ab").stdout  # the prefix is unique now


def test_delete_older_than_with_dry_run_then_for_real(tmp_path):
    home = tmp_path / "home"
    seed(home, tmp_path)
    dry = cli(home, "delete", "--older-than", "30", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "Would delete old789" in dry.stdout and "abc123" not in dry.stdout
    assert cli(home, "show", "old789").returncode == 0

    real = cli(home, "delete", "--older-than", "30")
    assert real.returncode == 0, real.stderr
    assert "Deleted old789" in real.stdout and "Deleted 1 session(s)." in real.stdout
    assert cli(home, "show", "old789").returncode == 1
    assert "No session has been idle" in cli(home, "delete", "--older-than", "30").stdout
    assert cli(home, "delete").returncode == 2
    assert cli(home, "delete", "abc", "--older-than", "3").returncode == 2


def test_a_running_session_is_kept_unless_forced(tmp_path):
    home = tmp_path / "home"
    seed(home, tmp_path)
    with sqlite3.connect(home / "state.db") as conn:
        conn.execute(
            "INSERT INTO cron_jobs (id, name, schedule, timezone, prompt, project, created_at)"
            " VALUES ('j1', 'j', '@daily', 'UTC', 'p', '/', 1)"
        )
        conn.execute(
            "INSERT INTO cron_runs (id, job_id, scheduled_at, status, lease_until, session_id)"
            " VALUES ('r1', 'j1', 1, 'running', ?, 'abd456')",
            (time.time() + 3600,),
        )
    kept = cli(home, "delete", "abd")
    assert kept.returncode == 1
    assert "running now" in kept.stderr and "Deleted" not in kept.stdout
    assert cli(home, "show", "abd456").returncode == 0
    forced = cli(home, "delete", "abd", "--force")
    assert forced.returncode == 0 and "Deleted abd456" in forced.stdout


def test_stats_counts_sessions_messages_and_surfaces(tmp_path):
    home = tmp_path / "home"
    empty = cli(home, "stats")
    assert empty.returncode == 0 and "No sessions yet" in empty.stdout
    seed(home, tmp_path)
    out = cli(home, "stats")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "sessions:  3" in lines and "messages:  3" in lines
    assert any(line.split() == ["acp:", "1"] for line in lines)
    assert any(line.split() == ["gateway:", "1"] for line in lines)
    assert any(line.startswith("store:") and "MB" in line for line in lines)
    assert "tokens:    2,000 in, 400 out" in lines
    assert any(line.startswith("cost:      $0.2500") and "2 sessions without a known price" in line for line in lines)
    assert any(
        line.startswith("oldest:") and time.strftime("%Y-%m-%d", time.localtime(time.time() - 40 * 86_400)) in line for line in lines
    )


def test_stats_as_json(tmp_path):
    import json

    home = tmp_path / "home"
    empty = json.loads(cli(home, "stats", "--json").stdout)
    assert empty["sessions"] == 0 and empty["by_surface"] == {} and empty["oldest"] is None and empty["cost_usd"] is None
    seed(home, tmp_path)
    done = cli(home, "stats", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["sessions"] == 3 and found["messages"] == 3
    assert found["by_surface"] == {"acp": 1, "mcp": 1, "gateway": 1}
    assert found["size_bytes"] > 0 and found["path"] == str(home / "state.db")
    assert found["oldest"] < found["newest"] and found["newest"].endswith("+00:00")
    assert (found["input_tokens"], found["output_tokens"], found["cost_usd"], found["priced_sessions"]) == (2000, 400, 0.25, 1)


def test_top_level_search_takes_the_filters_and_json_of_sessions_search(tmp_path):
    import json

    home = tmp_path / "home"
    seed(home, tmp_path)
    env = {**os.environ, "HERMES_EDITOR_HOME": str(home), "HERMES_QUIET": "1"}

    def search(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN), "search", *args], capture_output=True, text=True, env=env, timeout=90)

    plain = search("quokka")
    assert plain.returncode == 0 and "abc123" in plain.stdout
    as_json = json.loads(search("quokka", "--json").stdout)
    assert [hit["session_id"] for hit in as_json] == ["abc123"] and as_json[0]["role"] == "user"
    assert search("quokka", "--role", "assistant").returncode == 1
    assert search("quokka", "--project", str(tmp_path / "elsewhere")).returncode == 1
    listed = json.loads(cli(home, "list", "--json").stdout)
    assert {row["id"] for row in listed} == {"abc123", "abd456", "old789"}
    assert {row["id"] for row in json.loads(cli(home, "--json").stdout)} == {"abc123", "abd456", "old789"}
