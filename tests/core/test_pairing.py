"""Pairing codes: CSPRNG, no look-alikes, expiry, per-user limits, a flood cap that never refuses, lockout;
identities per platform, configured ones and those linked to an allowed person."""

from __future__ import annotations

import pytest

from core.config import Config
from core.store import SessionStore
from core.store.gateway import GatewayStore
from surface_support.pairing import (
    ALPHABET,
    CODE_LENGTH,
    CODE_TTL,
    MAX_FAILURES,
    Pairing,
    PairingError,
    configured_identities,
    new_code,
)


@pytest.fixture
async def pairing(hermes_home):
    store = await SessionStore.open()
    yield Pairing(GatewayStore(store), configured={"telegram:42", "discord:99"})
    await store.close()


def test_codes_have_no_look_alikes():
    codes = {new_code() for _ in range(200)}
    assert len(codes) == 200
    assert all(len(c) == CODE_LENGTH and set(c) <= set(ALPHABET) for c in codes)
    assert not set("0O1IL") & set(ALPHABET)


async def test_default_deny_and_identities_only(pairing):
    assert await pairing.allowed("telegram:42") and await pairing.allowed("discord:99")
    assert not await pairing.allowed("telegram:43") and not await pairing.allowed("discord:42"), "same number, other platform"
    assert not await pairing.allowed("42"), "a bare number is not an identity here"
    assert not await pairing.allowed(None) and not await pairing.allowed("")


async def test_request_then_approve_admits_the_user(pairing):
    issued = await pairing.request("discord:7", "discord:DM7:0", "Mallory", now=1000.0)
    again = await pairing.request("discord:7", "discord:DM7:0", "Mallory", now=1010.0)
    assert issued.code and again.code == issued.code  # asking again gives the same code
    approved = await pairing.approve(issued.code.lower(), now=1020.0)
    assert approved == "discord:7" and await pairing.allowed("discord:7")
    assert not await pairing.allowed("telegram:7"), "only the identity that asked"
    (user,) = await pairing._store.users()
    assert user[:2] == ("discord:7", "Mallory")
    with pytest.raises(PairingError, match="No pending"):
        await pairing.approve(issued.code, now=1030.0)  # one-time


async def test_codes_expire_and_are_rate_limited(pairing):
    issued = await pairing.request("telegram:7", "telegram:7:0", None, now=1000.0)
    with pytest.raises(PairingError, match="expire"):
        await pairing.approve(issued.code, now=1000.0 + CODE_TTL + 1)
    fresh = await pairing.request("telegram:7", "telegram:7:0", None, now=1000.0 + CODE_TTL + 1)
    assert fresh.code and fresh.code != issued.code
    await pairing._store.reject_code(fresh.code)
    limited = await pairing.request("telegram:7", "telegram:7:0", None, now=1000.0 + CODE_TTL + 2)
    assert limited.code is None and "try again" in limited.reason


async def test_limits_are_per_user_so_strangers_cannot_lock_out_a_newcomer(pairing):
    # Five strangers each hold a code; asking again (100 times) gives the same one, never another.
    codes = [await pairing.request(f"telegram:{100 + i}", f"telegram:{100 + i}:0", None, now=1000.0) for i in range(5)]
    assert all(c.code for c in codes) and len({c.code for c in codes}) == 5
    for _ in range(100):
        again = await pairing.request("telegram:100", "telegram:100:0", None, now=1001.0)
        assert again.code == codes[0].code
    assert len(await pairing.pending(now=1002.0)) == 5
    # A newcomer still gets a code, and the owner can approve it.
    newcomer = await pairing.request("telegram:900", "telegram:900:0", "New", now=1003.0)
    assert newcomer.code
    await pairing.approve(newcomer.code, now=1004.0)
    assert await pairing.allowed("telegram:900")


async def test_a_flood_past_the_global_cap_expires_the_oldest_and_never_refuses(hermes_home):
    async with SessionStore.open() as store:
        pairing = Pairing(GatewayStore(store), max_pending=3)
        flood = [await pairing.request(f"telegram:{200 + i}", f"telegram:{200 + i}:0", None, now=1000.0 + i) for i in range(6)]
        assert all(c.code for c in flood)
        waiting = await pairing.pending(now=1010.0)
        assert [c.user_id for c in waiting] == ["telegram:203", "telegram:204", "telegram:205"]  # the oldest made room
        newcomer = await pairing.request("telegram:999", "telegram:999:0", None, now=1011.0)
        assert newcomer.code and await pairing.approve(newcomer.code, now=1012.0) == "telegram:999"
        with pytest.raises(PairingError, match="No pending"):
            await pairing.approve(flood[0].code, now=1013.0)
        # The pushed-out stranger is not handed a new code at once (the per-user rate limit holds).
        assert (await pairing.request("telegram:200", "telegram:200:0", None, now=1014.0)).code is None


async def test_lockout_after_repeated_wrong_codes(pairing):
    issued = await pairing.request("telegram:7", "telegram:7:0", None, now=1000.0)
    for _ in range(MAX_FAILURES):
        with pytest.raises(PairingError, match="No pending"):
            await pairing.approve("WRONGCOD", now=1001.0)
    with pytest.raises(PairingError, match="locked"):
        await pairing.approve(issued.code, now=1002.0)  # even the right code, during the lockout
    assert not await pairing.allowed("telegram:7")


async def test_an_identity_linked_to_an_allowed_person_is_allowed_and_unlinking_ends_it(pairing):
    store = pairing._store
    assert not await pairing.allowed("email:ada@example.org")
    code, _ = await store.issue_link_code("telegram:42")  # a configured identity
    assert await store.redeem_link_code(code, "email:ada@example.org") == "telegram:42"
    assert await pairing.allowed("email:ada@example.org")
    # The link goes one way: an allowed identity linked into a stranger's person does not admit the stranger.
    stranger_code, _ = await store.issue_link_code("slack:U666")
    assert await store.redeem_link_code(stranger_code, "discord:99") == "slack:U666"
    assert await pairing.allowed("discord:99") and not await pairing.allowed("slack:U666")
    assert await store.unlink("email:ada@example.org")
    assert not await pairing.allowed("email:ada@example.org")


def test_configured_identities_come_from_every_platform_section_and_the_owner():
    config = Config.model_validate(
        {
            "telegram": {"allowed_users": [42]},
            "discord": {"allowed_users": [456], "owner": "7"},
            "matrix": {"allowed_users": ["@ada:example.org"]},
            "gateway": {"owner": 1},
        }
    )
    assert configured_identities(config) == {"telegram:42", "discord:456", "discord:7", "matrix:@ada:example.org", "telegram:1"}


async def test_configured_bare_numbers_are_telegram_ids(hermes_home):
    async with SessionStore.open() as store:
        pairing = Pairing(GatewayStore(store), [42, "43", "discord:44"])
        assert await pairing.allowed("telegram:42") and await pairing.allowed("telegram:43") and await pairing.allowed("discord:44")
        assert not await pairing.allowed("discord:42")
