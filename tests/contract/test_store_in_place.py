"""Store contract: the relay's and the outbox's cheap steps (``claim_due`` with the envelopes,
``settle_contracts`` given the claimed contracts, ``record_outcomes``) store exactly what reading
and rewriting the records would, and keep their compare-and-set and ordering guarantees."""

from __future__ import annotations

import pytest

from sentinel_hooks.store import Delivery, DeliveryOutcome, Settlement, Store
from sentinel_hooks.store.records import apply_outcome, settle
from tests.contract import stores
from tests.contract.stores import create, due_contracts, get_delivery
from tests.contract.stores import settle as settle_one

backend, store, make = stores.backend, stores.store, stores.make


async def test_claim_due_returns_each_claimed_contract_with_its_envelope(store: Store, make) -> None:
    """Due contracts come in deadline order, each with its envelope; later ones stay pending."""
    for cid, deadline in (("b", 20), ("a", 10), ("later", 90)):
        await create(store, make.contract(cid, deadline=deadline), make.envelope(cid, payload={"n": [1]}))
    claimed = await store.claim_due(make.at(30), lease_ms=1_000)
    assert [
        (make.contract("a", deadline=10), make.envelope("a", payload={"n": [1]})),
        (make.contract("b", deadline=20), make.envelope("b", payload={"n": [1]})),
    ] == claimed


async def test_a_claim_with_envelopes_keeps_its_lease(store: Store, make) -> None:
    """A contract claimed with its envelope is hidden from claims until its lease ends."""
    await create(store, make.contract("a", deadline=10))
    assert 1 == len(await store.claim_due(make.at(10), lease_ms=5_000))
    assert [] == await store.claim_due(make.at(14.9))
    assert ["a"] == [c.callback_id for c, _ in await store.claim_due(make.at(15))]


async def test_settle_contracts_from_claimed_copies_stores_the_settled_records(store: Store, make) -> None:
    """Given the claimed contracts, each is settled (record, indexes, deliveries) as if read."""
    for cid in ("a", "b"):
        await create(store, make.contract(cid, watcher_id="w"))
    a, b = await due_contracts(store, make.at(30))
    batch = [
        Settlement("a", "fallback_sent", (make.delivery("a"),), claimed=a),
        Settlement("b", "expired", claimed=b),
    ]
    assert {"a", "b"} == await store.settle_contracts(batch, at=make.at(40.0007))
    assert [settle(a, "fallback_sent", at=make.at(40)), settle(b, "expired", at=make.at(40))] == [
        await store.get_contract("a"),
        await store.get_contract("b"),
    ]
    pending = await store.list_contracts(watcher_id="w", state="pending")
    sent = await store.list_contracts(watcher_id="w", state="fallback_sent")
    assert ([], ["a"]) == ([c.callback_id for c in pending.items], [c.callback_id for c in sent.items])
    assert ([make.delivery("a")], [], []) == (
        await store.list_deliveries("a"),
        await store.list_deliveries("b"),
        await due_contracts(store, make.at(100)),
    )


async def test_settle_contracts_with_a_claimed_copy_still_compares_and_sets(store: Store, make) -> None:
    """A contract fulfilled since it was claimed is left alone, its fallback not enqueued."""
    await create(store, make.contract("a"))
    (claimed,) = await due_contracts(store, make.at(30))
    assert await settle_one(store, "a", "fulfilled", at=make.at(31))
    batch = [Settlement("a", "fallback_sent", (make.delivery("a"),), claimed=claimed)]
    assert set() == await store.settle_contracts(batch, at=make.at(32))
    assert (settle(claimed, "fulfilled", at=make.at(31)), []) == (
        await store.get_contract("a"),
        await store.list_deliveries("a"),
    )


async def test_settle_contracts_refuses_a_claimed_copy_of_another_contract(store: Store, make) -> None:
    """A settlement whose claimed copy is not its pending contract refuses the batch."""
    for cid in ("a", "b"):
        await create(store, make.contract(cid))
    with pytest.raises(ValueError, match="claimed"):
        await store.settle_contracts(
            [Settlement("a", "expired"), Settlement("b", "expired", claimed=make.contract("a"))],
            at=make.at(40),
        )
    assert ["pending", "pending"] == [(await store.get_contract(cid)).state for cid in ("a", "b")]  # type: ignore[union-attr]


