"""``--json`` on the listing commands of ``hermes-editor``, and the listing each command does by default."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.messages import UserMessage
from core.store import SessionStore
from core.store.jobs import JobStore
from core.store.schedule import parse_schedule

BIN = Path(sys.executable).parent / "hermes-editor"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN), *args],
        input="",
        capture_output=True,
        text=True,
        env={**os.environ, "HERMES_EDITOR_HOME": str(home), "HERMES_QUIET": "1"},
        timeout=90,
        start_new_session=True,
    )


def listing(home: Path, *args: str, code: int = 0) -> list[dict[str, Any]]:
    done = cli(home, *args)
    assert done.returncode == code, done.stderr
    assert SECRET not in done.stdout
    rows = json.loads(done.stdout)
    assert isinstance(rows, list)
    return rows


@pytest.fixture
def filled(hermes_home: Path, tmp_path: Path) -> Path:
    """Two sessions (one mentioning a token), a waiting question carrying it, and a cron job."""
    project = tmp_path / "project"
    project.mkdir()

    async def body() -> None:
        async with SessionStore.open(hermes_home / "state.db") as store:
            await store.create_session(cwd=project, surface="acp", session_id="abc123", title=f"push with {SECRET}")
            await store.append_message("abc123", UserMessage.of(f"quokka deploy using {SECRET}"))
            await store.create_session(cwd=project, surface="mcp", session_id="def456", title="wombat notes")
            await store.append_message("def456", UserMessage.of("wombat"))
            await store.create_approval(
                session_id="abc123",
                tool_call_id="call-1",
                tool_name="run_command",
                title="Run git push",
                detail={"command": f"git push https://{SECRET}@example.com", "reason": "it runs a command"},
            )
            await JobStore(store).add_job(
                name="morning", schedule=parse_schedule("every 2h", tz="UTC"), timezone="UTC", prompt="check", project=str(project)
            )

    asyncio.run(body())
    return hermes_home


def test_sessions_list_and_search_as_json(filled: Path) -> None:
    rows = listing(filled, "sessions", "list", "--json")
    assert {r["id"] for r in rows} == {"abc123", "def456"}
    first = next(r for r in rows if r["id"] == "abc123")
    assert set(first) >= {"id", "title", "cwd", "surface", "model", "created_at", "updated_at", "input_tokens", "output_tokens"}
    assert first["surface"] == "acp" and first["title"].startswith("push with") and "T" in first["updated_at"]
    assert listing(filled, "sessions", "--json") == rows
    hits = listing(filled, "sessions", "search", "quokka", "--json")
    assert [h["session_id"] for h in hits] == ["abc123"]
    assert hits[0]["role"] == "user" and "quokka" in hits[0]["snippet"] and hits[0]["seq"] >= 1
    assert listing(filled, "sessions", "search", "nothingmatches", "--json", code=1) == []
    text = cli(filled, "sessions")
    assert text.returncode == 0 and "abc123" in text.stdout and not text.stdout.startswith("[")


def test_approvals_list_as_json_redacts_like_the_text(filled: Path) -> None:
    (row,) = listing(filled, "approvals", "list", "--json")
    assert row["title"] == "Run git push" and row["session_id"] == "abc123" and row["surface"] == "acp"
    assert row["command"].startswith("git push") and row["reason"] == "it runs a command"
    assert set(row) >= {"id", "created_at", "paths", "offers_always", "session_title", "cwd"}
    assert listing(filled, "approvals", "--json") == [row]
    text = cli(filled, "approvals")
    assert row["id"] in text.stdout and SECRET not in text.stdout


def test_cron_lists_by_default_and_as_json(filled: Path) -> None:
    (job,) = listing(filled, "cron", "list", "--json")
    assert job["name"] == "morning" and job["timezone"] == "UTC" and job["paused"] is False
    assert job["next_run_at"].endswith("+00:00") and job["description"]
    assert listing(filled, "cron", "--json") == [job]
    bare = cli(filled, "cron")
    assert bare.returncode == 0 and job["id"] in bare.stdout and "Catch-up policy" in bare.stdout
    assert listing(filled, "cron", "runs", "--json") == []


def test_pairing_skills_and_memory_as_json(filled: Path) -> None:
    assert listing(filled, "pairing", "--json") == []
    assert listing(filled, "pairing", "users", "--json") == []
    assert cli(filled, "pairing").stdout.strip() == "No pairing requests waiting."
    skills = listing(filled, "skills", "list", "--json")
    assert skills and set(skills[0]) == {
        "name",
        "origin",
        "description",
        "path",
        "uses",
        "last_used",
        "created_by",
        "installed_from",
        "pinned",
    }
    assert listing(filled, "skills", "--json") == skills
    files = listing(filled, "memory", "--json")
    assert [f["file"] for f in files] == ["MEMORY.md", "USER.md"] and all(f["characters"] == 0 and f["budget"] > 0 for f in files)
    assert listing(filled, "memory", "log", "--json") == []


def test_json_listings_of_an_empty_home_are_empty_arrays(hermes_home: Path) -> None:
    for args in (("sessions", "--json"), ("approvals", "--json"), ("cron", "--json"), ("memory", "log", "--json")):
        assert listing(hermes_home, *args) == [], args


def test_gateway_reports_its_status_by_default(hermes_home: Path) -> None:
    bare = cli(hermes_home, "gateway")
    status = cli(hermes_home, "gateway", "status")
    assert bare.returncode == status.returncode == 1, "no gateway has run: nothing is running"
    assert bare.stdout == status.stdout and "No gateway has run yet. Start one with: hermes-gateway run" in bare.stdout


def test_gateway_status_as_json_while_a_scheduler_only_gateway_runs(hermes_home: Path) -> None:
    import signal
    import time

    from tests.fakes.openai_server import ScriptedOpenAIServer

    assert listing(hermes_home, "gateway", "status", "--json", code=1) == []
    (hermes_home / "config.toml").write_text("[gateway]\nshutdown_grace = 5\n[cron]\ntick = 0.5\n", encoding="utf-8")
    with ScriptedOpenAIServer([]) as model:
        env = {
            **os.environ,
            "HERMES_EDITOR_HOME": str(hermes_home),
            "HERMES_QUIET": "1",
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test-not-a-real-key-123456",
            "HERMES_MODEL": "openai:scripted",
        }
        env.pop("TELEGRAM_BOT_TOKEN", None)
        proc = subprocess.Popen(
            [str(BIN.parent / "hermes-gateway"), "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            deadline = time.monotonic() + 30
            rows: list[dict[str, Any]] = []
            while time.monotonic() < deadline and not (rows and rows[0]["running"]):
                assert proc.poll() is None, proc.communicate()[1]
                done = cli(hermes_home, "gateway", "--json")
                rows = json.loads(done.stdout)
                time.sleep(0.1)
            assert done.returncode == 0, done.stderr
            (row,) = rows
            assert row["name"] == "scheduler" and row["running"] is True and row["pid"] == proc.pid
            assert row["cron_enabled"] is True and row["started_at"].endswith("+00:00") and row["heartbeat"].endswith("+00:00")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
    stopped = cli(hermes_home, "gateway", "status", "--json")
    assert stopped.returncode == 1 and json.loads(stopped.stdout)[0]["running"] is False
