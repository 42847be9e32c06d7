"""Store contract: open/close/ping, durability across reopen, and several store objects sharing
one backend (the stand-in for several processes or replicas)."""

from __future__ import annotations

import asyncio

import pytest

from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store import Observation, Store
from sentinel_hooks.store.shortcuts import (
    get_checkpoint,
    get_envelope,
    get_watcher_state,
    last_observation,
    put_watcher_state,
)
from tests.contract import stores
from tests.contract.stores import create, due_contracts, get_delivery, opens_window, settle

backend, durable_backend, store, make = stores.backend, stores.durable_backend, stores.store, stores.make


async def test_open_store_satisfies_the_protocol(store: Store) -> None:
    """Every backend is a structural Store."""
    assert isinstance(store, Store)


async def test_ping_succeeds_on_an_open_store(store: Store) -> None:
    """ping returns None when the backend answers."""
    assert await store.ping() is None


async def test_calls_before_open_raise_store_unavailable(backend) -> None:
    """A store that was never opened refuses calls with StoreUnavailable."""
    unopened = backend.make()
    with pytest.raises(StoreUnavailable, match="open"):
        await get_watcher_state(unopened, "w")


async def test_calls_after_close_raise_store_unavailable(backend) -> None:
    """A closed store refuses calls with StoreUnavailable."""
    closed = backend.make()
    await closed.open()
    await closed.close()
    with pytest.raises(StoreUnavailable):
        await closed.ping()


async def test_close_twice_is_harmless(backend) -> None:
    """close is idempotent."""
    opened = backend.make()
    await opened.open()
    await opened.close()
    assert await opened.close() is None


async def test_everything_survives_close_and_reopen(durable_backend, make) -> None:
    """After closing and reopening, every kind of record is as it was."""
    first = durable_backend.make()
    await first.open()
    await put_watcher_state(first, "w", {"fires": 3})
    await first.write_watcher_batch([("w", Observation(at=make.at(1), value={"p": 1}))], {})
    await create(first, make.contract("a"))
    await first.create_inbox_item(make.inbox_item("i-1"))
    await first.append_transcript("s", [{"role": "user"}], at=make.at(1))
    await first.put_checkpoint("s", {"afterSeq": 1})
    await first.enqueue_delivery(make.delivery("a"))
    await opens_window(first, "dk", ttl_ms=60_000, now=make.at(0))
    await first.close()

    second = durable_backend.make()
    await second.open()
    try:
        found = (
            await get_watcher_state(second, "w"),
            await last_observation(second, "w"),
            await second.get_contract("a"),
            await get_envelope(second, "a"),
            await second.get_inbox_item("i-1"),
            len(await second.inbox_history("i-1")),
            [e.entry for e in await second.get_transcript("s")],
            await get_checkpoint(second, "s"),
            await get_delivery(second, "a:oncall:fallback"),
            await opens_window(second, "dk", ttl_ms=60_000, now=make.at(1)),
        )
    finally:
        await second.close()
    assert (
        {"fires": 3},
        Observation(at=make.at(1), value={"p": 1}),
        make.contract("a"),
        make.envelope("a"),
        make.inbox_item("i-1"),
        1,
        [{"role": "user"}],
        {"afterSeq": 1},
        make.delivery("a"),
        False,
    ) == found


async def test_overdue_contract_is_claimable_after_reopen(durable_backend, make) -> None:
    """Deadlines live in the store: a contract that fell due while closed is claimed on start."""
    first = durable_backend.make()
    await first.open()
    await create(first, make.contract("a", deadline=30))
    await first.close()
    second = durable_backend.make()
    await second.open()
    try:
        claimed = await due_contracts(second, make.at(3600))
    finally:
        await second.close()
    assert ["a"] == [c.callback_id for c in claimed]


async def test_two_store_objects_never_claim_the_same_contract(durable_backend, make) -> None:
    """Two stores on the same data (two processes / replicas) claim 100 contracts disjointly."""
    one, two = durable_backend.make(), durable_backend.make()
    await one.open()
    await two.open()
    try:
        for i in range(100):
            await create(one, make.contract(f"cb-{i:03d}", deadline=i % 3))
        batches = await asyncio.gather(*(due_contracts(s, make.at(10), limit=10) for s in [one, two] * 10))
    finally:
        await one.close()
        await two.close()
    claimed = sorted(c.callback_id for batch in batches for c in batch)
    assert [f"cb-{i:03d}" for i in range(100)] == claimed


async def test_two_store_objects_settle_a_contract_once(durable_backend, make) -> None:
    """Settlers on two store objects racing for one contract produce exactly one winner."""
    one, two = durable_backend.make(), durable_backend.make()
    await one.open()
    await two.open()
    try:
        await create(one, make.contract("a"))
        results = await asyncio.gather(*(settle(s, "a", "fulfilled", at=make.at(1)) for s in [one, two] * 5))
    finally:
        await one.close()
        await two.close()
    assert 1 == results.count(True)
