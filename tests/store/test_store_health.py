"""``WriteCheck``, what /readyz asks: one write to the store's health key per check, reused briefly."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store.health import WriteCheck
from sentinel_hooks.store.redis import RedisStore

pytestmark = pytest.mark.redis


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[RedisStore]:
    opened = RedisStore(redis_url)
    await opened.open()
    yield opened
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


async def test_the_cause_is_logged_once_per_outage(
    store: RedisStore, caplog: pytest.LogCaptureFixture
) -> None:
    """/readyz shows no store error (it needs no auth): the check logs the cause when writes start
    failing, not at every probe, and logs the recovery once."""
    caplog.set_level("INFO", logger="sentinel_hooks.store.health")
    check = WriteCheck(store, fresh_s=0)
    await check.check()
    await store.close()
    for _ in range(3):
        with pytest.raises(StoreUnavailable):
            await check.check()
    await store.open()
    await check.check()
    await check.check()
    messages = [r.getMessage() for r in caplog.records if r.name == "sentinel_hooks.store.health"]
    assert 2 == len(messages), messages
    assert "does not take writes" in messages[0]
    assert "redis store" in messages[0]
    assert "takes writes again" in messages[1]
