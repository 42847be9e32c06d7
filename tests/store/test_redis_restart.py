"""After Redis restarts, the connections a client kept open are not used as if nothing happened."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sentinel_hooks.store import open_store
from sentinel_hooks.store.redis.connection import new_client
from tests.redis_server import RestartableRedis

pytestmark = pytest.mark.redis


async def restart(server: RestartableRedis) -> None:
    """Stop and start the server while this event loop runs (it sees the connections close)."""
    await asyncio.to_thread(server.stop)
    await asyncio.to_thread(server.start)


async def test_every_connection_kept_across_a_restart_works_at_its_next_command(tmp_path: Path) -> None:
    """Eight connections idle in the pool while Redis restarts: eight commands after it all succeed
    (before: each failed once, "Connection closed by server")."""
    server = RestartableRedis(str(tmp_path))
    server.start()
    client = new_client(server.url, name="restart-test", max_connections=8)
    try:
        await asyncio.gather(*(client.incr("n") for _ in range(8)))
        await restart(server)
        assert 16 == max(await asyncio.gather(*(client.incr("n") for _ in range(8))))
    finally:
        await client.aclose()
        server.stop()


async def test_the_store_answers_at_once_after_its_redis_restarted(tmp_path: Path) -> None:
    """The Redis store's first ping after a restart of its server succeeds."""
    server = RestartableRedis(str(tmp_path))
    server.start()
    store = open_store(server.url, base_dir=tmp_path)
    try:
        await store.open()
        await asyncio.gather(*(store.ping() for _ in range(4)))
        await restart(server)
        await asyncio.gather(*(store.ping() for _ in range(4)))
    finally:
        await store.close()
        server.stop()
