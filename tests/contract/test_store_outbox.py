"""Store contract: the delivery outbox (enqueue, claim with leases, attempt outcomes)."""

from __future__ import annotations

import asyncio

from sentinel_hooks.store import DeliveryOutcome, DeliveryState, Store, delivery_key
from tests.contract import stores
from tests.contract.stores import get_delivery

backend, store, make = stores.backend, stores.store, stores.make


async def record(
    store: Store,
    key: str,
    state: DeliveryState,
    *,
    attempts: int,
    next_at: float,
    error: str | None,
    at: float,
) -> set[str]:
    """Record one attempt's outcome (``record_outcomes`` of one, no claimed copy); the keys updated."""
    outcome = DeliveryOutcome(key, state, attempts, stores.at(next_at), error, stores.at(at))
    return set((await store.record_outcomes([outcome])).keys)


def test_delivery_key_joins_callback_target_and_kind() -> None:
    """The idempotency key is ``{callbackId}:{target}:{kind}``."""
    assert "01J:oncall:fallback" == delivery_key("01J", "oncall", "fallback")


async def test_enqueued_delivery_reads_back_equal(store: Store, make) -> None:
    """An enqueued delivery is listed exactly as enqueued."""
    written = make.delivery("a", "oncall", "notify")
    await store.enqueue_delivery(written)
    assert written == await get_delivery(store, "a:oncall:notify")


async def test_enqueue_refuses_an_existing_key_and_keeps_the_first(store: Store, make) -> None:
    """A second delivery with the same key is refused and writes nothing."""
    first = make.delivery("a", due=1)
    await store.enqueue_delivery(first)
    refused = await store.enqueue_delivery(make.delivery("a", due=5))
    assert (False, first) == (refused, await get_delivery(store, first.key))


async def test_unknown_delivery_is_none(store: Store) -> None:
    """An unknown key has no delivery."""
    assert await get_delivery(store, "nope:x:notify") is None


async def test_list_deliveries_is_oldest_first_and_only_that_callback(store: Store, make) -> None:
    """list_deliveries returns one callback's deliveries by creation time."""
    later = make.delivery("a", "slack", "fallback", due=5)
    earlier = make.delivery("a", "oncall", "notify", due=1)
    for d in [later, make.delivery("b", "oncall", "notify"), earlier]:
        await store.enqueue_delivery(d)
    assert [earlier, later] == await store.list_deliveries("a")


async def test_claim_deliveries_returns_due_pending_ones(store: Store, make) -> None:
    """A pending delivery whose next attempt is due is claimed."""
    await store.enqueue_delivery(make.delivery("a", due=3))
    claimed = await store.claim_deliveries(make.at(3))
    assert ["a:oncall:fallback"] == [d.key for d in claimed]


async def test_claim_deliveries_skips_ones_not_yet_due(store: Store, make) -> None:
    """A delivery due later than now is not claimed."""
    await store.enqueue_delivery(make.delivery("a", due=3))
    assert [] == await store.claim_deliveries(make.at(2.999))


async def test_claimed_delivery_is_hidden_until_the_lease_ends(store: Store, make) -> None:
    """A second claim within the lease gets nothing."""
    await store.enqueue_delivery(make.delivery("a"))
    await store.claim_deliveries(make.at(0), lease_ms=5_000)
    assert [] == await store.claim_deliveries(make.at(4.999))


async def test_claimed_delivery_is_claimable_again_after_the_lease(store: Store, make) -> None:
    """A claimer that crashed before updating releases the delivery when its lease ends."""
    await store.enqueue_delivery(make.delivery("a"))
    await store.claim_deliveries(make.at(0), lease_ms=5_000)
    reclaimed = await store.claim_deliveries(make.at(5))
    assert ["a:oncall:fallback"] == [d.key for d in reclaimed]


async def test_concurrent_delivery_claimers_get_distinct_deliveries(store: Store, make) -> None:
    """10 concurrent claimers over 100 due deliveries claim each exactly once."""
    keys = []
    for i in range(100):
        d = make.delivery(f"cb-{i:03d}", due=i % 5)
        keys.append(d.key)
        await store.enqueue_delivery(d)
    batches = await asyncio.gather(*(store.claim_deliveries(make.at(10), limit=20) for _ in range(10)))
    assert sorted(keys) == sorted(d.key for batch in batches for d in batch)


async def test_recorded_outcome_is_stored_on_the_delivery(store: Store, make) -> None:
    """record_outcomes stores state, attempts, schedule, error and updated_at."""
    await store.enqueue_delivery(make.delivery("a"))
    updated = await record(
        store, "a:oncall:fallback", "pending", attempts=1, next_at=8, error="HTTP 503", at=1
    )
    found = await get_delivery(store, "a:oncall:fallback")
    assert ({"a:oncall:fallback"}, 1, "HTTP 503", make.at(8), make.at(1)) == (
        updated,
        found.attempts if found else None,
        found.last_error if found else None,
        found.next_attempt_at if found else None,
        found.updated_at if found else None,
    )


async def test_pending_outcome_reschedules_the_next_claim(store: Store, make) -> None:
    """A retried delivery is claimable at its new next_attempt_at and not before."""
    await store.enqueue_delivery(make.delivery("a"))
    await store.claim_deliveries(make.at(0))
    await record(store, "a:oncall:fallback", "pending", attempts=1, next_at=2, error="timeout", at=0.5)
    early = await store.claim_deliveries(make.at(1.999))
    due = await store.claim_deliveries(make.at(2))
    assert ([], ["a:oncall:fallback"]) == ([d.key for d in early], [d.key for d in due])


async def test_delivered_outcome_leaves_the_queue(store: Store, make) -> None:
    """A delivered delivery is never claimed again."""
    await store.enqueue_delivery(make.delivery("a"))
    await store.claim_deliveries(make.at(0))
    await record(store, "a:oncall:fallback", "delivered", attempts=1, next_at=0, error=None, at=0.1)
    assert [] == await store.claim_deliveries(make.at(1000))


async def test_cancelled_outcome_leaves_the_queue_and_reads_back(store: Store, make) -> None:
    """A delivery a gate refused (cancelled) is kept as cancelled and never claimed again, whether
    the outcome carries the claimed copy or not."""
    for callback_id, with_copy in (("a", True), ("b", False)):
        delivery = make.delivery(callback_id, "oncall", "escalation.1")
        await store.enqueue_delivery(delivery)
        [claimed] = await store.claim_deliveries(make.at(0))
        outcome = DeliveryOutcome(
            delivery.key, "cancelled", 0, make.at(1), None, make.at(1), claimed=claimed if with_copy else None
        )
        assert {delivery.key} == set((await store.record_outcomes([outcome])).keys)
        found = await get_delivery(store, delivery.key)
        assert ("cancelled", make.at(1)) == (
            found.state if found else None,
            found.updated_at if found else None,
        )
    assert [] == await store.claim_deliveries(make.at(1000))


async def test_failed_outcome_leaves_the_queue(store: Store, make) -> None:
    """A delivery marked failed (dead letter) is never claimed again."""
    await store.enqueue_delivery(make.delivery("a"))
    await record(store, "a:oncall:fallback", "failed", attempts=5, next_at=0, error="HTTP 404", at=1)
    assert [] == await store.claim_deliveries(make.at(1000))


async def test_outcome_of_an_unknown_delivery_updates_nothing(store: Store, make) -> None:
    """record_outcomes skips an unknown key and creates nothing."""
    updated = await record(store, "nope:x:notify", "delivered", attempts=1, next_at=0, error=None, at=0)
    assert (set(), None) == (updated, await get_delivery(store, "nope:x:notify"))
