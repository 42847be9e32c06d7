"""Store contract: the batched steps of the relay and the intake (``get_envelopes``,
``get_checkpoints``, ``trigger_priorities``, ``settle_contracts``, ``accept_contract``): each contract its own
compare-and-set, unknown records skipped."""

from __future__ import annotations

import asyncio

import pytest

from sentinel_hooks.store import Settlement, Store
from sentinel_hooks.store.shortcuts import get_checkpoint, get_envelope
from tests.contract import stores
from tests.contract.stores import create, due_contracts, opens_window, settle

backend, store, make = stores.backend, stores.store, stores.make


async def test_get_envelopes_returns_the_known_ones_by_id(store: Store, make) -> None:
    """Envelopes of existing contracts come back by callback id; unknown ids are left out."""
    for cid in ("a", "b"):
        await create(store, make.contract(cid), make.envelope(cid, payload={"n": [1, 2]}))
    found = await store.get_envelopes(["a", "nope", "b", "a"])
    assert {cid: make.envelope(cid, payload={"n": [1, 2]}) for cid in ("a", "b")} == found


async def test_get_envelopes_of_nothing_is_empty(store: Store) -> None:
    """An empty batch is an empty answer, not an error."""
    assert ({}, {}) == (await store.get_envelopes([]), await store.get_checkpoints([]))


async def test_get_contracts_returns_the_known_ones_by_id(store: Store, make) -> None:
    """Contracts come back by callback id as ``get_contract`` reads them; unknown ids are left
    out, an id asked twice is one entry, an empty batch is an empty answer."""
    ids = [f"cb-{i:04d}" for i in range(1_203)]  # more than SQLite's IN chunk
    await asyncio.gather(*(create(store, make.contract(cid)) for cid in ids))
    found = await store.get_contracts([*ids, "nope", ids[0]])
    assert sorted(found) == ids
    assert found[ids[7]] == await store.get_contract(ids[7])
    assert {} == await store.get_contracts([])


async def test_trigger_priorities_are_those_of_the_known_contracts(store: Store, make) -> None:
    """The distinct priorities the existing contracts among the ids fired with; unknown ids add
    nothing, an empty batch is an empty answer."""
    fired = {"cb-low": "low", "cb-high": "high", "cb-high-2": "high"}
    for cid, priority in fired.items():
        await create(store, make.contract(cid, priority=priority))
    assert {"low", "high"} == await store.trigger_priorities([*fired, "nope"])
    assert {"high"} == await store.trigger_priorities(["cb-high", "nope"])
    assert set() == await store.trigger_priorities(["nope"])
    assert set() == await store.trigger_priorities([])


async def test_get_checkpoints_returns_the_existing_ones(store: Store) -> None:
    """Checkpoints come back by key; keys without one are left out."""
    await store.put_checkpoint("escalation:a", {"severity": "critical"})
    await store.put_checkpoint("escalation:c", {"severity": "info"})
    found = await store.get_checkpoints(["escalation:a", "escalation:b", "escalation:c"])
    assert {"escalation:a": {"severity": "critical"}, "escalation:c": {"severity": "info"}} == found


async def test_get_envelopes_reads_more_than_one_chunk(store: Store, make) -> None:
    """A batch larger than any internal chunk (SQLite's IN lists) is read whole."""
    ids = [f"cb-{i:04d}" for i in range(1_203)]
    await asyncio.gather(
        *(create(store, make.contract(cid), make.envelope(cid, payload={"i": cid})) for cid in ids)
    )
    found = await store.get_envelopes(ids)
    assert {cid: make.envelope(cid, payload={"i": cid}) for cid in ids} == found


async def test_settle_contracts_settles_each_pending_one(store: Store, make) -> None:
    """Every pending contract of the batch moves to its state, with settled_at and deliveries."""
    for cid in ("a", "b"):
        await create(store, make.contract(cid))
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
    assert [] == await due_contracts(store, make.at(100))


async def test_settle_contracts_leaves_settled_and_unknown_ones_alone(store: Store, make) -> None:
    """A contract that is not pending (or does not exist) is skipped with its deliveries."""
    await create(store, make.contract("done"))
    await create(store, make.contract("open"))
    await settle(store, "done", "fulfilled", at=make.at(5))
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
    await create(store, make.contract("a"))
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
        await create(store, make.contract(cid))
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
    await create(store, make.contract("a"))
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


async def test_accept_contract_stores_a_pending_contract_its_envelope_and_checkpoints(
    store: Store, make
) -> None:
    """A fresh callback: pending contract (claimable at its deadline), envelope, checkpoints."""
    pending = make.contract("a", deadline=30)
    stored = await store.accept_contract(
        pending,
        make.envelope("a", payload={"e": 1}),
        dedupe_key="dedupe:k",
        dedupe_ttl_ms=60_000,
        checkpoints={"message:a": {"t": "x"}},
    )
    assert (pending, pending) == (stored, await store.get_contract("a"))
    assert (make.envelope("a", payload={"e": 1}), {"t": "x"}) == (
        await get_envelope(store, "a"),
        await get_checkpoint(store, "message:a"),
    )
    assert ["a"] == [c.callback_id for c in await due_contracts(store, make.at(30))]


