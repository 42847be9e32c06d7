"""Lease operations: SET NX PX acquisition with fencing tokens, CAS renewal and release, bulk."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio

from sentinel_hooks.cluster import Leases
from sentinel_hooks.errors import StoreUnavailable
from tests.cluster.conftest import LEASE_MS, PREFIX, watcher_ids

pytestmark = pytest.mark.redis

MakeLeases = Callable[..., Leases]


@pytest.fixture
async def make_leases(redis_url: str) -> AsyncIterator[MakeLeases]:
    """``make_leases(replica_id, lease_ms=…)`` → Leases for that replica (closed after the test)."""
    made: list[Leases] = []

    def make(replica_id: str, *, lease_ms: int = LEASE_MS) -> Leases:
        leases = Leases(redis_url, key_prefix=PREFIX, replica_id=replica_id, lease_ms=lease_ms)
        made.append(leases)
        return leases

    yield make
    for leases in made:
        await leases.close()


@pytest.fixture
async def a(make_leases: MakeLeases) -> Leases:
    leases = make_leases("replica-a")
    await leases.open()
    return leases


@pytest.fixture
async def b(make_leases: MakeLeases) -> Leases:
    leases = make_leases("replica-b")
    await leases.open()
    return leases


async def test_acquire_stores_holder_and_token_with_expiry(a: Leases, raw: redis.asyncio.Redis) -> None:
    """A free lease is taken: ``<replica>:<token>`` under ``<prefix>lease:<id>``, expiring within lease_ms."""
    tokens = await a.acquire(["w1"])
    ttl = await raw.pttl(f"{PREFIX}lease:w1")
    assert ({"w1": 1}, "replica-a:1") == (tokens, await raw.get(f"{PREFIX}lease:w1"))
    assert 0 < ttl <= LEASE_MS


async def test_acquire_skips_leases_held_by_another(a: Leases, b: Leases) -> None:
    """SET NX: a held lease is not taken, and its holder is unchanged."""
    await a.acquire(["w1"])
    assert ({}, ("replica-a", 1)) == (await b.acquire(["w1"]), await a.holder("w1"))


async def test_fencing_token_increases_on_each_acquisition(a: Leases, b: Leases) -> None:
    """Every acquisition of a watcher's lease gets a larger token, whoever acquires it."""
    seen = []
    for leases in (a, b, a):
        token = (await leases.acquire(["w1"]))["w1"]
        seen.append(token)
        await leases.release({"w1": token})
    assert [1, 2, 3] == seen


async def test_stale_holder_fails_the_fencing_check(a: Leases, b: Leases, raw: redis.asyncio.Redis) -> None:
    """After A's lease expires and B takes it, A's ``holds`` is False and B's is True."""
    old = (await a.acquire(["w1"]))["w1"]
    await raw.delete(f"{PREFIX}lease:w1")  # what expiry does
    new = (await b.acquire(["w1"]))["w1"]
    assert (False, True) == (await a.holds("w1", old), await b.holds("w1", new))


async def test_holds_is_false_for_an_older_token_of_the_same_replica(
    a: Leases, raw: redis.asyncio.Redis
) -> None:
    """A replica that re-acquired cannot act on what it saw under its previous token."""
    old = (await a.acquire(["w1"]))["w1"]
    await raw.delete(f"{PREFIX}lease:w1")
    new = (await a.acquire(["w1"]))["w1"]
    assert (False, True) == (await a.holds("w1", old), await a.holds("w1", new))


async def test_renew_extends_the_holders_lease(a: Leases, raw: redis.asyncio.Redis) -> None:
    """Renewal by the holder resets the expiry to lease_ms."""
    token = (await a.acquire(["w1"]))["w1"]
    await raw.pexpire(f"{PREFIX}lease:w1", 100)
    renewed = await a.renew({"w1": token})
    assert {"w1"} == renewed
    assert await raw.pttl(f"{PREFIX}lease:w1") > 500


