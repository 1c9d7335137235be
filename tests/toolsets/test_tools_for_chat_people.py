"""The cron and session_search tools in a session a chat is bound to: they act for the person whose
turn runs there (an identity on any platform, or the person it is linked to), and the owner is
known by any of the owner's identities. Real tools, real store; the chat binding is what the
gateway writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.events import Decision
from core.messages import UserMessage
from core.store import SessionStore
from core.store.gateway import ChatBinding, GatewayStore
from core.store.jobs import JobStore
from core.store.schedule import parse_schedule
from core.tools.context import ToolSettings
from tests.toolsets.helpers import Session

OWNERS = frozenset({"telegram:1", "discord:1"})
PLACE = "discord:77:0"
ADA, BOB = "telegram:1001", "slack:U9"


async def _in_chat(store: SessionStore, tmp_path: Path, person: str, *, owners: frozenset[str] = OWNERS) -> Session:
    """The tool session ("session-1") bound to PLACE, where ``person``'s turn runs."""
    if await store.get_session("session-1") is None:
        await store.create_session(cwd=tmp_path, surface="gateway", session_id="session-1")
    gateway = GatewayStore(store)
    await gateway.bind(ChatBinding(PLACE, "app", "session-1", None))
    await gateway.set_turn_user(PLACE, person)
    return Session(tmp_path, mode="auto", store=store, settings=ToolSettings(owners=owners))


@pytest.fixture
async def store(hermes_home):
    async with SessionStore.open() as store:
        yield store


async def _job(store: SessionStore, owner: str | None, name: str) -> str:
    job = await JobStore(store).add_job(
        name=name, schedule=parse_schedule("every 1h"), timezone="UTC", prompt="p", project="/p", owner_id=owner
    )
    return job.id


async def test_a_job_made_in_a_chat_belongs_to_the_person_and_reports_to_that_place(store, tmp_path):
    session = await _in_chat(store, tmp_path, ADA)
    added = await session.run("cron", {"action": "add", "schedule": "every 2h", "prompt": "check the build"}, answer=Decision.ALLOW_ONCE)
    assert not added.failed and "this chat" in added.result.content, added.result.content
    (job,) = await JobStore(store).list_jobs(chat_key=PLACE)
    assert job.owner_id == ADA and job.chat_key == PLACE and job.project == str(tmp_path.resolve())


async def test_a_person_sees_and_controls_only_their_jobs_and_the_owner_all(store, tmp_path):
    theirs, others, machine = await _job(store, ADA, "ada's"), await _job(store, BOB, "bob's"), await _job(store, None, "machine")
    ada = await _in_chat(store, tmp_path, ADA)
    listed = await ada.run("cron", {"action": "list"})
    assert theirs in listed.result.content and others not in listed.result.content and machine not in listed.result.content
    refused = await ada.run("cron", {"action": "pause", "job_id": others})
    assert refused.failed and "belongs to another user" in refused.result.content
    assert not (await JobStore(store).get_job(others)).paused  # type: ignore[union-attr]
    paused = await ada.run("cron", {"action": "pause", "job_id": theirs}, answer=Decision.ALLOW_ONCE)
    assert not paused.failed and (await JobStore(store).get_job(theirs)).paused  # type: ignore[union-attr]

    owner = await _in_chat(store, tmp_path, "discord:1")  # the owner, by their Discord identity
    everything = await owner.run("cron", {"action": "list"})
    assert all(j in everything.result.content for j in (theirs, others, machine))
    same_number = await _in_chat(store, tmp_path, "slack:1")  # "1" on another platform is somebody else
    assert machine not in (await same_number.run("cron", {"action": "list"})).result.content


async def test_only_the_owner_may_send_results_outside_the_project(store, tmp_path):
    outside = tmp_path.parent / "elsewhere.md"
    ada = await _in_chat(store, tmp_path, ADA)
    call = {"action": "add", "schedule": "every 1h", "prompt": "p", "deliver": [f"file:{outside}"]}
    refused = await ada.run("cron", call)
    assert refused.failed and "Only the bot's owner" in refused.result.content
    owner = await _in_chat(store, tmp_path, "telegram:1")
    asked = await owner.run("cron", call, answer=Decision.ALLOW_ONCE)
    assert not asked.failed and str(outside) in owner.answered.title
    assert [j.owner_id for j in await JobStore(store).list_jobs()] == ["telegram:1"]


async def _notes(store: SessionStore, tmp_path: Path) -> GatewayStore:
    gateway = GatewayStore(store)
    for sid, who in (("s-ada", ADA), ("s-bob", BOB)):
        await store.create_session(cwd=tmp_path, surface="gateway", session_id=sid)
        await store.append_message(sid, UserMessage.of(f"the zebrafish notes of {sid}"))
        await gateway.record_starter(sid, who, chat_key=None, origin="chat")
    return gateway


async def test_session_search_reads_only_what_the_chat_person_started(store, tmp_path):
    gateway = await _notes(store, tmp_path)
    ada = await _in_chat(store, tmp_path, ADA)
    await gateway.record_starter("session-1", ADA, chat_key=PLACE, origin="chat")
    found = await ada.run("session_search", {"query": "zebrafish", "scope": "all"})
    assert "s-ada" in found.result.content and "s-bob" not in found.result.content
    refused = await ada.run("session_search", {"session_id": "s-bob", "seq": 1})
    assert refused.failed and "belongs to another chat user" in refused.result.content


async def test_session_search_in_the_owners_chat_reads_everything_by_any_owner_identity(store, tmp_path):
    gateway = await _notes(store, tmp_path)
    owner = await _in_chat(store, tmp_path, "discord:1")
    await gateway.record_starter("session-1", "discord:1", chat_key=PLACE, origin="chat")
    found = await owner.run("session_search", {"query": "zebrafish", "scope": "all"})
    assert "s-ada" in found.result.content and "s-bob" in found.result.content
    # Without the owner's identities configured, the same person is limited like anyone.
    plain = await _in_chat(store, tmp_path, "discord:1", owners=frozenset())
    assert "s-bob" not in (await plain.run("session_search", {"query": "zebrafish", "scope": "all"})).result.content


def test_tool_settings_take_the_owners_identities_from_the_configuration():
    from core.config import Config

    config = Config.model_validate({"gateway": {"owner": 5}, "discord": {"owner": "6"}})
    assert ToolSettings.of(config).owners == {"telegram:5", "discord:6"}
