"""``WriteCheck``, what /readyz asks: one write to the store's health key per check, reused briefly."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store import RedisStore
from sentinel_hooks.store.health import WriteCheck

pytestmark = pytest.mark.redis


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[RedisStore]:
    opened = RedisStore(redis_url, key_prefix=f"sentinel-test:{uuid.uuid4().hex}:")
    await opened.open()
    yield opened
    async with redis.asyncio.Redis.from_url(redis_url) as client:
        await client.delete(opened.keys.health)
    await opened.close()


async def writes(store: RedisStore) -> int:
    async with redis.asyncio.Redis.from_url(store.url) as client:
        return int(await client.get(store.keys.health) or 0)


async def test_concurrent_checks_share_one_write_and_reuse_it(store: RedisStore) -> None:
    """Ten probes at once cost one write; a check within ``fresh_s`` costs none."""
    check = WriteCheck(store, fresh_s=60)
    await asyncio.gather(*(check.check() for _ in range(10)))
    await check.check()
    assert 1 == await writes(store)


async def test_a_stale_success_is_checked_again(store: RedisStore) -> None:
    """After ``fresh_s`` the next check writes again."""
    check = WriteCheck(store, fresh_s=0)
    await check.check()
    await check.check()
    assert 2 == await writes(store)


async def test_a_failure_is_not_reused(store: RedisStore) -> None:
    """A failed check raises the store's error, and the next check tries the store again."""
    check = WriteCheck(store, fresh_s=60)
    await store.close()
    with pytest.raises(StoreUnavailable):
        await check.check()
    await store.open()
    await check.check()
    assert 1 == await writes(store)