async def _claimed(store: Store, make, *cids: str) -> list[Delivery]:
    for cid in cids:
        await store.enqueue_delivery(make.delivery(cid))
    return await store.claim_deliveries(make.at(1), lease_ms=60_000)


async def test_record_outcomes_writes_each_outcome_and_returns_the_keys(store: Store, make) -> None:
    """Each known delivery gets its outcome (from its claimed copy); delivered leaves the queue,
    a retry is due again at its next attempt; unknown keys are skipped."""
    sent, retried = await _claimed(store, make, "a", "b")
    error = 'HTTP 503: "busy" — retry\n\\later'
    outcomes = [
        DeliveryOutcome(sent.key, "delivered", 1, make.at(2), None, make.at(2), claimed=sent),
        DeliveryOutcome("ghost:oncall:fallback", "delivered", 1, make.at(2), None, make.at(2)),
        DeliveryOutcome(retried.key, "pending", 1, make.at(10.0004), error, make.at(2.5), claimed=retried),
    ]
    assert {sent.key, retried.key} == (await store.record_outcomes(outcomes)).keys
    assert [apply_outcome(sent, outcomes[0]), apply_outcome(retried, outcomes[2])] == [
        await get_delivery(store, sent.key),
        await get_delivery(store, retried.key),
    ]
    assert [] == await store.claim_deliveries(make.at(9.999))
    assert [retried.key] == [d.key for d in await store.claim_deliveries(make.at(10))]


async def test_record_outcomes_without_claimed_copies_reads_the_records(store: Store, make) -> None:
    """Outcomes without a claimed copy are applied to the stored records."""
    (sent,) = await _claimed(store, make, "a")
    outcome = DeliveryOutcome(sent.key, "failed", 5, make.at(3), "gone", make.at(3))
    assert {sent.key} == (await store.record_outcomes([outcome])).keys
    assert apply_outcome(sent, outcome) == await get_delivery(store, sent.key)


async def test_record_outcomes_applies_one_key_s_outcomes_in_order(store: Store, make) -> None:
    """Two outcomes of one delivery in a batch: the later one is what stays."""
    (d,) = await _claimed(store, make, "a")
    first = DeliveryOutcome(d.key, "pending", 1, make.at(5), "503", make.at(2), claimed=d)
    second = DeliveryOutcome(d.key, "delivered", 2, make.at(6), None, make.at(6))
    assert {d.key} == (await store.record_outcomes([first, second])).keys
    assert apply_outcome(apply_outcome(d, first), second) == await get_delivery(store, d.key)
    assert [] == await store.claim_deliveries(make.at(100))


async def test_record_outcomes_of_nothing_is_nothing(store: Store) -> None:
    """An empty batch records nothing."""
    assert set() == (await store.record_outcomes([])).keys


@pytest.mark.parametrize(
    ("flaw", "says"), [("state", "delivery state"), ("claimed copy", "carries the claimed")]
)
async def test_record_outcomes_refuses_a_bad_outcome_and_writes_nothing(
    store: Store, make, flaw: str, says: str
) -> None:
    """A state outside the contract, or a claimed copy of another delivery, refuses the batch."""
    d, other = await _claimed(store, make, "a", "b")
    good = DeliveryOutcome(d.key, "delivered", 1, make.at(2), None, make.at(2), claimed=d)
    if flaw == "state":
        bad = DeliveryOutcome(d.key, "lost", 1, make.at(2), None, make.at(2))  # type: ignore[arg-type]
    else:
        bad = DeliveryOutcome(d.key, "delivered", 1, make.at(2), None, make.at(2), claimed=other)
    with pytest.raises(ValueError, match=says):
        await store.record_outcomes([good, bad])
    assert d == await get_delivery(store, d.key)