async def test_accept_contract_inside_the_window_is_deduped(store: Store, make) -> None:
    """A second callback with a live dedupe key is stored deduped, without its checkpoints."""
    await store.accept_contract(
        make.contract("a"), make.envelope(), dedupe_key="dedupe:k", dedupe_ttl_ms=60_000
    )
    second = make.contract("b", created=10, deadline=40)
    stored = await store.accept_contract(
        second,
        make.envelope(),
        dedupe_key="dedupe:k",
        dedupe_ttl_ms=60_000,
        checkpoints={"message:b": {"t": "x"}},
    )
    assert stored is not None
    assert ("deduped", make.at(10)) == (stored.state, stored.settled_at)
    assert stored == await store.get_contract("b")
    assert await get_checkpoint(store, "message:b") is None
    assert ["a"] == [c.callback_id for c in await due_contracts(store, make.at(100))]
    page = await store.list_contracts(state="deduped")
    assert ["b"] == [c.callback_id for c in page.items]


async def test_accept_contract_after_the_window_is_pending_again(store: Store, make) -> None:
    """Once the window has passed, the same dedupe key opens a new one."""
    await store.accept_contract(
        make.contract("a"), make.envelope(), dedupe_key="dedupe:k", dedupe_ttl_ms=1_000
    )
    stored = await store.accept_contract(
        make.contract("b", created=2, deadline=40),
        make.envelope(),
        dedupe_key="dedupe:k",
        dedupe_ttl_ms=1_000,
    )
    assert stored is not None
    assert "pending" == stored.state
    assert not await opens_window(store, "dedupe:k", ttl_ms=1_000, now=make.at(2.5))


async def test_accept_contract_keeps_one_window_per_key(store: Store, make) -> None:
    """A key set by one callback's accept dedupes another's, whatever their other fields."""
    assert await opens_window(store, "dedupe:k", ttl_ms=60_000, now=make.at(0))
    stored = await store.accept_contract(
        make.contract("a"), make.envelope(), dedupe_key="dedupe:k", dedupe_ttl_ms=60_000
    )
    assert stored is not None
    assert "deduped" == stored.state


async def test_accept_contract_without_a_key_skips_the_window(store: Store, make) -> None:
    """No dedupe key: pending whatever keys are live."""
    stored = await store.accept_contract(make.contract("a"), make.envelope())
    assert stored is not None
    assert "pending" == stored.state


async def test_accept_contract_refuses_an_existing_id_and_writes_nothing(store: Store, make) -> None:
    """A replayed callback id: None, the first contract kept, its dedupe key not touched."""
    first = make.contract("a")
    await create(store, first, make.envelope("a", payload={"n": 1}))
    again = await store.accept_contract(
        make.contract("a", created=5, deadline=50),
        make.envelope("a", payload={"n": 2}),
        dedupe_key="dedupe:fresh",
        dedupe_ttl_ms=60_000,
        checkpoints={"message:a": {"t": "x"}},
    )
    kept = make.envelope("a", payload={"n": 1})
    assert (None, first, kept) == (again, await store.get_contract("a"), await get_envelope(store, "a"))
    assert await get_checkpoint(store, "message:a") is None
    assert await opens_window(store, "dedupe:fresh", ttl_ms=60_000, now=make.at(6))


async def test_racing_accepts_of_one_key_leave_exactly_one_pending(store: Store, make) -> None:
    """Concurrent callbacks with one dedupe key: one pending, the rest deduped."""
    contracts = [make.contract(f"cb-{i}") for i in range(20)]
    stored = await asyncio.gather(
        *(
            store.accept_contract(c, make.envelope(), dedupe_key="dedupe:k", dedupe_ttl_ms=60_000)
            for c in contracts
        )
    )
    states = sorted(s.state for s in stored if s is not None)
    assert ["deduped"] * 19 + ["pending"] == states


async def test_accept_contract_refuses_bad_arguments(store: Store, make) -> None:
    """A contract that is not pending, or a key without a positive window, is a ValueError."""
    with pytest.raises(ValueError, match="pending"):
        await store.accept_contract(make.contract("a", state="deduped"), make.envelope())
    with pytest.raises(ValueError, match="dedupe_ttl_ms"):
        await store.accept_contract(
            make.contract("a"), make.envelope(), dedupe_key="dedupe:k", dedupe_ttl_ms=0
        )
    assert await store.get_contract("a") is None
