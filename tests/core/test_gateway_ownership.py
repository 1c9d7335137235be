"""Cron job ownership in the store: who controls a job, and jobs from before owners existed."""

from __future__ import annotations

import time

from core.store import SessionStore, db
from core.store.jobs import JobStore
from core.store.migrations import MIGRATIONS, m005_cron_job_owner
from core.store.schedule import parse_schedule

OWNER, FRIEND, OTHER = "telegram:4242", "discord:5151", "telegram:6161"
OWNERS = frozenset({OWNER, "discord:4242"})


async def test_a_job_is_controlled_by_its_maker_the_owner_and_the_machine(hermes_home):
    async with SessionStore.open() as store:
        jobs = JobStore(store)
        theirs = await jobs.add_job(
            name="f", schedule=parse_schedule("every 1h"), timezone="UTC", prompt="p", project="/p", owner_id=FRIEND
        )
        machine = await jobs.add_job(name="m", schedule=parse_schedule("every 1h"), timezone="UTC", prompt="p", project="/p")
    assert theirs.owner_id == FRIEND and machine.owner_id is None
    assert theirs.controlled_by(FRIEND, OWNERS) and theirs.controlled_by(OWNER, OWNERS) and theirs.controlled_by(None, OWNERS)
    assert theirs.controlled_by("discord:4242", OWNERS), "any of the owner's identities"
    assert not theirs.controlled_by(OTHER, OWNERS) and not theirs.controlled_by("telegram:5151", OWNERS), "same number, other platform"
    assert machine.controlled_by(OWNER, OWNERS) and machine.controlled_by(None, frozenset())
    assert not machine.controlled_by(FRIEND, OWNERS) and not machine.controlled_by(FRIEND, frozenset())


async def test_jobs_from_before_the_owner_column_become_the_owners(hermes_home, tmp_path):
    path = tmp_path / "old.db"
    conn = await db.connect(path)
    try:
        await conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        for fn in MIGRATIONS[: MIGRATIONS.index(m005_cron_job_owner)]:
            await fn(conn)
            await conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (fn.__name__, time.time()))
        await conn.execute(
            "INSERT INTO cron_jobs (id, name, schedule, timezone, prompt, project, chat_id, created_at, next_run_at)"
            " VALUES ('old1', 'made in chat by a friend', 'every 3600', 'UTC', 'p', '/p', ?, 1.0, 3601.0)",
            (5151,),
        )
    finally:
        await conn.close()
    async with SessionStore.open(path) as store:
        job = await JobStore(store).get_job("old1")
    assert job is not None and job.owner_id is None
    assert job.controlled_by(OWNER, OWNERS) and not job.controlled_by("telegram:5151", OWNERS)
