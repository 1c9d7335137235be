"""Cron through the real gateway: runs, delivery and its retries, catch-up after a restart,
two gateways racing for one slot, the /cron command and the cron tool, remote approvals."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time

import pytest

from core.store import SessionStore
from core.store.jobs import JobStore
from core.store.schedule import parse_schedule
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.telegram_server import FakeTelegram
from tests.hermes_gateway.harness import OWNER, GatewayProcess, cli, gateway_env, settle, start, write_config


def add_job(project, *, created: float, schedule: str = "every 1h", prompt: str = "check the build") -> str:
    async def body() -> str:
        async with SessionStore.open() as store:
            job = await JobStore(store).add_job(
                name="build check",
                schedule=parse_schedule(schedule),
                timezone="UTC",
                prompt=prompt,
                project=str(project),
                chat_key=f"telegram:{OWNER}:0",
                now=created,
            )
            return job.id

    return asyncio.run(body())


def runs(job_id: str | None = None):
    async def body():
        async with SessionStore.open() as store:
            return await JobStore(store).runs(job_id, limit=100)

    return asyncio.run(body())


def next_run_at(hermes_home, job_id: str) -> float:
    with sqlite3.connect(hermes_home / "state.db") as conn:
        return conn.execute("SELECT next_run_at FROM cron_jobs WHERE id = ?", (job_id,)).fetchone()[0]


def later_pass_delivered(hermes_home, project, telegram) -> str:
    """Queue a run of a new job and wait for its delivery: a scheduler pass after everything before.

    A pass claims every due run and then sends every due delivery, so whatever was due before
    this call has been claimed or sent by the time this one arrives.
    """
    added = cli(hermes_home, "cron", "add", "every 1h", "later pass", "--project", str(project))
    assert added.returncode == 0, added.stdout + added.stderr
    job_id = added.stdout.split("Added job ")[1].split(":")[0]
    assert cli(hermes_home, "cron", "run", job_id).returncode == 0
    telegram.wait_for(lambda: runs(job_id) and runs(job_id)[0].delivery_status == "delivered", 30, "the later run's delivery")
    return job_id


def gateway_status(hermes_home) -> dict:
    files = list((hermes_home / "gateway").glob("*.json"))
    try:
        return json.loads(files[0].read_text()) if files else {}
    except ValueError:
        return {}  # caught mid-write


def test_cli_job_runs_and_is_delivered(hermes_home, project, telegram):
    with ScriptedOpenAIServer([{"text": "All green."}]) as model, start(hermes_home, project, telegram, model):
        added = cli(hermes_home, "cron", "add", "daily at 09:00", "check the build", "--project", str(project))
        assert added.returncode == 0, added.stdout + added.stderr
        job_id = added.stdout.split("Added job ")[1].split(":")[0]
        listed = cli(hermes_home, "cron", "list")
        assert job_id in listed.stdout and "3600s" in listed.stdout  # the catch-up window is stated
        assert cli(hermes_home, "cron", "run", job_id).returncode == 0
        delivered = telegram.wait_text(OWNER, "All green.")
        assert "build check" in delivered["text"] or "check the build" in delivered["text"]
        telegram.wait_for(lambda: runs(job_id) and runs(job_id)[0].delivery_status == "delivered", 10, "delivered status")
        (run,) = runs(job_id)
        assert run.status == "ok" and run.session_id
        # The run had the cron toolset only, and a fresh session in the job's project.
        tool_names = {t["function"]["name"] for t in model.requests[0].get("tools", [])}
        assert "read_file" in tool_names and "write_file" not in tool_names and "cron" not in tool_names
        shown = cli(hermes_home, "cron", "runs", job_id)
        assert "ok" in shown.stdout and "delivery delivered" in shown.stdout


def test_silent_reply_delivers_nothing(hermes_home, project, telegram):
    job_id = add_job(project, created=time.time() - 3601)
    with ScriptedOpenAIServer([{"text": "[SILENT]"}, {"text": "Later report."}]) as model, start(hermes_home, project, telegram, model):
        telegram.wait_for(lambda: runs(job_id) and runs(job_id)[0].status == "silent", 20, "a silent run")
        later_pass_delivered(hermes_home, project, telegram)
    assert [m["text"] for m in telegram.sent(OWNER) if "Later report." not in m["text"]] == []
    assert runs(job_id)[0].delivery_status == "none"


def test_delivery_failure_is_retried(hermes_home, project, telegram):
    telegram.fail_chats[OWNER] = 2
    job_id = add_job(project, created=time.time() - 3601)
    with ScriptedOpenAIServer([{"text": "Report after retries."}]) as model, start(hermes_home, project, telegram, model):
        telegram.wait_text(OWNER, "Report after retries.", timeout=30)
        telegram.wait_for(lambda: runs(job_id)[0].delivery_status == "delivered", 10, "delivered status")
    (run,) = runs(job_id)
    assert run.status == "ok" and run.delivery_attempts == 3 and len(model.requests) == 1  # retried delivery, not the run


def test_failed_run_is_delivered_as_a_failure(hermes_home, project, telegram):
    job_id = add_job(project, created=time.time() - 3601)
    with ScriptedOpenAIServer([{"error": 400, "message": "model exploded"}]) as model, start(hermes_home, project, telegram, model):
        message = telegram.wait_text(OWNER, "The run failed", timeout=30)
    assert "build check" in message["text"]
    assert runs(job_id)[0].status == "failed"


def test_restart_after_missed_runs_catches_up_once(hermes_home, project, telegram):
    # The gateway was down for the last ten hourly slots (the latest 10 minutes ago).
    job_id = add_job(project, created=time.time() - 10 * 3600 - 600)
    with ScriptedOpenAIServer([{"text": "Caught up."}] * 5) as model, start(hermes_home, project, telegram, model):
        message = telegram.wait_text(OWNER, "Caught up.", timeout=30)
        assert next_run_at(hermes_home, job_id) > time.time()  # no missed slot is left due
        later_pass_delivered(hermes_home, project, telegram)  # later passes: no storm follows
        assert len(model.requests) == 2
    assert "catch-up run after downtime" in message["text"]
    assert len(runs(job_id)) == 1


def test_two_gateways_race_for_one_slot(hermes_home, project):
    job_id = add_job(project, created=time.time() - 3601)
    with (
        FakeTelegram() as first_api,
        FakeTelegram("654321:OTHER-token-not-real-abcdefghijklmnopqr") as second_api,
        ScriptedOpenAIServer([{"text": "Ran once.", "delay": 0.5}] * 3) as model,
    ):
        write_config(hermes_home, project)
        first = GatewayProcess(gateway_env(hermes_home, first_api, model.base_url))
        second = GatewayProcess(gateway_env(hermes_home, second_api, model.base_url))
        with first, second:
            first.start(first_api)
            second.start(second_api)
            FakeTelegram.wait_for(first_api, lambda: runs(job_id) and runs(job_id)[0].delivery_status == "delivered", 30, "a delivery")
            # Claiming a run moves the slot on in the same transaction: no later pass of either
            # gateway finds it due, and a run the other had claimed would be a second row.
            assert next_run_at(hermes_home, job_id) > time.time()
        delivered = [m for api in (first_api, second_api) for m in api.sent(OWNER) if "Ran once." in m["text"]]
        assert len(delivered) == 1 and len(model.requests) == 1 and len(runs(job_id)) == 1


def test_cron_command_and_cron_tool_from_chat(hermes_home, project, telegram):
    script = [
        {
            "tool_calls": [
                {"id": "c1", "name": "cron", "arguments": {"action": "add", "schedule": "weekdays at 9am", "prompt": "standup notes"}}
            ]
        },
        {"text": "Scheduled."},
    ]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, extra="") as gateway:
        telegram.send_user_message(OWNER, "/cron add every 2h | water the plants")
        telegram.wait_text(OWNER, "Added job")
        telegram.send_user_message(OWNER, "remind me of standup notes on weekdays")
        asked = telegram.wait_text(OWNER, "Approval needed: Schedule 'standup notes'")
        telegram.press(OWNER, asked, asked["reply_markup"]["inline_keyboard"][0][0]["callback_data"])
        telegram.wait_text(OWNER, "Scheduled.")
        telegram.send_user_message(OWNER, "/cron list")
        listing = telegram.wait_text(OWNER, "Jobs (missed runs catch up once within 3600s)")
        assert "standup notes" in listing["text"]
        assert "water the plants" in listing["text"] and "every 2h" in listing["text"]
        gateway.stop()
    listed = cli(hermes_home, "cron", "list").stdout
    assert "cron '0 9 * * 1-5'" in listed and f"chat telegram:{OWNER}:0" in listed


@pytest.mark.parametrize("answer", ["o", "d", "a"])
def test_remote_approval_of_an_editor_question(hermes_home, project, telegram, answer):
    offer_always = answer == "a"  # a question that asks every time gets no "Always allow"

    async def editor_question() -> str:
        async with SessionStore.open() as store:
            session = await store.create_session(cwd=str(project), surface="acp", title="Refactor")
            row = await store.create_approval(
                session_id=session.id,
                tool_call_id="t1",
                tool_name="run_command",
                title="Run `make deploy`",
                detail={"reason": "commands need your approval", "command": "make deploy", "paths": [], "offer_always": offer_always},
            )
            return row.id

    approval_id = asyncio.run(editor_question())
    with ScriptedOpenAIServer([]) as model, start(hermes_home, project, telegram, model):
        status = telegram.wait_for(
            lambda: gateway_status(hermes_home).get("state") == "running" and gateway_status(hermes_home), 20, "the status file"
        )
        assert status["remote_approvals"] is False  # off by default: the asking loop is not started
        settle(telegram)
    assert [m["text"] for m in telegram.sent(OWNER) if "User id" not in m["text"]] == []
    write_config(hermes_home, project)
    config = (hermes_home / "config.toml").read_text().replace("shutdown_grace = 5", "shutdown_grace = 5\nremote_approvals_after = 0.5")
    with ScriptedOpenAIServer([]) as model:
        (hermes_home / "config.toml").write_text(config)
        gateway = GatewayProcess(gateway_env(hermes_home, telegram, model.base_url)).start(telegram)
        with gateway:
            asked = telegram.wait_text(OWNER, "acp session asks: Run <code>make deploy</code>")
            choices = [b["callback_data"] for row in asked["reply_markup"]["inline_keyboard"] for b in row]
            assert any(c.endswith("|a") for c in choices) is offer_always
            data = next(c for c in choices if c.endswith(f"|{answer}"))
            stranger_press = telegram.press(999, asked, data)
            assert "not authorised" in telegram.answer_for(stranger_press)["text"]
            telegram.answer_for(telegram.press(OWNER, asked, data))
            outcome = {"o": "— allowed from Telegram", "d": "— denied from Telegram", "a": "— always allowed from Telegram"}[answer]
            telegram.wait_text(OWNER, outcome)
            late = telegram.press(OWNER, asked, data)
            assert "Already answered" in telegram.answer_for(late)["text"]

    async def status() -> tuple[str, str | None, bool]:
        async with SessionStore.open() as store:
            row = await store.get_approval(approval_id)
            return row.status, row.decided_by, row.always

    assert asyncio.run(status()) == ("denied" if answer == "d" else "allowed", f"telegram:{OWNER}", answer == "a")