async def test_renew_by_a_non_holder_changes_nothing(a: Leases, b: Leases, raw: redis.asyncio.Redis) -> None:
    """A replica cannot renew a lease it does not hold, even with the right token."""
    token = (await a.acquire(["w1"]))["w1"]
    await raw.pexpire(f"{PREFIX}lease:w1", 300)
    assert set() == await b.renew({"w1": token})
    assert await raw.pttl(f"{PREFIX}lease:w1") <= 300


async def test_renew_after_expiry_reports_lost_and_recreates_nothing(
    a: Leases, raw: redis.asyncio.Redis
) -> None:
    """An expired lease is not renewed, and renewing does not bring the key back."""
    token = (await a.acquire(["w1"]))["w1"]
    await raw.delete(f"{PREFIX}lease:w1")
    assert (set(), 0) == (await a.renew({"w1": token}), await raw.exists(f"{PREFIX}lease:w1"))


async def test_release_deletes_only_the_holders_lease(a: Leases, b: Leases) -> None:
    """Release is compare-and-delete: B's attempt leaves A's lease, A's own deletes it."""
    token = (await a.acquire(["w1"]))["w1"]
    by_b = await b.release({"w1": token})
    still = await a.holder("w1")
    by_a = await a.release({"w1": token})
    assert (set(), ("replica-a", token), {"w1"}, None) == (by_b, still, by_a, await a.holder("w1"))


async def test_free_lists_the_unheld_leases(a: Leases) -> None:
    """``free`` returns exactly the watchers whose lease nobody holds."""
    await a.acquire(["w1", "w3"])
    assert {"w2", "w4"} == await a.free(["w1", "w2", "w3", "w4"])


async def test_bulk_operations_cover_ten_thousand_watchers(make_leases: MakeLeases) -> None:
    """Acquire, renew, check and release 10,000 leases, each in one call."""
    a, b = make_leases("replica-a", lease_ms=60_000), make_leases("replica-b", lease_ms=60_000)
    await a.open()
    await b.open()
    ids = watcher_ids(10_000)
    tokens = await a.acquire(ids)
    renewed = await a.renew(tokens)
    free, taken = await b.free(ids), await b.acquire(ids)
    released = await a.release(tokens)
    assert (10_000, 10_000, set(), {}, 10_000) == (len(tokens), len(renewed), free, taken, len(released))


async def test_unreachable_redis_is_store_unavailable(make_leases: MakeLeases) -> None:
    """A lease operation against a port where nothing listens raises StoreUnavailable."""
    leases = Leases("redis://127.0.0.1:1/0", key_prefix=PREFIX, replica_id="a", lease_ms=LEASE_MS)
    await leases.open()
    try:
        with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:1.*acquire leases"):
            await leases.acquire(["w1"])
    finally:
        await leases.close()


async def test_unopened_leases_say_how_to_open(make_leases: MakeLeases) -> None:
    """Using Leases before ``open`` raises StoreUnavailable with the way out."""
    with pytest.raises(StoreUnavailable, match=r"leases\.open"):
        await make_leases("a").holds("w1", 1)


async def test_leases_survive_a_server_that_forgot_their_scripts(a: Leases, raw: redis.asyncio.Redis) -> None:
    """After SCRIPT FLUSH (a restarted server) an acquisition answered NOSCRIPT loads the script
    and runs again, once: the lease is taken with the first token."""
    await raw.script_flush()
    assert {"w1": 1} == await a.acquire(["w1"])
    assert "replica-a:1" == await raw.get(f"{PREFIX}lease:w1")


async def test_renewals_ask_no_script_exists(a: Leases, raw: redis.asyncio.Redis) -> None:
    """A renewal is one pipelined round trip of EVALSHA, with no SCRIPT EXISTS before it."""
    tokens = await a.acquire(["w1", "w2"])
    before = await raw.info("commandstats")
    await a.renew(tokens)
    after = await raw.info("commandstats")
    asked = after.get("cmdstat_script|exists", {}).get("calls", 0) - before.get(
        "cmdstat_script|exists", {}
    ).get("calls", 0)
    assert 0 == asked
