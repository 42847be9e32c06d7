"""Store contract: pacing windows (``take_pace_slot``, SPEC §16) on SQLite, memory and Redis."""

from __future__ import annotations

import asyncio

import pytest

from sentinel_hooks.store import Store
from tests.contract import stores
from tests.contract.stores import Backend, at

backend, durable_backend, store = stores.backend, stores.durable_backend, stores.store


async def test_slots_up_to_the_limit_then_the_instant_the_oldest_frees(store: Store) -> None:
    """Three slots per 60 s: the first three calls get one, the fourth is told when the first
    leaves the window, and gets one from then on."""
    taken = [await store.take_pace_slot("k", limit=3, window_ms=60_000, at=at(s)) for s in (0, 1, 2)]
    assert [None, None, None] == taken
    assert at(60) == await store.take_pace_slot("k", limit=3, window_ms=60_000, at=at(30))
    assert at(60) == await store.take_pace_slot("k", limit=3, window_ms=60_000, at=at(59.999))
    assert await store.take_pace_slot("k", limit=3, window_ms=60_000, at=at(60)) is None
    assert at(61) == await store.take_pace_slot("k", limit=3, window_ms=60_000, at=at(60.5))


async def test_keys_are_paced_apart(store: Store) -> None:
    """One key's full window does not hold another's."""
    assert await store.take_pace_slot("a", limit=1, window_ms=1000, at=at(0)) is None
    assert await store.take_pace_slot("b", limit=1, window_ms=1000, at=at(0)) is None
    assert at(1) == await store.take_pace_slot("a", limit=1, window_ms=1000, at=at(0))


async def test_racing_takers_never_exceed_the_limit(store: Store) -> None:
    """Fifty concurrent takers at one instant: exactly ten slots handed out (each take is atomic)."""
    got = await asyncio.gather(
        *(store.take_pace_slot("k", limit=10, window_ms=60_000, at=at(0)) for _ in range(50))
    )
    assert 10 == sum(1 for g in got if g is None)
    assert {at(60)} == {g for g in got if g is not None}


async def test_the_window_outlives_the_store_object(durable_backend: Backend) -> None:
    """Slots taken before a restart still count after it (replicas and restarts share the pace)."""
    first = durable_backend.make()
    await first.open()
    assert await first.take_pace_slot("k", limit=1, window_ms=60_000, at=at(0)) is None
    await first.close()
    second = durable_backend.make()
    await second.open()
    try:
        assert at(60) == await second.take_pace_slot("k", limit=1, window_ms=60_000, at=at(1))
    finally:
        await second.close()


@pytest.mark.parametrize(("limit", "window_ms"), [(0, 1000), (1, 0)])
async def test_a_limit_or_window_below_one_is_refused(store: Store, limit: int, window_ms: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        await store.take_pace_slot("k", limit=limit, window_ms=window_ms, at=at(0))
