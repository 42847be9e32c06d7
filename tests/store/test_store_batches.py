"""Store contract: the batched steps of the relay and the outbox (``get_envelopes``,
``get_checkpoints``, ``settle_contracts``, ``update_deliveries``) keep the guarantees of the
single-record methods: each contract its own compare-and-set, unknown records skipped."""

from __future__ import annotations

import asyncio

import pytest

from sentinel_hooks.store import DeliveryOutcome, Settlement, Store


async def test_get_envelopes_returns_the_known_ones_by_id(store: Store, make) -> None:
    """Envelopes of existing contracts come back by callback id; unknown ids are left out."""
    for cid in ("a", "b"):
        await store.create_contract(make.contract(cid), {"callbackId": cid, "n": [1, 2]})
    found = await store.get_envelopes(["a", "nope", "b", "a"])
    assert {"a": {"callbackId": "a", "n": [1, 2]}, "b": {"callbackId": "b", "n": [1, 2]}} == found


async def test_get_envelopes_of_nothing_is_empty(store: Store) -> None:
    """An empty batch is an empty answer, not an error."""
    assert ({}, {}) == (await store.get_envelopes([]), await store.get_checkpoints([]))


async def test_get_checkpoints_returns_the_existing_ones(store: Store) -> None:
    """Checkpoints come back by key; keys without one are left out."""
    await store.put_checkpoint("escalation:a", {"severity": "critical"})
    await store.put_checkpoint("escalation:c", {"severity": "info"})
    found = await store.get_checkpoints(["escalation:a", "escalation:b", "escalation:c"])
    assert {"escalation:a": {"severity": "critical"}, "escalation:c": {"severity": "info"}} == found


async def test_get_envelopes_reads_more_than_one_chunk(store: Store, make) -> None:
    """A batch larger than any internal chunk (SQLite's IN lists) is read whole."""
    ids = [f"cb-{i:04d}" for i in range(1_203)]
    await asyncio.gather(*(store.create_contract(make.contract(cid), {"i": cid}) for cid in ids))
    found = await store.get_envelopes(ids)
    assert {cid: {"i": cid} for cid in ids} == found


async def test_settle_contracts_settles_each_pending_one(store: Store, make) -> None:
    """Every pending contract of the batch moves to its state, with settled_at and deliveries."""
    for cid in ("a", "b"):
        await store.create_contract(make.contract(cid), {})
    batch = [
        Settlement("a", "fallback_sent", (make.delivery("a"),)),
        Settlement("b", "expired"),
    ]
    won = await store.settle_contracts(batch, at=make.at(40))
    a, b = await store.get_contract("a"), await store.get_contract("b")
    assert a is not None
    assert b is not None
    assert {"a", "b"} == won
    assert ("fallback_sent", make.at(40), "expired") == (a.state, a.settled_at, b.state)
    assert [make.delivery("a")] == await store.list_deliveries("a")
    assert [] == await store.claim_due(make.at(100))


async def test_settle_contracts_leaves_settled_and_unknown_ones_alone(store: Store, make) -> None:
    """A contract that is not pending (or does not exist) is skipped with its deliveries."""
    await store.create_contract(make.contract("done"), {})
    await store.create_contract(make.contract("open"), {})
    await store.settle_contract("done", "fulfilled", at=make.at(5))
    batch = [
        Settlement("done", "fallback_sent", (make.delivery("done"),)),
        Settlement("ghost", "fallback_sent", (make.delivery("ghost"),)),
        Settlement("open", "fallback_sent", (make.delivery("open"),)),
    ]
    won = await store.settle_contracts(batch, at=make.at(40))
    done = await store.get_contract("done")
    assert {"open"} == won
    assert done is not None
    assert ("fulfilled", make.at(5)) == (done.state, done.settled_at)
    assert ([], [], None) == (
        await store.list_deliveries("done"),
        await store.list_deliveries("ghost"),
        await store.get_contract("ghost"),
    )
    assert [make.delivery("open")] == await store.list_deliveries("open")


