"""The process's Redis clients: bounded pools that wait for a connection instead of failing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

import pytest
import redis.asyncio
from redis.asyncio import BlockingConnectionPool

from sentinel_hooks.clock import SystemClock
from sentinel_hooks.cluster import Leases, Membership
from sentinel_hooks.cluster.connection import POOL_SIZES, Role, open_client
from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store.redis.connection import RedisConnection
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


class SlowFirstConnection:
    """A TCP proxy on 127.0.0.1 in front of the tests' Redis that holds the first ``slow``
    connections ``delay_s`` before forwarding a byte (a busy machine's slow connect), and forwards
    the rest at once. Leaving it closes every connection and ends every task it started."""

    def __init__(self, upstream_port: int, *, slow: int, delay_s: float) -> None:
        self.upstream_port = upstream_port
        self.slow = slow
        self.delay_s = delay_s
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"redis://127.0.0.1:{port}/11"

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in self._writers:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in self._writers), return_exceptions=True)
        await self._server.wait_closed()

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        self.connections += 1
        self._start(self._forward(reader, writer, slow=self.connections <= self.slow))

    async def _forward(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, slow: bool
    ) -> None:
        if slow:
            await asyncio.sleep(self.delay_s)  # the injected fault, not a synchronisation
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers.append(up_writer)
        self._start(_pipe(reader, up_writer))
        self._start(_pipe(up_reader, writer))


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    sink.close()


@pytest.mark.redis
async def test_a_slow_first_connection_does_not_fail_the_start(redis_url: str) -> None:
    """The first heartbeat also connects: a connection held past one command's bound (0.5 s for a
    1 s lease) is tried again, and the replica joins; a Redis that stays away still fails it."""
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    async with SlowFirstConnection(port, slow=1, delay_s=1.0) as url:
        membership = Membership(url, lease_ms=1000, clock=SystemClock(), replica_id="slow")
        try:
            await membership.start()
            assert "slow" in await membership.live()
        finally:
            await membership.leave()

    down = Membership("redis://127.0.0.1:1/11", lease_ms=1000, clock=SystemClock(), replica_id="down")
    try:
        with pytest.raises(StoreUnavailable, match="heartbeat"):
            await down.start()
    finally:
        await down.close()
