"""Pairing codes: CSPRNG, no look-alikes, expiry, per-user limits, a flood cap that never refuses, lockout."""

from __future__ import annotations

import pytest

from core.store import SessionStore
from core.store.gateway import GatewayStore
from surface_support.pairing import ALPHABET, CODE_LENGTH, CODE_TTL, MAX_FAILURES, Pairing, PairingError, new_code


@pytest.fixture
async def pairing(hermes_home):
    store = await SessionStore.open()
    yield Pairing(GatewayStore(store), configured=[42])
    await store.close()


def test_codes_have_no_look_alikes():
    codes = {new_code() for _ in range(200)}
    assert len(codes) == 200
    assert all(len(c) == CODE_LENGTH and set(c) <= set(ALPHABET) for c in codes)
    assert not set("0O1IL") & set(ALPHABET)


async def test_default_deny_and_numeric_ids_only(pairing):
    assert await pairing.allowed(42)
    assert not await pairing.allowed(43)
    assert not await pairing.allowed(None)


async def test_request_then_approve_admits_the_user(pairing):
    issued = await pairing.request(7, 7, "Mallory", now=1000.0)
    again = await pairing.request(7, 7, "Mallory", now=1010.0)
    assert issued.code and again.code == issued.code  # asking again gives the same code
    approved = await pairing.approve(issued.code.lower(), now=1020.0)
    assert approved.user_id == 7 and await pairing.allowed(7)
    with pytest.raises(PairingError, match="No pending"):
        await pairing.approve(issued.code, now=1030.0)  # one-time


async def test_codes_expire_and_are_rate_limited(pairing):
    issued = await pairing.request(7, 7, None, now=1000.0)
    with pytest.raises(PairingError, match="expire"):
        await pairing.approve(issued.code, now=1000.0 + CODE_TTL + 1)
    fresh = await pairing.request(7, 7, None, now=1000.0 + CODE_TTL + 1)
    assert fresh.code and fresh.code != issued.code
    await pairing._store.reject_code(fresh.code)
    limited = await pairing.request(7, 7, None, now=1000.0 + CODE_TTL + 2)
    assert limited.code is None and "try again" in limited.reason


async def test_limits_are_per_user_so_strangers_cannot_lock_out_a_newcomer(pairing):
    # Five strangers each hold a code; asking again (100 times) gives the same one, never another.
    codes = [await pairing.request(100 + i, 100 + i, None, now=1000.0) for i in range(5)]
    assert all(c.code for c in codes) and len({c.code for c in codes}) == 5
    for _ in range(100):
        again = await pairing.request(100, 100, None, now=1001.0)
        assert again.code == codes[0].code
    assert len(await pairing.pending(now=1002.0)) == 5
    # A newcomer still gets a code, and the owner can approve it.
    newcomer = await pairing.request(900, 900, "New", now=1003.0)
    assert newcomer.code
    await pairing.approve(newcomer.code, now=1004.0)
    assert await pairing.allowed(900)


async def test_a_flood_past_the_global_cap_expires_the_oldest_and_never_refuses(hermes_home):
    async with SessionStore.open() as store:
        pairing = Pairing(GatewayStore(store), max_pending=3)
        flood = [await pairing.request(200 + i, 200 + i, None, now=1000.0 + i) for i in range(6)]
        assert all(c.code for c in flood)
        waiting = await pairing.pending(now=1010.0)
        assert [c.user_id for c in waiting] == [203, 204, 205]  # the oldest made room
        newcomer = await pairing.request(999, 999, None, now=1011.0)
        assert newcomer.code and (await pairing.approve(newcomer.code, now=1012.0)).user_id == 999
        with pytest.raises(PairingError, match="No pending"):
            await pairing.approve(flood[0].code, now=1013.0)
        # The pushed-out stranger is not handed a new code at once (the per-user rate limit holds).
        assert (await pairing.request(200, 200, None, now=1014.0)).code is None


async def test_lockout_after_repeated_wrong_codes(pairing):
    issued = await pairing.request(7, 7, None, now=1000.0)
    for _ in range(MAX_FAILURES):
        with pytest.raises(PairingError, match="No pending"):
            await pairing.approve("WRONGCOD", now=1001.0)
    with pytest.raises(PairingError, match="locked"):
        await pairing.approve(issued.code, now=1002.0)  # even the right code, during the lockout
    assert not await pairing.allowed(7)