async def test_settle_contracts_names_one_contract_twice_settles_it_once(store: Store, make) -> None:
    """The same id twice in a batch: the first settlement wins, the second changes nothing."""
    await store.create_contract(make.contract("a"), {})
    batch = [Settlement("a", "expired"), Settlement("a", "fallback_sent", (make.delivery("a"),))]
    assert {"a"} == await store.settle_contracts(batch, at=make.at(40))
    settled = await store.get_contract("a")
    assert settled is not None
    assert "expired" == settled.state
    assert [] == await store.list_deliveries("a")


async def test_racing_batches_settle_each_contract_exactly_once(store: Store, make) -> None:
    """Two settlers of overlapping batches: every contract is won by exactly one of them."""
    ids = [f"cb-{i}" for i in range(40)]
    for cid in ids:
        await store.create_contract(make.contract(cid), {})
    first = [Settlement(cid, "fallback_sent", (make.delivery(cid),)) for cid in ids]
    second = [Settlement(cid, "fulfilled") for cid in reversed(ids)]
    a, b = await asyncio.gather(
        store.settle_contracts(first, at=make.at(40)), store.settle_contracts(second, at=make.at(41))
    )
    assert (set(), set(ids)) == (a & b, a | b)
    for cid in ids:
        expected = [make.delivery(cid)] if cid in a else []
        assert expected == await store.list_deliveries(cid)


async def test_settle_contracts_refuses_a_state_that_is_not_final(store: Store, make) -> None:
    """One bad state refuses the whole batch before anything is written."""
    await store.create_contract(make.contract("a"), {})
    with pytest.raises(ValueError, match="cannot settle"):
        await store.settle_contracts(
            [Settlement("a", "expired"), Settlement("a", "pending")],  # type: ignore[arg-type]
            at=make.at(40),
        )
    still = await store.get_contract("a")
    assert still is not None
    assert "pending" == still.state


async def test_settle_contracts_of_nothing_is_nothing(store: Store, make) -> None:
    """An empty batch settles nothing."""
    assert set() == await store.settle_contracts([], at=make.at(40))


async def test_update_deliveries_records_each_outcome(store: Store, make) -> None:
    """Each known delivery gets its outcome; a delivered one leaves the queue, a retried one is
    due again at its next attempt; unknown keys are skipped."""
    sent, retried = make.delivery("a"), make.delivery("b")
    for d in (sent, retried):
        await store.enqueue_delivery(d)
    assert 2 == len(await store.claim_deliveries(make.at(1), lease_ms=60_000))
    outcomes = [
        DeliveryOutcome(sent.key, "delivered", 1, make.at(2), None, make.at(2)),
        DeliveryOutcome("ghost:oncall:fallback", "delivered", 1, make.at(2), None, make.at(2)),
        DeliveryOutcome(retried.key, "pending", 1, make.at(10), "503", make.at(2)),
    ]
    updated = await store.update_deliveries(outcomes)
    assert [(sent.key, "delivered", 1), (retried.key, "pending", 1)] == [
        (d.key, d.state, d.attempts) for d in updated
    ]
    assert updated == [await store.get_delivery(sent.key), await store.get_delivery(retried.key)]
    assert [] == await store.claim_deliveries(make.at(9))
    assert [retried.key] == [d.key for d in await store.claim_deliveries(make.at(10))]


async def test_update_deliveries_refuses_a_bad_state_and_writes_nothing(store: Store, make) -> None:
    """A state outside the contract refuses the batch."""
    d = make.delivery("a")
    await store.enqueue_delivery(d)
    bad = [
        DeliveryOutcome(d.key, "delivered", 1, make.at(2), None, make.at(2)),
        DeliveryOutcome(d.key, "lost", 1, make.at(2), None, make.at(2)),  # type: ignore[arg-type]
    ]
    with pytest.raises(ValueError, match="delivery state"):
        await store.update_deliveries(bad)
    assert d == await store.get_delivery(d.key)


async def test_accept_contract_stores_a_pending_contract_its_envelope_and_checkpoints(
    store: Store, make
) -> None:
    """A fresh callback: pending contract (claimable at its deadline), envelope, checkpoints."""
    pending = make.contract("a", deadline=30)
    stored = await store.accept_contract(
        pending, {"e": 1}, dedupe_key="dedupe:k", dedupe_ttl_ms=60_000, checkpoints={"message:a": {"t": "x"}}
    )
    assert (pending, pending) == (stored, await store.get_contract("a"))
    assert ({"e": 1}, {"t": "x"}) == (await store.get_envelope("a"), await store.get_checkpoint("message:a"))
    assert ["a"] == [c.callback_id for c in await store.claim_due(make.at(30))]


