"""Store contract: the dedupe window (set-if-absent with a TTL, on injected time)."""

from __future__ import annotations

import asyncio

from sentinel_hooks.store import Store


async def test_first_add_of_a_key_wins(store: Store, make) -> None:
    """An absent key is set and add_dedupe returns True."""
    assert await store.add_dedupe("dk", ttl_ms=1000, now=make.at(0)) is True


async def test_add_within_the_window_is_refused(store: Store, make) -> None:
    """The same key inside its TTL returns False."""
    await store.add_dedupe("dk", ttl_ms=1000, now=make.at(0))
    assert await store.add_dedupe("dk", ttl_ms=1000, now=make.at(0.999)) is False


async def test_add_after_the_window_wins_again(store: Store, make) -> None:
    """Once now reaches set time + TTL, the key is free again."""
    await store.add_dedupe("dk", ttl_ms=1000, now=make.at(0))
    assert await store.add_dedupe("dk", ttl_ms=1000, now=make.at(1)) is True


async def test_a_refused_add_does_not_extend_the_window(store: Store, make) -> None:
    """A refused attempt leaves the original expiry in place."""
    await store.add_dedupe("dk", ttl_ms=1000, now=make.at(0))
    await store.add_dedupe("dk", ttl_ms=1000, now=make.at(0.5))
    assert await store.add_dedupe("dk", ttl_ms=1000, now=make.at(1)) is True


async def test_dedupe_keys_are_independent(store: Store, make) -> None:
    """Setting one key does not block another."""
    await store.add_dedupe("dk-1", ttl_ms=1000, now=make.at(0))
    assert await store.add_dedupe("dk-2", ttl_ms=1000, now=make.at(0)) is True


async def test_concurrent_adds_of_one_key_have_one_winner(store: Store, make) -> None:
    """Of 20 concurrent adds of the same key, exactly one returns True."""
    results = await asyncio.gather(
        *(store.add_dedupe("dk", ttl_ms=60_000, now=make.at(0)) for _ in range(20))
    )
    assert 1 == results.count(True)
