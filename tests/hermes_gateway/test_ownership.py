"""Limits per user, against the real hermes-gateway and the fake Bot API: pairing codes that no
crowd of strangers can use up, and cron jobs that belong to whoever made them (the owner
controls all)."""

from __future__ import annotations

import asyncio
import re
import sqlite3

from core.store import SessionStore
from core.store.jobs import JobStore
from core.store.schedule import parse_schedule
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import OWNER, cli, start

FRIEND = 5151
STRANGERS = [7001, 7002, 7003, 7004, 7005]
NEWCOMER = 7100


def _add_job(project, *, owner_id: int | None, name: str, chat_id: int) -> str:
    async def body() -> str:
        async with SessionStore.open() as store:
            job = await JobStore(store).add_job(
                name=name,
                schedule=parse_schedule("every 1h"),
                timezone="UTC",
                prompt=name,
                project=str(project),
                chat_key=f"telegram:{chat_id}:0",
                owner_id=None if owner_id is None else f"telegram:{owner_id}",
            )
            return job.id

    return asyncio.run(body())


def _jobs(hermes_home) -> dict[str, tuple]:
    """Every job as stored: id -> (paused, next_run_at, owner_id), and no queued runs."""
    with sqlite3.connect(hermes_home / "state.db") as conn:
        rows = conn.execute("SELECT id, paused, next_run_at, owner_id FROM cron_jobs").fetchall()
        queued = conn.execute("SELECT COUNT(*) FROM cron_runs").fetchone()[0]
    return {r[0]: tuple(r[1:]) for r in rows} | {"runs": queued}


def _job_id(text: str) -> str:
    return re.search(r"Added job (?:<code>)?`?([0-9a-f]{8})", text).group(1)


def _count(telegram, chat: int, needle: str) -> int:
    return sum(needle in m["text"] for m in telegram.sent(chat))


def test_strangers_cannot_use_up_pairing_and_a_newcomer_is_paired(hermes_home, project, telegram):
    with ScriptedOpenAIServer([{"text": "Welcome aboard."}]) as model, start(hermes_home, project, telegram, model):
        for stranger in STRANGERS:
            telegram.send_user_message(stranger, "let me in")
        codes = {s: telegram.wait_text(s, "Pairing code")["text"].split("Pairing code: ")[1][:8] for s in STRANGERS}
        # One stranger keeps asking: the same code every time, never a second slot.
        for _ in range(5):
            telegram.send_user_message(STRANGERS[0], "again")
        telegram.wait_for(lambda: _count(telegram, STRANGERS[0], "Pairing code") == 6, 20, "six replies")
        assert {m["text"].split("Pairing code: ")[1][:8] for m in telegram.sent(STRANGERS[0])} == {codes[STRANGERS[0]]}
        # A newcomer still gets a code (the old global limit of three refused the fourth stranger).
        telegram.send_user_message(NEWCOMER, "hello")
        code = telegram.wait_text(NEWCOMER, "Pairing code")["text"].split("Pairing code: ")[1][:8]
        assert cli(hermes_home, "pairing", "approve", code).returncode == 0
        telegram.send_user_message(NEWCOMER, "now?")
        telegram.wait_text(NEWCOMER, "Welcome aboard.")
    assert len(set(codes.values())) == len(STRANGERS)
    with sqlite3.connect(hermes_home / "state.db") as conn:
        per_user = conn.execute("SELECT user_id, COUNT(*) FROM pairing_codes WHERE status = 'pending' GROUP BY user_id").fetchall()
    assert sorted(per_user) == [(f"telegram:{s}", 1) for s in STRANGERS]
    assert all("Too many" not in m["text"] for s in STRANGERS for m in telegram.sent(s))