async def test_accept_contract_inside_the_window_is_deduped(store: Store, make) -> None:
    """A second callback with a live dedupe key is stored deduped, without its checkpoints."""
    await store.accept_contract(make.contract("a"), {}, dedupe_key="dedupe:k", dedupe_ttl_ms=60_000)
    second = make.contract("b", created=10, deadline=40)
    stored = await store.accept_contract(
        second, {}, dedupe_key="dedupe:k", dedupe_ttl_ms=60_000, checkpoints={"message:b": {"t": "x"}}
    )
    assert stored is not None
    assert ("deduped", make.at(10)) == (stored.state, stored.settled_at)
    assert stored == await store.get_contract("b")
    assert await store.get_checkpoint("message:b") is None
    assert ["a"] == [c.callback_id for c in await store.claim_due(make.at(100))]
    page = await store.list_contracts(state="deduped")
    assert ["b"] == [c.callback_id for c in page.items]


async def test_accept_contract_after_the_window_is_pending_again(store: Store, make) -> None:
    """Once the window has passed, the same dedupe key opens a new one."""
    await store.accept_contract(make.contract("a"), {}, dedupe_key="dedupe:k", dedupe_ttl_ms=1_000)
    stored = await store.accept_contract(
        make.contract("b", created=2, deadline=40), {}, dedupe_key="dedupe:k", dedupe_ttl_ms=1_000
    )
    assert stored is not None
    assert "pending" == stored.state
    assert not await store.add_dedupe("dedupe:k", ttl_ms=1_000, now=make.at(2.5))


async def test_accept_contract_shares_the_window_with_add_dedupe(store: Store, make) -> None:
    """A key set by add_dedupe dedupes an accepted contract, and the other way round."""
    assert await store.add_dedupe("dedupe:k", ttl_ms=60_000, now=make.at(0))
    stored = await store.accept_contract(make.contract("a"), {}, dedupe_key="dedupe:k", dedupe_ttl_ms=60_000)
    assert stored is not None
    assert "deduped" == stored.state


async def test_accept_contract_without_a_key_skips_the_window(store: Store, make) -> None:
    """No dedupe key: pending whatever keys are live."""
    stored = await store.accept_contract(make.contract("a"), {})
    assert stored is not None
    assert "pending" == stored.state


async def test_accept_contract_refuses_an_existing_id_and_writes_nothing(store: Store, make) -> None:
    """A replayed callback id: None, the first contract kept, its dedupe key not touched."""
    first = make.contract("a")
    await store.create_contract(first, {"n": 1})
    again = await store.accept_contract(
        make.contract("a", created=5, deadline=50),
        {"n": 2},
        dedupe_key="dedupe:fresh",
        dedupe_ttl_ms=60_000,
        checkpoints={"message:a": {"t": "x"}},
    )
    assert (None, first, {"n": 1}) == (again, await store.get_contract("a"), await store.get_envelope("a"))
    assert await store.get_checkpoint("message:a") is None
    assert await store.add_dedupe("dedupe:fresh", ttl_ms=60_000, now=make.at(6))


async def test_racing_accepts_of_one_key_leave_exactly_one_pending(store: Store, make) -> None:
    """Concurrent callbacks with one dedupe key: one pending, the rest deduped."""
    contracts = [make.contract(f"cb-{i}") for i in range(20)]
    stored = await asyncio.gather(
        *(store.accept_contract(c, {}, dedupe_key="dedupe:k", dedupe_ttl_ms=60_000) for c in contracts)
    )
    states = sorted(s.state for s in stored if s is not None)
    assert ["deduped"] * 19 + ["pending"] == states


async def test_accept_contract_refuses_bad_arguments(store: Store, make) -> None:
    """A contract that is not pending, or a key without a positive window, is a ValueError."""
    with pytest.raises(ValueError, match="pending"):
        await store.accept_contract(make.contract("a", state="deduped"), {})
    with pytest.raises(ValueError, match="dedupe_ttl_ms"):
        await store.accept_contract(make.contract("a"), {}, dedupe_key="dedupe:k", dedupe_ttl_ms=0)
    assert await store.get_contract("a") is None
