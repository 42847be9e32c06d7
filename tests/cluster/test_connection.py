"""The process's Redis clients: bounded pools that wait for a connection instead of failing."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio
from redis.asyncio import BlockingConnectionPool

from sentinel_hooks.cluster import Leases
from sentinel_hooks.cluster.connection import POOL_SIZES, Role, open_client
from sentinel_hooks.store.redis_connection import RedisConnection
from tests.cluster.conftest import PREFIX


def pool_settings(client: redis.asyncio.Redis) -> tuple[bool, int, float | None, float | None]:
    """Blocking pool?, its bound, how long it lets a command wait, the socket timeout."""
    pool = client.connection_pool
    timeout = pool.timeout if isinstance(pool, BlockingConnectionPool) else -1.0
    return (
        isinstance(pool, BlockingConnectionPool),
        pool.max_connections,
        timeout,
        pool.connection_kwargs.get("socket_timeout"),
    )


@pytest.mark.parametrize("role", sorted(POOL_SIZES))
async def test_each_cluster_client_has_a_bounded_pool_that_waits(role: Role) -> None:
    """Every role's client waits for one of its POOL_SIZES[role] connections, with no socket
    timeout (deadlines are asyncio.timeout's) and no retries of its own."""
    client = open_client("redis://127.0.0.1:1/0", role, name="t")
    await client.aclose()
    assert (True, POOL_SIZES[role], None, None) == pool_settings(client)


@pytest.mark.redis
async def test_the_store_client_has_a_bounded_pool_that_waits(redis_url: str) -> None:
    """The store's client too: 64 connections at most, waits bounded by asyncio.timeout only."""
    connection = RedisConnection(redis_url)
    await connection.start()
    settings = pool_settings(connection.client)
    await connection.stop()
    assert (True, 64, None, None) == settings


@pytest.mark.redis
async def test_a_burst_of_lease_commands_waits_for_connections(
    redis_url: str, raw: redis.asyncio.Redis
) -> None:
    """200 concurrent lease reads all answer (none fails with "Too many connections"), over no
    more connections than the leases' pool holds."""
    # each command may wait lease_ms / 3 (capped at 5 s): a loaded machine needs the longest
    leases = Leases(redis_url, key_prefix=PREFIX, replica_id="burst", lease_ms=15_000)
    await leases.open()
    try:
        await leases.acquire(["w1"])
        holders = await asyncio.gather(*(leases.holder("w1") for _ in range(200)))
        names = [c.get("name") for c in await raw.client_list()]
    finally:
        await leases.close()
    assert [("burst", 1)] * 200 == holders
    assert 1 <= names.count("sentinel-leases:burst") <= POOL_SIZES["leases"]
