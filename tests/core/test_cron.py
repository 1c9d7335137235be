"""Schedules, fire times, catch-up policy, and job/run claims with leases in the real store."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from core.store import SessionStore
from core.store.jobs import MAX_RUN_ATTEMPTS, JobStore
from core.store.schedule import Schedule, ScheduleError, due_slots, next_fire, parse_schedule

NOW = datetime(2026, 3, 27, 12, 0, tzinfo=ZoneInfo("Europe/Paris")).timestamp()  # a Friday, before the DST switch


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("every 2h", Schedule("every", "7200")),
        ("every 30m", Schedule("every", "1800")),
        ("daily at 09:00", Schedule("cron", "0 9 * * *")),
        ("weekdays at 9am", Schedule("cron", "0 9 * * 1-5")),
        ("weekends at 12:30pm", Schedule("cron", "30 12 * * 0,6")),
        ("mon at 8:30", Schedule("cron", "30 8 * * 1")),
        ("*/15 9-17 * * 1-5", Schedule("cron", "*/15 9-17 * * 1-5")),
        ("2026-05-01T09:00+02:00", Schedule("at", "2026-05-01T09:00:00+02:00")),
    ],
)
def test_parse_schedule_forms(text, expected):
    assert parse_schedule(text, now=NOW, tz="Europe/Paris") == expected


def test_in_30m_is_a_one_shot_in_the_zone():
    schedule = parse_schedule("in 30m", now=NOW, tz="Europe/Paris")
    assert schedule.kind == "at" and datetime.fromisoformat(schedule.value).timestamp() == NOW + 1800
    assert next_fire(schedule, NOW, anchor=NOW, tz="Europe/Paris") == NOW + 1800
    assert next_fire(schedule, NOW + 1800, anchor=NOW, tz="Europe/Paris") is None


@pytest.mark.parametrize("text", ["", "every", "every 0m", "daily at 25:00", "sometimes", "61 * * * *", "in 3 fortnights"])
def test_bad_schedules_say_what_works(text):
    with pytest.raises(ScheduleError, match="Schedules:|time|duration|empty"):
        parse_schedule(text, now=NOW)


def test_daily_stays_at_local_time_across_daylight_saving():
    schedule = parse_schedule("daily at 09:00")
    fires = []
    cursor = NOW
    for _ in range(4):  # Sat, Sun (DST starts at 02:00 that day), Mon, Tue
        cursor = next_fire(schedule, cursor, anchor=NOW, tz="Europe/Paris")
        fires.append(datetime.fromtimestamp(cursor, ZoneInfo("Europe/Paris")))
    assert [f.hour for f in fires] == [9, 9, 9, 9]
    assert fires[0].utcoffset() != fires[1].utcoffset()  # 09:00 both sides of the switch


def test_catch_up_runs_only_the_latest_slot_within_grace():
    every_hour = Schedule("every", "3600")
    slots = due_slots(every_hour, 3600, 5 * 3600 + 10, anchor=0, tz=None, grace=600)
    assert (slots.run_at, slots.missed, slots.next_at) == (5 * 3600, 4, 6 * 3600)
    too_old = due_slots(every_hour, 3600, 5 * 3600 + 900, anchor=0, tz=None, grace=600)
    assert too_old.run_at is None and too_old.missed == 5 and too_old.next_at == 6 * 3600


async def _job(jobs: JobStore, *, created: float, schedule: str = "every 1h"):
    return await jobs.add_job(
        name="report", schedule=parse_schedule(schedule), timezone="UTC", prompt="p", project="/tmp", chat_key="telegram:1:0", now=created
    )


async def test_two_stores_racing_for_one_slot_claim_it_once(hermes_home):
    first = await SessionStore.open()
    second = await SessionStore.open()
    try:
        job = await _job(JobStore(first), created=1000.0)
        due = job.next_run_at + 5
        for _ in range(5):  # repeat: the interleaving differs between attempts
            results = await asyncio.gather(
                JobStore(first).claim_due("a", now=due, grace=600, lease=10**6),
                JobStore(second).claim_due("b", now=due, grace=600, lease=10**6),
            )
            due += 3600
            claimed = [run for batch in results for run in batch]
            assert len(claimed) == 1, claimed
        runs = await JobStore(first).runs(job.id, limit=50)
        assert len(runs) == 5 and len({r.scheduled_at for r in runs}) == 5
    finally:
        await first.close()
        await second.close()


async def test_restart_after_downtime_runs_one_catch_up_then_reports_older_misses(hermes_home):
    async with SessionStore.open() as store:
        jobs = JobStore(store)
        job = await _job(jobs, created=0.0)
        # Down for ten hours: one run of the latest slot, never ten.
        claimed = await jobs.claim_due("g", now=10 * 3600 + 30, grace=600, lease=10**6)
        assert [r.scheduled_at for r in claimed] == [10 * 3600] and claimed[0].catch_up == 0
        assert (await jobs.get_job(job.id)).next_run_at == 11 * 3600
        # Down past the grace window: nothing runs, a "missed" run is queued for delivery.
        assert await jobs.claim_due("g", now=15 * 3600 + 3000, grace=600, lease=10**6) == []
        missed = [r for r in await jobs.runs(job.id) if r.status == "missed"]
        assert len(missed) == 1 and missed[0].delivery_status == "pending" and "5 scheduled run(s) missed" in missed[0].error


async def test_lapsed_lease_is_taken_over_once_then_failed(hermes_home):
    async with SessionStore.open() as store:
        jobs = JobStore(store)
        await _job(jobs, created=0.0)
        (run,) = await jobs.claim_due("dead-gateway", now=3600, grace=600, lease=60)
        assert await jobs.claim_due("other", now=3600 + 30, grace=600, lease=60) == []  # lease still held
        (taken,) = await jobs.claim_due("other", now=3600 + 61, grace=600, lease=60)
        assert taken.id == run.id and taken.lease_owner == "other" and taken.attempts == MAX_RUN_ATTEMPTS
        # The first owner lost it: its late result is not recorded.
        assert not await jobs.finish_run(run.id, "dead-gateway", status="ok", result="late")
        assert await jobs.claim_due("third", now=3600 + 200, grace=600, lease=60) == []
        failed = await jobs.get_run(run.id)
        assert failed.status == "failed" and failed.delivery_status == "pending" and "stopped" in failed.error


async def test_delivery_retries_with_backoff_then_gives_up(hermes_home):
    async with SessionStore.open() as store:
        jobs = JobStore(store)
        await _job(jobs, created=0.0)
        (run,) = await jobs.claim_due("g", now=3600, grace=600, lease=60)
        assert await jobs.finish_run(run.id, "g", status="ok", result="hello", now=3601)
        (due,) = await jobs.claim_deliveries(now=3602)
        assert await jobs.claim_deliveries(now=3603) == []  # held while being delivered
        assert await jobs.delivery_failed(due.id, "chat not found", max_attempts=3, delay=10, now=3604) == "pending"
        assert await jobs.claim_deliveries(now=3610) == []
        assert [r.id for r in await jobs.claim_deliveries(now=3615)] == [run.id]
        assert await jobs.delivery_failed(run.id, "again", max_attempts=3, delay=10, now=3616) == "pending"
        assert (await jobs.get_run(run.id)).delivery_next_at == 3616 + 40
        assert await jobs.delivery_failed(run.id, "again", max_attempts=3, delay=10, now=3700) == "failed"
        final = await jobs.get_run(run.id)
        assert final.status == "ok" and final.delivery_status == "failed" and final.delivery_attempts == 3


async def test_silent_runs_deliver_nothing_and_paused_jobs_do_not_fire(hermes_home):
    async with SessionStore.open() as store:
        jobs = JobStore(store)
        job = await _job(jobs, created=0.0)
        (run,) = await jobs.claim_due("g", now=3600, grace=600, lease=60)
        await jobs.finish_run(run.id, "g", status="silent", result="[SILENT]", deliver=False)
        assert await jobs.claim_deliveries(now=time.time()) == []
        await jobs.set_paused(job.id, True, now=3700)
        assert await jobs.claim_due("g", now=9 * 3600, grace=600, lease=60) == []
        await jobs.set_paused(job.id, False, now=9 * 3600 + 10)
        assert (await jobs.get_job(job.id)).next_run_at == 10 * 3600  # resumes forward: no catch-up for a pause
        queued = await jobs.request_run(job.id, now=9 * 3600 + 20)
        (manual,) = await jobs.claim_due("g", now=9 * 3600 + 21, grace=600, lease=60)
        assert manual.id == queued.id and manual.status == "running"
