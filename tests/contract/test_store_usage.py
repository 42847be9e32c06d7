"""Store contract: model usage counters (add, read, shared across reopening, forgotten after ttl)."""

from __future__ import annotations

import asyncio

import pytest

from sentinel_hooks.core.usage import Usage
from sentinel_hooks.store import Store
from sentinel_hooks.store.base import UsageCount
from tests.contract import stores
from tests.contract.stores import Backend, at

backend, durable_backend, store = stores.backend, stores.durable_backend, stores.store

DAY_MS = 86_400_000


async def test_add_usage_counts_into_every_key(store: Store) -> None:
    """One call's usage is added to each key it names; keys never added to are absent."""
    await store.add_usage(["fire:a", "service-day:d"], Usage(10, 5, 0.25), at=at(0), ttl_ms=DAY_MS)
    await store.add_usage(["fire:b", "service-day:d"], Usage(1, 2, 0.5), at=at(1), ttl_ms=DAY_MS)
    found = await store.get_usage(["fire:a", "fire:b", "service-day:d", "fire:none"])
    assert {
        "fire:a": Usage(10, 5, 0.25),
        "fire:b": Usage(1, 2, 0.5),
        "service-day:d": Usage(11, 7, 0.75),
    } == found


async def test_concurrent_adds_are_all_counted(store: Store) -> None:
    """Fifty racing adds to one key lose none (each add is atomic)."""
    await asyncio.gather(
        *(store.add_usage(["k"], Usage(1, 2, 0.125), at=at(0), ttl_ms=DAY_MS) for _ in range(50))
    )
    assert {"k": Usage(50, 100, 6.25)} == await store.get_usage(["k"])


async def test_counters_outlive_the_store_object(durable_backend: Backend) -> None:
    """A counter written before a restart is read after it (replicas and restarts share budgets)."""
    first = durable_backend.make()
    await first.open()
    await first.add_usage(["service-day:d"], Usage(7, 3, 0.0), at=at(0), ttl_ms=DAY_MS)
    await first.close()
    second = durable_backend.make()
    await second.open()
    try:
        assert {"service-day:d": Usage(7, 3, 0.0)} == await second.get_usage(["service-day:d"])
    finally:
        await second.close()


async def test_add_usage_refuses_a_ttl_below_one(store: Store) -> None:
    """A counter kept for no time is a caller's bug: ValueError, nothing counted."""
    with pytest.raises(ValueError, match="ttl_ms"):
        await store.add_usage(["k"], Usage(1, 1, 0.0), at=at(0), ttl_ms=0)
    assert {} == await store.get_usage(["k"])


async def test_nothing_to_read_or_add_is_a_no_op(store: Store) -> None:
    """No keys: nothing is added and nothing is read."""
    await store.add_usage([], Usage(1, 1, 0.0), at=at(0), ttl_ms=DAY_MS)
    assert {} == await store.get_usage([])


async def test_a_transcript_append_counts_its_usage_in_the_same_step(store: Store) -> None:
    """``append_transcript`` with ``usage`` appends the entries and adds to every counter named."""
    counted = UsageCount(("fire:a", "service-day:d"), Usage(10, 5, 0.25), DAY_MS)
    seqs = await store.append_transcript("s", [{"kind": "message"}], at=at(0), usage=counted)
    await store.append_transcript("s", [], at=at(1), usage=counted)  # the counters alone
    assert [1] == seqs
    assert [1] == [e.seq for e in await store.get_transcript("s")]
    expected = {"fire:a": Usage(20, 10, 0.5), "service-day:d": Usage(20, 10, 0.5)}
    assert expected == await store.get_usage(["fire:a", "service-day:d"])


async def test_a_transcript_append_refuses_usage_kept_for_no_time(store: Store) -> None:
    """A ``ttl_ms`` below 1 is refused before anything is written: no entry, no count."""
    with pytest.raises(ValueError, match="ttl_ms"):
        await store.append_transcript(
            "s", [{"kind": "message"}], at=at(0), usage=UsageCount(("k",), Usage(1, 1, 0.0), 0)
        )
    assert [] == await store.get_transcript("s")
    assert {} == await store.get_usage(["k"])