def test_a_paired_user_cannot_touch_the_owners_jobs_from_chat(hermes_home, project, telegram):
    machine_job = _add_job(project, owner_id=None, name="nightly backup check", chat_id=OWNER)
    with ScriptedOpenAIServer([]) as model, start(hermes_home, project, telegram, model, allowed=(OWNER, FRIEND)) as gateway:
        telegram.send_user_message(OWNER, "/cron add every 2h | water the plants")
        chat_job = _job_id(telegram.wait_text(OWNER, "Added job")["text"])
        before = _jobs(hermes_home)
        telegram.send_user_message(FRIEND, "/cron list")
        listing = telegram.wait_text(FRIEND, "No jobs of yours")
        attempts = [f"/cron {verb} {machine_job}" for verb in ("pause", "resume", "remove", "run", "runs")]
        attempts += [f"/cron pause {chat_job}", f"/cron remove {chat_job}", f"/cron run {chat_job}", f"/cron runs {chat_job}"]
        for attempt in attempts:
            telegram.send_user_message(FRIEND, attempt)
        telegram.wait_for(lambda: _count(telegram, FRIEND, "is not yours") == len(attempts), 20, "every refusal")
        # Each refusal is sent once its command is done; a run it queued would be a row by now.
        assert _jobs(hermes_home) == before and before["runs"] == 0
        # Their own job they control; the owner controls it too, and sees every job.
        telegram.send_user_message(FRIEND, "/cron add every 3h | stretch")
        friend_job = _job_id(telegram.wait_text(FRIEND, "Added job")["text"])
        telegram.send_user_message(FRIEND, "/cron list")
        telegram.wait_for(lambda: _count(telegram, FRIEND, "Jobs (missed runs") == 1, 20, "the friend's list")
        mine = next(m["text"] for m in telegram.sent(FRIEND) if "Jobs (missed runs" in m["text"])
        telegram.send_user_message(OWNER, f"/cron pause {friend_job}")
        telegram.wait_text(OWNER, "Paused.")
        telegram.send_user_message(OWNER, "/cron list")
        everything = telegram.wait_text(OWNER, "Jobs (missed runs")["text"]
        gateway.stop()
    assert machine_job not in listing["text"] and chat_job not in listing["text"]
    assert friend_job in mine and machine_job not in mine and chat_job not in mine
    assert all(j in everything for j in (machine_job, chat_job, friend_job)) and f"(by telegram:{FRIEND})" in everything
    after = _jobs(hermes_home)
    assert after[friend_job][0] == 1 and after[friend_job][2] == f"telegram:{FRIEND}"
    assert after[machine_job] == before[machine_job] and after[chat_job][2] == f"telegram:{OWNER}"
    assert f"by user telegram:{FRIEND}" in cli(hermes_home, "cron", "list").stdout


def test_a_paired_user_cannot_touch_the_owners_jobs_through_the_cron_tool(hermes_home, project, telegram):
    owners = _add_job(project, owner_id=None, name="deploy report", chat_id=OWNER)
    friends = _add_job(project, owner_id=FRIEND, name="friend's digest", chat_id=FRIEND)
    call = lambda i, args: {"tool_calls": [{"id": f"c{i}", "name": "cron", "arguments": args}]}
    script = [
        call(1, {"action": "pause", "job_id": owners}),
        call(2, {"action": "remove", "job_id": owners}),
        call(3, {"action": "run", "job_id": owners}),
        call(4, {"action": "runs", "job_id": owners}),
        call(5, {"action": "list"}),
        {"text": "Friend turn over."},
        call(6, {"action": "pause", "job_id": friends}),
        {"text": "Paused your friend's digest."},
    ]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, allowed=(OWNER, FRIEND)) as gateway:
        before = _jobs(hermes_home)
        telegram.send_user_message(FRIEND, "pause, remove and run the deploy report")
        telegram.wait_text(FRIEND, "Friend turn over.")
        results = [m["content"] for m in model.requests[5]["messages"] if m["role"] == "tool"]
        assert _jobs(hermes_home) == before
        telegram.send_user_message(OWNER, "pause the friend's digest")
        asked = telegram.wait_text(OWNER, "Approval needed: Pause job")
        telegram.press(OWNER, asked, asked["reply_markup"]["inline_keyboard"][0][0]["callback_data"])
        telegram.wait_text(OWNER, "Paused your friend's digest.")
        gateway.stop()
    assert all("belongs to another user" in r for r in results[:4]), results
    assert owners not in results[4] and friends in results[4]
    assert _count(telegram, FRIEND, "Approval needed") == 0
    after = _jobs(hermes_home)
    assert after[owners] == before[owners] and after["runs"] == 0
    assert after[friends][0] == 1
