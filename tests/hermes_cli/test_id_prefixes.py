"""Ids on the command line: the whole id or a unique prefix, everywhere; an ambiguous prefix lists the
candidates, and one that matches nothing says where to list them. Through the real ``hermes-editor``."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from core.store import SessionStore
from core.store.gateway import GatewayStore, PairingCode
from core.store.jobs import JobStore
from core.store.schedule import parse_schedule
from tests.hermes_cli.entry import hermes_editor


def _sql(home: Path, *statements: tuple[str, tuple]) -> None:
    async def body() -> None:
        async with SessionStore.open(home / "state.db") as store:
            for sql, params in statements:
                await store._conn.execute(sql, params)
            await store._conn.commit()

    asyncio.run(body())


def _jobs(home: Path, project: Path, ids: list[str]) -> None:
    """Jobs named after their ids, with exactly these ids."""

    async def body() -> None:
        async with SessionStore.open(home / "state.db") as store:
            jobs = JobStore(store)
            for wanted in ids:
                job = await jobs.add_job(
                    name=f"job {wanted}",
                    schedule=parse_schedule("every 2h", tz="UTC"),
                    timezone="UTC",
                    prompt="check",
                    project=str(project),
                )
                await store._conn.execute("UPDATE cron_jobs SET id = ? WHERE id = ?", (wanted, job.id))
            await store._conn.commit()

    asyncio.run(body())


def test_cron_job_ids_take_unique_prefixes(hermes_home, tmp_path):
    _jobs(hermes_home, tmp_path, ["ab12cd34", "ab98ef76", "ff001122"])
    paused = hermes_editor("cron", "pause", "ff0")
    assert paused.returncode == 0 and "Paused." in paused.stdout, paused.stderr
    listed = {job["id"]: job for job in json.loads(hermes_editor("cron", "list", "--json").stdout)}
    assert listed["ff001122"]["paused"] and not listed["ab12cd34"]["paused"]

    ambiguous = hermes_editor("cron", "remove", "ab")
    assert ambiguous.returncode == 1
    assert "'ab' matches more than one job; give more of the id:" in ambiguous.stderr
    assert "ab12cd34  job ab12cd34" in ambiguous.stderr and "ab98ef76  job ab98ef76" in ambiguous.stderr
    assert len(json.loads(hermes_editor("cron", "list", "--json").stdout)) == 3, "nothing was removed"

    missing = hermes_editor("cron", "run", "zz")
    assert missing.returncode == 1 and "No job 'zz'. List them with: hermes-editor cron list" in missing.stderr

    resumed = hermes_editor("cron", "resume", "FF00")  # case does not matter
    assert resumed.returncode == 0 and "Resumed." in resumed.stdout
    assert hermes_editor("cron", "runs", "ab1", "--json").stdout.strip() == "[]"
    assert hermes_editor("cron", "runs", "ab").returncode == 1
    removed = hermes_editor("cron", "remove", "ab9")
    assert removed.returncode == 0 and {j["id"] for j in json.loads(hermes_editor("cron", "list", "--json").stdout)} == {
        "ab12cd34",
        "ff001122",
    }


def test_memory_revert_takes_a_unique_prefix(hermes_home):
    from core.learning import memory
    from core.learning.context import current_settings

    memory.change_memory("add", "memory", text="The build runs with make.", who="test", settings=current_settings())
    memory.change_memory("add", "memory", text="Tests live in tests/.", who="test", settings=current_settings())
    path = memory.journal_path()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["id"], lines[1]["id"] = "c0ffee1111", "c0ffee2222"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    ambiguous = hermes_editor("memory", "revert", "c0ffee")
    assert ambiguous.returncode == 1
    assert "'c0ffee' matches more than one memory change" in ambiguous.stderr
    assert "c0ffee1111  test add MEMORY.md" in ambiguous.stderr and "c0ffee2222" in ambiguous.stderr
    missing = hermes_editor("memory", "revert", "deadbeef")
    assert missing.returncode == 1 and "No memory change 'deadbeef'. List them with: hermes-editor memory log" in missing.stderr

    reverted = hermes_editor("memory", "revert", "c0ffee1")
    assert reverted.returncode == 0 and "Reverted: remove in MEMORY.md" in reverted.stdout, reverted.stderr
    text = memory.memory_path("memory").read_text()
    assert "make" not in text and "Tests live in tests/." in text


def _codes(home: Path, codes: dict[str, str]) -> None:
    """Waiting pairing codes of these identities (each asked in their direct chat), named after their native ids."""

    async def body() -> None:
        async with SessionStore.open(home / "state.db") as store:
            gateway = GatewayStore(store)
            now = time.time()
            for code, user in codes.items():
                name = "user" + user.partition(":")[2]
                await gateway.issue_code(PairingCode(code, user, f"{user}:0", name, "pending", now, now + 3600), max_pending=10)

    asyncio.run(body())


def test_pairing_codes_and_users_take_unique_prefixes(hermes_home):
    _codes(
        hermes_home,
        {"ABCD2345": "telegram:1001", "ABCE6789": "telegram:1002", "MNPQ2345": "discord:2001", "WXYZ2345": "discord:3001"},
    )

    short = hermes_editor("pairing", "approve", "abc")
    assert short.returncode == 1 and "No pending pairing code 'ABC': give at least 4 characters of its id" in short.stdout

    _sql(hermes_home, ("UPDATE pairing_codes SET code = 'ABCD6789' WHERE code = 'ABCE6789'", ()))
    both = hermes_editor("pairing", "approve", "abcd")
    assert both.returncode == 1 and "'ABCD' matches more than one pending pairing code" in both.stdout
    assert "ABCD2345  user telegram:1001 (user1001)" in both.stdout and "ABCD6789  user telegram:1002 (user1002)" in both.stdout

    for code, who in (("abcd-2", "telegram:1001"), ("ABCD6", "telegram:1002"), ("mnpq", "discord:2001")):
        approved = hermes_editor("pairing", "approve", code)
        assert approved.returncode == 0 and f"Approved: user {who} (user{who[-4:]}) may now use the bot." in approved.stdout, (
            approved.stdout
        )
    rejected = hermes_editor("pairing", "reject", "wxyz")
    assert rejected.returncode == 0 and "Rejected." in rejected.stdout
    assert json.loads(hermes_editor("pairing", "list", "--json").stdout) == []
    wrong = hermes_editor("pairing", "approve", "QQQQ")
    assert wrong.returncode == 1 and "No pending pairing code matches" in wrong.stdout

    # A bare number is a Telegram user id, and a prefix of one names a paired Telegram user.
    users = hermes_editor("pairing", "revoke", "100")
    assert users.returncode == 1 and "'telegram:100' matches more than one paired user" in users.stdout
    assert "telegram:1001  user1001" in users.stdout and "telegram:1002  user1002" in users.stdout
    revoked = hermes_editor("pairing", "revoke", "1002")
    assert revoked.returncode == 0 and "Revoked user telegram:1002." in revoked.stdout
    paired = json.loads(hermes_editor("pairing", "users", "--json").stdout)
    assert [(u["user_id"], u["name"], u["person"]) for u in paired] == [
        ("telegram:1001", "user1001", "telegram:1001"),
        ("discord:2001", "user2001", "discord:2001"),
    ]
    gone = hermes_editor("pairing", "revoke", "1002")
    assert gone.returncode == 1 and "telegram:1002 was not paired" in gone.stdout
    other_platform = hermes_editor("pairing", "revoke", "2001")
    assert other_platform.returncode == 1 and "telegram:2001 was not paired" in other_platform.stdout
    assert "Revoked user discord:2001." in hermes_editor("pairing", "revoke", "discord:2001").stdout
    assert "telegram:1001  user1001  paired" in hermes_editor("pairing", "users").stdout


def test_sessions_and_approvals_list_an_ambiguous_prefix_s_candidates(hermes_home, tmp_path):
    async def body() -> None:
        async with SessionStore.open(hermes_home / "state.db") as store:
            for sid in ("5e55a001", "5e55a002"):
                await store.create_session(cwd=tmp_path, surface="acp", session_id=sid, title=f"title {sid}")
                await store.create_approval(session_id=sid, tool_call_id="c", tool_name="run_command", title=f"Run {sid}", detail={})
            rows = await store.pending_approvals()
            for row, new in zip(rows, ("abcdef01" + "0" * 24, "abcdef02" + "0" * 24)):
                await store._conn.execute("UPDATE approvals SET id = ? WHERE id = ?", (new, row.id))
            await store._conn.commit()

    asyncio.run(body())
    shown = hermes_editor("sessions", "export", "5e55a")
    assert shown.returncode == 1
    assert "'5e55a' matches more than one session" in shown.stderr and "5e55a001  title 5e55a001" in shown.stderr
    assert "No session 'nope'. List them with: hermes-editor sessions list" in hermes_editor("sessions", "show", "nope").stderr

    answered = hermes_editor("approvals", "deny", "abcdef")
    assert answered.returncode == 1 and "'abcdef' matches more than one approval" in answered.stderr
    assert "abcdef01" + "0" * 24 + "  pending: Run 5e55a00" in answered.stderr
    denied = hermes_editor("approvals", "deny", "abcdef02")
    assert denied.returncode == 0 and "Denied" in denied.stdout, denied.stderr
