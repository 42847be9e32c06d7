"""Fixtures of the store tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sentinel_hooks.store.redis import RedisStore


@pytest.fixture
async def opened_redis_store(redis_url: str) -> AsyncIterator[RedisStore]:
    """An open RedisStore on an empty database of the tests' own redis-server."""
    store = RedisStore(redis_url)
    await store.open()
    yield store
    await store.close()
