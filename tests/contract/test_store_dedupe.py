"""Store contract: the dedupe window (set-if-absent with a TTL, on injected time), as a new
callback's ``accept_contract`` with a dedupe key sees it: pending when it opens the window, deduped
inside a live one."""

from __future__ import annotations

import asyncio

from sentinel_hooks.store import Store
from tests.contract import stores
from tests.contract.stores import opens_window

backend, store, make = stores.backend, stores.store, stores.make


async def test_first_use_of_a_key_opens_the_window(store: Store, make) -> None:
    """An absent key is set: the callback is stored pending."""
    assert await opens_window(store, "dk", ttl_ms=1000, now=make.at(0)) is True


async def test_use_within_the_window_is_deduped(store: Store, make) -> None:
    """The same key inside its TTL dedupes the callback."""
    await opens_window(store, "dk", ttl_ms=1000, now=make.at(0))
    assert await opens_window(store, "dk", ttl_ms=1000, now=make.at(0.999)) is False


async def test_use_after_the_window_opens_it_again(store: Store, make) -> None:
    """Once now reaches set time + TTL, the key is free again."""
    await opens_window(store, "dk", ttl_ms=1000, now=make.at(0))
    assert await opens_window(store, "dk", ttl_ms=1000, now=make.at(1)) is True


async def test_a_deduped_use_does_not_extend_the_window(store: Store, make) -> None:
    """A refused attempt leaves the original expiry in place."""
    await opens_window(store, "dk", ttl_ms=1000, now=make.at(0))
    await opens_window(store, "dk", ttl_ms=1000, now=make.at(0.5))
    assert await opens_window(store, "dk", ttl_ms=1000, now=make.at(1)) is True


async def test_dedupe_keys_are_independent(store: Store, make) -> None:
    """Setting one key does not block another."""
    await opens_window(store, "dk-1", ttl_ms=1000, now=make.at(0))
    assert await opens_window(store, "dk-2", ttl_ms=1000, now=make.at(0)) is True


async def test_concurrent_uses_of_one_key_have_one_winner(store: Store, make) -> None:
    """Of 20 concurrent callbacks with the same key, exactly one opens the window."""
    results = await asyncio.gather(
        *(opens_window(store, "dk", ttl_ms=60_000, now=make.at(0)) for _ in range(20))
    )
    assert 1 == results.count(True)
