"""OutcomeWriter: attempt outcomes reach the store, batched, and each caller sees its own error."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sentinel_hooks.delivery.outcomes import OutcomeWriter
from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store import Delivery, DeliveryOutcome, Store
from sentinel_hooks.store.sqlite import SqliteStore
from tests.contract.stores import get_delivery

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def _enqueued(store: Store, n: int) -> list[Delivery]:
    deliveries = [Delivery.new(f"cb-{i}", "hook", "fallback", {"text": "x"}, at=T0) for i in range(n)]
    for d in deliveries:
        await store.enqueue_delivery(d)
    return deliveries


def _sent(d: Delivery) -> DeliveryOutcome:
    at = T0 + timedelta(seconds=1)
    return DeliveryOutcome(d.key, "delivered", 1, at, None, at)


async def test_concurrent_outcomes_are_all_stored(memory_store: Store) -> None:
    """Outcomes recorded at once (more than one batch) are each stored before record returns."""
    store, deliveries = memory_store, await _enqueued(memory_store, 600)
    writer = OutcomeWriter(store, max_batch=256)
    await asyncio.gather(*(writer.record(_sent(d)) for d in deliveries))
    stored = [await get_delivery(store, d.key) for d in deliveries]
    assert {("delivered", 1)} == {(d.state, d.attempts) for d in stored if d is not None}
    assert [] == await store.claim_deliveries(T0 + timedelta(hours=1))


async def test_a_failed_write_reaches_every_waiter_and_the_next_one_succeeds(tmp_path: Path) -> None:
    """When the store refuses a batch, each caller of it gets the error; later records work."""
    store = SqliteStore(tmp_path / "state.db")  # in a file: what was enqueued outlives the close
    await store.open()
    try:
        deliveries = await _enqueued(store, 3)
        writer = OutcomeWriter(store)
        await store.close()
        results = await asyncio.gather(*(writer.record(_sent(d)) for d in deliveries), return_exceptions=True)
        assert all(isinstance(r, StoreUnavailable) for r in results)
        await store.open()
        await writer.record(_sent(deliveries[0]))
        first = await get_delivery(store, deliveries[0].key)
        assert first is not None
        assert "delivered" == first.state
    finally:
        await store.close()


async def test_a_bad_outcome_is_refused(memory_store: Store) -> None:
    """An outcome no caller should pass is a ValueError for its caller, as the store refuses it."""
    deliveries = await _enqueued(memory_store, 1)
    writer = OutcomeWriter(memory_store)
    bad = DeliveryOutcome(deliveries[0].key, "lost", 1, T0, None, T0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="delivery state"):
        await writer.record(bad)
