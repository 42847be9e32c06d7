"""Membership: replicas join with a heartbeat, leave on a graceful stop, and expire when silent."""

from __future__ import annotations

import os
import re
import socket

import pytest
import redis.asyncio

from sentinel_hooks.clock import Clock, FakeClock, SystemClock, to_ms
from sentinel_hooks.cluster import Membership
from sentinel_hooks.cluster.membership import PRUNE_AFTER_LEASES, new_replica_id
from sentinel_hooks.errors import StoreUnavailable
from tests.cluster.conftest import LEASE_MS, PREFIX
from tests.support import wait_for

pytestmark = pytest.mark.redis

KEY = f"{PREFIX}replicas"


def member(url: str, clock: Clock, name: str) -> Membership:
    return Membership(url, key_prefix=PREFIX, lease_ms=LEASE_MS, clock=clock, replica_id=name)


def test_replica_id_is_host_pid_and_four_hex() -> None:
    """A replica id reads ``<hostname>-<pid>-<4 random hex>``."""
    pattern = rf"{re.escape(socket.gethostname())}-{os.getpid()}-[0-9a-f]{{4}}"
    assert re.fullmatch(pattern, new_replica_id())


async def test_started_replicas_are_live_sorted(redis_url: str) -> None:
    """Two started replicas both see [a, b], sorted, whatever order they joined in."""
    clock = SystemClock()  # started replicas sleep between heartbeats: a fake clock would spin
    b, a = member(redis_url, clock, "b"), member(redis_url, clock, "a")
    await b.start()
    await a.start()
    try:
        assert (["a", "b"], ["a", "b"]) == (await a.live(), await b.live())
    finally:
        await a.close()
        await b.close()


async def test_leave_removes_the_replica_at_once(redis_url: str) -> None:
    """A graceful leave takes the replica out of everyone's live list immediately."""
    clock = SystemClock()
    a, b = member(redis_url, clock, "a"), member(redis_url, clock, "b")
    await a.start()
    await b.start()
    await a.leave()
    try:
        assert ["b"] == await b.live()
    finally:
        await b.close()


async def test_silent_replica_expires_after_the_lease(redis_url: str) -> None:
    """A replica that stops heartbeating is live just under lease_ms later, gone just after."""
    writer_clock, reader_clock = FakeClock(), FakeClock()
    writer, reader = member(redis_url, writer_clock, "a"), member(redis_url, reader_clock, "reader")
    await writer.open()
    await writer.heartbeat()
    await reader.open()
    try:
        reader_clock.advance(LEASE_MS / 1000 - 0.001)
        still = await reader.live()
        reader_clock.advance(0.002)
        assert (["a"], []) == (still, await reader.live())
    finally:
        await writer.close()
        await reader.close()


async def test_heartbeat_loop_refreshes_the_score(redis_url: str, raw: redis.asyncio.Redis) -> None:
    """A started replica re-scores itself every lease_ms / 3 (real time)."""
    replica = member(redis_url, SystemClock(), "a")
    await replica.start()
    try:
        first = await raw.zscore(KEY, "a")
        assert first is not None
        await wait_for(lambda: _score_above(raw, first), timeout_s=2, what="a second heartbeat")
    finally:
        await replica.close()


async def _score_above(raw: redis.asyncio.Redis, score: float) -> bool:
    current = await raw.zscore(KEY, "a")
    return current is not None and current > score


async def test_heartbeat_prunes_long_dead_replicas(redis_url: str, raw: redis.asyncio.Redis) -> None:
    """Entries dead for more than PRUNE_AFTER_LEASES leases are removed; recent dead ones stay."""
    clock = FakeClock()
    now_ms = to_ms(clock.now())
    await raw.zadd(
        KEY, {"ancient": now_ms - PRUNE_AFTER_LEASES * LEASE_MS - 1, "recent": now_ms - 2 * LEASE_MS}
    )
    replica = member(redis_url, clock, "a")
    await replica.open()
    await replica.heartbeat()
    try:
        assert ["a", "recent"] == sorted(await raw.zrange(KEY, 0, -1))
    finally:
        await replica.close()


async def test_membership_writes_only_the_replicas_key(redis_url: str, raw: redis.asyncio.Redis) -> None:
    """Joining and heartbeating create one key, ``<prefix>replicas``, and nothing else."""
    replica = member(redis_url, SystemClock(), "a")
    await replica.start()
    await replica.heartbeat()
    try:
        assert [KEY] == await raw.keys("*")
    finally:
        await replica.close()


async def test_unreachable_redis_is_store_unavailable() -> None:
    """Starting against a port where nothing listens raises StoreUnavailable naming the server."""
    replica = member("redis://127.0.0.1:1/0", FakeClock(), "a")
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:1.*heartbeat"):
        await replica.start()
    await replica.close()
