"""The Redis store's accepts made at once (a notification's fires) go in one pipelined round trip,
each its own script: one that fails is answered with its own error, the others are stored."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio

from sentinel_hooks.errors import StoreError
from sentinel_hooks.store.records import GroupRequest
from sentinel_hooks.store.redis import RedisStore
from tests.contract.stores import envelope
from tests.contract.test_store_groups import accept, fire

pytestmark = pytest.mark.redis


async def test_a_failing_accept_among_accepts_made_at_once_fails_alone(
    opened_redis_store: RedisStore, redis_url: str
) -> None:
    """A fire whose group key holds the wrong type of value gets a StoreError; the fire accepted
    with it, of another key, is stored."""
    store = opened_redis_store
    async with redis.asyncio.Redis.from_url(redis_url) as client:
        await client.rpush(store.keys.group_open("poisoned"), "not a callback id")
    poisoned = store.accept_contract(
        fire("p-1", key="poisoned"),
        envelope("p-1"),
        group=GroupRequest(key="poisoned", interval_ms=60_000, max_fires=10),
    )
    failed, stored = await asyncio.gather(
        poisoned, accept(store, "p-2", key="healthy"), return_exceptions=True
    )
    assert (True, "pending") == (isinstance(failed, StoreError), getattr(stored, "state", stored))
    assert "WRONGTYPE" in str(failed)
    assert (None, "pending") == (
        await store.get_contract("p-1"),
        getattr(await store.get_contract("p-2"), "state", None),
    )


async def test_a_group_whose_contract_text_sentinel_did_not_write_loses_no_fire(
    opened_redis_store: RedisStore, redis_url: str
) -> None:
    """A fire that would join a group whose contract text is not in the shape the join edits is
    stored on its own (pending, a group of its own), not written `grouped` into a group that
    never lists it."""
    store = opened_redis_store
    await accept(store, "g-1")
    async with redis.asyncio.Redis.from_url(redis_url) as client:
        await client.hset(store.keys.contract("g-1"), "doc", '{"callbackId": "g-1"}')
    alone = await accept(store, "g-2", 1)
    assert ("pending", None) == (alone.state, alone.group_id)
    stored = await store.get_contract("g-2")
    assert stored is not None
    assert stored.state == "pending"


async def test_accepts_made_at_once_ask_no_script_exists(
    opened_redis_store: RedisStore, redis_url: str
) -> None:
    """The batch is EVALSHA alone: no SCRIPT EXISTS round trip before it (redis-py's pipelined
    ``Script`` sends one on every batch)."""
    store = opened_redis_store
    async with redis.asyncio.Redis.from_url(redis_url, decode_responses=True) as client:
        await client.config_resetstat()
        stored = await asyncio.gather(*(accept(store, f"s-{i}", key=f"k{i}") for i in range(3)))
        stats = await client.info("commandstats")
    assert ["pending"] * 3 == [c.state for c in stored]
    assert "cmdstat_script|exists" not in stats
    assert "cmdstat_script" not in stats
    assert stats["cmdstat_evalsha"]["calls"] == 3


async def test_accepts_made_at_once_survive_a_server_that_forgot_the_script(
    opened_redis_store: RedisStore, redis_url: str
) -> None:
    """After SCRIPT FLUSH (a restarted server) a batch answered NOSCRIPT is loaded and run again,
    each fire stored once."""
    store = opened_redis_store
    async with redis.asyncio.Redis.from_url(redis_url) as client:
        await client.script_flush()
    stored = await asyncio.gather(*(accept(store, f"f-{i}", key=f"k{i}") for i in range(3)))
    assert ["pending"] * 3 == [c.state for c in stored]
    assert [1, 1, 1] == [(await store.get_contract(f"f-{i}")) is not None for i in range(3)]
