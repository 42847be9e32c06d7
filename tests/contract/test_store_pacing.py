"""Store contract: pacing slots (``take_pace_slot``, SPEC §16) on SQLite, memory and Redis."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from sentinel_hooks.store import Store
from tests.contract import stores
from tests.contract.stores import Backend, at

backend, durable_backend, store = stores.backend, stores.durable_backend, stores.store


async def take(
    store: Store, holder: str, seconds: float, *, key: str = "k", limit: int = 3
) -> datetime | None:
    return await store.take_pace_slot(key, holder=holder, limit=limit, window_ms=60_000, at=at(seconds))


async def test_free_slots_at_once_then_reserved_ones_in_the_order_asked(store: Store) -> None:
    """Three slots per 60 s: the first three get one at once; the next ones are each reserved
    the slot a window after the one three before it, and may send when it comes, not earlier."""
    assert [None, None, None] == [await take(store, h, s) for h, s in (("a", 0), ("b", 1), ("c", 2))]
    assert at(60) == await take(store, "d", 30)
    assert at(61) == await take(store, "e", 31)
    assert at(60) == await take(store, "d", 59.999)  # asked again early: the same slot
    assert await take(store, "d", 60) is None
    assert await take(store, "e", 61) is None
    assert at(62) == await take(store, "f", 61)
    assert at(120) == await take(store, "g", 61)  # a window after d's slot


async def test_a_used_reservation_is_not_handed_out_again(store: Store) -> None:
    """A holder that sent on its reservation and asks again (a retry) takes a new slot."""
    assert await take(store, "a", 0, limit=1) is None
    assert at(60) == await take(store, "b", 1, limit=1)
    assert await take(store, "b", 60, limit=1) is None
    assert at(120) == await take(store, "b", 61, limit=1)


async def test_a_late_send_on_a_reservation_counts_when_it_happens(store: Store) -> None:
    """A holder that comes well after its reserved slot (a backlog) sends then: the window counts
    that send, so the next takers wait a window after it, not after the slot it came late to."""
    assert await take(store, "a", 0, limit=1) is None
    assert at(60) == await take(store, "b", 1, limit=1)
    assert await take(store, "b", 100, limit=1) is None  # 40 s late
    assert at(160) == await take(store, "c", 121, limit=1)  # not free at once at 121


async def test_late_sends_never_crowd_a_window_with_the_slots_handed_out_meanwhile(store: Store) -> None:
    """Two holders come 50 s after their slot, when a newer holder has sent and another has a
    slot reserved: the first late one fits and sends, the second would make four sends in one
    window and is given the earliest slot that keeps three (hypothesis found the crowding when a
    late send was let through whatever the window held)."""
    assert [None, None, None] == [await take(store, h, s) for h, s in (("a", 0), ("b", 0), ("c", 50))]
    assert [at(60), at(60)] == [await take(store, "d", 50), await take(store, "e", 50)]
    assert [None, at(120)] == [await take(store, "f", 110), await take(store, "g", 110)]
    assert await take(store, "d", 110) is None  # 50 s late; 110, 110 and g's 120 fit in a window
    assert at(170) == await take(store, "e", 110)  # a fourth would not: after f's and d's leave
    assert await take(store, "g", 120) is None
    assert await take(store, "e", 170) is None


async def test_keys_are_paced_apart(store: Store) -> None:
    """One key's full window does not hold another's."""
    assert await take(store, "x", 0, key="a", limit=1) is None
    assert await take(store, "x", 0, key="b", limit=1) is None
    assert at(60) == await take(store, "y", 0, key="a", limit=1)


async def test_racing_takers_never_exceed_the_limit(store: Store) -> None:
    """Fifty concurrent holders at one instant: ten send now, the others are reserved ten per
    window, in four later windows (each take is atomic)."""
    got = await asyncio.gather(*(take(store, f"h{n}", 0, limit=10) for n in range(50)))
    assert 10 == sum(1 for g in got if g is None)
    assert {at(60): 10, at(120): 10, at(180): 10, at(240): 10} == {
        slot: sum(1 for g in got if g == slot) for slot in {g for g in got if g is not None}
    }


async def test_slots_outlive_the_store_object(durable_backend: Backend) -> None:
    """Slots and reservations made before a restart hold after it (replicas and restarts share
    the pace)."""
    first = durable_backend.make()
    await first.open()
    assert await take(first, "a", 0, limit=1) is None
    assert at(60) == await take(first, "b", 1, limit=1)
    await first.close()
    second = durable_backend.make()
    await second.open()
    try:
        assert at(120) == await take(second, "c", 2, limit=1)
        assert await take(second, "b", 60, limit=1) is None
    finally:
        await second.close()


@pytest.mark.parametrize(("limit", "window_ms"), [(0, 1000), (1, 0)])
async def test_a_limit_or_window_below_one_is_refused(store: Store, limit: int, window_ms: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        await store.take_pace_slot("k", holder="h", limit=limit, window_ms=window_ms, at=at(0))
