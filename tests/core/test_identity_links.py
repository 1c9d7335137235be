"""Identity links in the store: one person, several platforms' identities, joined with a one-time code;
what a person owns follows them. And the forms a typed or configured user or chat takes."""

from __future__ import annotations

import pytest

from core.config import Config
from core.store import SessionStore
from core.store.gateway import (
    LINK_ALPHABET,
    MAX_LINK_FAILURES,
    ChatBinding,
    GatewayStore,
    identity_of,
    place_key_of,
)
from core.store.jobs import JobStore, chat_key_of_target, chat_target
from core.store.schedule import parse_schedule

ADA_TG, ADA_DC, ADA_MAIL = "telegram:1001", "discord:2002", "email:ada@example.org"


@pytest.fixture
async def store(hermes_home):
    async with SessionStore.open() as store:
        yield store


async def test_a_code_links_another_identity_to_the_issuers_person_once(store):
    gateway = GatewayStore(store)
    assert await gateway.person_of(ADA_DC) == ADA_DC and await gateway.identities_of(ADA_DC) == [ADA_DC]
    code, expires_at = await gateway.issue_link_code(ADA_TG, now=1000.0)
    assert len(code) == 8 and set(code) <= set(LINK_ALPHABET) and expires_at == 1600.0
    assert await gateway.redeem_link_code(code, ADA_TG, now=1001.0) is None, "the issuer cannot link itself"
    assert await gateway.redeem_link_code(f"{code[:4].lower()}-{code[4:]}", ADA_DC, now=1002.0) == ADA_TG  # as typed
    assert await gateway.person_of(ADA_DC) == ADA_TG and await gateway.person_of(ADA_TG) == ADA_TG
    assert await gateway.redeem_link_code(code, ADA_MAIL, now=1003.0) is None, "a code works once"
    # A code from a linked identity links to the same person (never a chain).
    again, _ = await gateway.issue_link_code(ADA_DC, now=1004.0)
    assert await gateway.redeem_link_code(again, ADA_MAIL, now=1005.0) == ADA_TG
    assert await gateway.identities_of(ADA_MAIL) == [ADA_TG, ADA_DC, ADA_MAIL]
    assert [(i, p) for i, p, _ in await gateway.links()] == [(ADA_DC, ADA_TG), (ADA_MAIL, ADA_TG)]
    assert await gateway.unlink(ADA_DC) and not await gateway.unlink(ADA_DC)
    assert not await gateway.unlink(ADA_TG), "a person is not linked to anyone"
    assert await gateway.person_of(ADA_DC) == ADA_DC and await gateway.identities_of(ADA_TG) == [ADA_TG, ADA_MAIL]


async def test_codes_expire_and_a_new_one_replaces_the_old(store):
    gateway = GatewayStore(store)
    first, _ = await gateway.issue_link_code(ADA_TG, ttl=60, now=1000.0)
    assert await gateway.redeem_link_code(first, ADA_DC, now=1061.0) is None, "expired"
    second, _ = await gateway.issue_link_code(ADA_TG, now=1100.0)
    third, _ = await gateway.issue_link_code(ADA_TG, now=1101.0)
    assert len({first, second, third}) == 3
    assert await gateway.redeem_link_code(second, ADA_DC, now=1102.0) is None, "one live code per identity: the newest"
    assert await gateway.redeem_link_code(third, ADA_DC, now=1103.0) == ADA_TG


async def test_guessing_codes_is_stopped_after_a_few_wrong_ones(store):
    gateway = GatewayStore(store)
    code, _ = await gateway.issue_link_code(ADA_TG, now=1000.0)
    for n in range(MAX_LINK_FAILURES):
        assert await gateway.redeem_link_code(f"WRONG{n:03d}", "discord:666", now=1001.0 + n) is None
    assert await gateway.redeem_link_code(code, "discord:666", now=1010.0) is None, "even the right code, for a while"
    assert await gateway.person_of("discord:666") == "discord:666"
    assert await gateway.redeem_link_code(code, ADA_DC, now=1011.0) == ADA_TG, "other identities are not locked out"


async def test_a_linked_persons_sessions_jobs_and_turns_follow_them(store, tmp_path):
    gateway, jobs = GatewayStore(store), JobStore(store)
    # Ada used Discord alone first: a session, a job and a turn under discord:2002.
    session = await store.create_session(cwd=tmp_path, surface="gateway", session_id="s-discord")
    await gateway.record_starter(session.id, ADA_DC, chat_key="discord:77:0", origin="chat")
    await gateway.bind(ChatBinding("discord:77:0", "app", session.id, None))
    await gateway.set_turn_user("discord:77:0", ADA_DC)
    job = await jobs.add_job(
        name="j", schedule=parse_schedule("every 1h"), timezone="UTC", prompt="p", project="/p", chat_key="discord:77:0", owner_id=ADA_DC
    )
    other = await jobs.add_job(name="o", schedule=parse_schedule("every 1h"), timezone="UTC", prompt="p", project="/p", owner_id="slack:U9")
    code, _ = await gateway.issue_link_code(ADA_TG)
    assert await gateway.redeem_link_code(code, ADA_DC) == ADA_TG
    assert [s.id for s in await gateway.sessions_started_by(ADA_TG)] == ["s-discord"]
    assert await gateway.sessions_started_by(ADA_DC) == []
    assert await gateway.session_chats(session.id) == [("discord:77:0", ADA_TG)]
    moved = await jobs.get_job(job.id)
    assert moved is not None and moved.owner_id == ADA_TG and moved.chat_key == "discord:77:0"
    assert (await jobs.get_job(other.id)).owner_id == "slack:U9"  # type: ignore[union-attr]
    assert [j.id for j in await jobs.list_jobs(chat_key="discord:77:0")] == [job.id]


