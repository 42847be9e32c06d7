"""OutcomeWriter: attempt outcomes reach the store, batched, and each caller sees its own error."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from sentinel_hooks.delivery.recording import OutcomeWriter
from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store import Delivery, DeliveryOutcome, MemoryStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def _store_with(n: int) -> tuple[MemoryStore, list[Delivery]]:
    store = MemoryStore()
    await store.open()
    deliveries = [Delivery.new(f"cb-{i}", "hook", "fallback", {"text": "x"}, at=T0) for i in range(n)]
    for d in deliveries:
        await store.enqueue_delivery(d)
    return store, deliveries


def _sent(d: Delivery) -> DeliveryOutcome:
    at = T0 + timedelta(seconds=1)
    return DeliveryOutcome(d.key, "delivered", 1, at, None, at)


async def test_concurrent_outcomes_are_all_stored() -> None:
    """Outcomes recorded at once (more than one batch) are each stored before record returns."""
    store, deliveries = await _store_with(600)
    writer = OutcomeWriter(store, max_batch=256)
    await asyncio.gather(*(writer.record(_sent(d)) for d in deliveries))
    stored = [await store.get_delivery(d.key) for d in deliveries]
    assert {("delivered", 1)} == {(d.state, d.attempts) for d in stored if d is not None}
    assert [] == await store.claim_deliveries(T0 + timedelta(hours=1))


async def test_a_failed_write_reaches_every_waiter_and_the_next_one_succeeds() -> None:
    """When the store refuses a batch, each caller of it gets the error; later records work."""
    store, deliveries = await _store_with(3)
    writer = OutcomeWriter(store)
    await store.close()
    results = await asyncio.gather(*(writer.record(_sent(d)) for d in deliveries), return_exceptions=True)
    assert all(isinstance(r, StoreUnavailable) for r in results)
    await store.open()
    await writer.record(_sent(deliveries[0]))
    first = await store.get_delivery(deliveries[0].key)
    assert first is not None
    assert "delivered" == first.state


async def test_a_bad_outcome_is_refused() -> None:
    """An outcome no caller should pass is a ValueError for its caller, like update_delivery."""
    store, deliveries = await _store_with(1)
    writer = OutcomeWriter(store)
    bad = DeliveryOutcome(deliveries[0].key, "lost", 1, T0, None, T0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="delivery state"):
        await writer.record(bad)