async def test_readable_sessions_are_limited_by_every_person_but_the_owner(store, tmp_path):
    gateway = GatewayStore(store)
    for sid, who in (("s-ada", ADA_TG), ("s-ada2", ADA_TG), ("s-bob", "slack:U9"), ("s-owner", "discord:1")):
        await store.create_session(cwd=tmp_path, surface="gateway", session_id=sid)
        await gateway.record_starter(sid, who, chat_key=None, origin="chat")
    owners = frozenset({"discord:1", "telegram:1"})
    assert await gateway.readable_sessions("s-ada", owners) == {"s-ada", "s-ada2"}
    assert await gateway.readable_sessions("s-owner", owners) is None, "the owner reads everything"
    assert await gateway.readable_sessions("s-owner", frozenset()) == {"s-owner"}, "without owners it is a person like any"
    await gateway.bind(ChatBinding("slack:C1:0", "app", "s-ada", None))
    await gateway.set_turn_user("slack:C1:0", "slack:U9")
    assert await gateway.readable_sessions("s-ada", owners) == {"s-ada"}, "Bob's turn there: only what both started"


async def test_revoking_an_identity_drops_its_pairing_and_its_link(store):
    gateway = GatewayStore(store)
    code, _ = await gateway.issue_link_code(ADA_TG)
    await gateway.redeem_link_code(code, ADA_DC)
    assert await gateway.revoke_user(ADA_DC) and await gateway.person_of(ADA_DC) == ADA_DC
    assert not await gateway.revoke_user(ADA_DC)


def test_typed_users_and_chats_take_platform_forms_and_bare_numbers_are_telegram():
    assert identity_of(123) == identity_of(" 123 ") == "telegram:123"
    assert identity_of("discord:456") == "discord:456" and identity_of(ADA_MAIL) == ADA_MAIL
    assert identity_of("matrix:@ada:example.org") == "matrix:@ada:example.org"
    for bad in ("@ada:example.org", "ada", "discord:", ""):
        with pytest.raises(ValueError, match="platform:id"):
            identity_of(bad)
    assert place_key_of(-100200) == place_key_of("-100200") == "telegram:-100200:0"
    assert place_key_of("discord:123:0") == "discord:123:0" and place_key_of("matrix:!room:example.org:0") == "matrix:!room:example.org:0"
    for bad in ("discord:123", "chat", "Discord:1:0"):
        with pytest.raises(ValueError, match="platform:chat:thread"):
            place_key_of(bad)
    assert chat_target("discord:9:0") == "chat:discord:9:0" and chat_key_of_target("chat:discord:9:0") == "discord:9:0"
    assert chat_key_of_target("chat:-100200") == "telegram:-100200:0", "the older form: a Telegram chat"
    assert chat_key_of_target("file:/tmp/x") is None


def test_the_owners_identities_come_from_the_gateway_and_each_platform():
    config = Config.model_validate(
        {"gateway": {"owner": 42}, "discord": {"owner": 456}, "email": {"owner": "ada@example.org"}, "slack": {"allowed_users": ["U1"]}}
    )
    assert config.owner_identities() == {"telegram:42", "discord:456", "email:ada@example.org"}
    assert Config.model_validate({"gateway": {"owner": "matrix:@ada:example.org"}}).owner_identities() == {"matrix:@ada:example.org"}
    assert Config.model_validate({"gateway": {"owner": "77"}}).owner_identities() == {"telegram:77"}
    assert Config().owner_identities() == frozenset()
    with pytest.raises(ValueError, match="a number"):
        Config.model_validate({"gateway": {"owner": "@ada:example.org"}})


async def test_an_identity_linked_elsewhere_moves_alone_and_what_its_person_owns_stays(store, tmp_path):
    gateway = GatewayStore(store)
    code, _ = await gateway.issue_link_code(ADA_TG)
    await gateway.redeem_link_code(code, ADA_MAIL)  # Ada's mailbox joins Ada
    await store.create_session(cwd=tmp_path, surface="gateway", session_id="s-ada")
    await gateway.record_starter("s-ada", ADA_TG, chat_key=None, origin="chat")
    # The mailbox then takes Bob's code (by mistake, or it is Bob's): it alone goes to Bob.
    bobs, _ = await gateway.issue_link_code("slack:U9")
    assert await gateway.link_code_person(bobs.lower()) == "slack:U9", "a check that uses nothing"
    assert await gateway.redeem_link_code(bobs, ADA_MAIL) == "slack:U9"
    assert await gateway.link_code_person(bobs) is None, "used"
    assert await gateway.identities_of("slack:U9") == ["slack:U9", ADA_MAIL]
    assert await gateway.identities_of(ADA_TG) == [ADA_TG]
    assert [s.id for s in await gateway.sessions_started_by(ADA_TG)] == ["s-ada"]
    assert await gateway.sessions_started_by("slack:U9") == []
