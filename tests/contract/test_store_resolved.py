"""Store contract: a fire its source reports over before its page settles ``resolved`` (SPEC.md
§6.4), in one atomic step with its resolved line, on every backend."""

from __future__ import annotations

import asyncio

from sentinel_hooks.store import Store
from sentinel_hooks.store.records import DeliveryOutcome
from tests.contract import stores
from tests.contract.stores import Make, create, due_contracts, settle

backend, store, make = stores.backend, stores.store, stores.make


async def test_a_pending_contract_resolves_with_its_line_in_one_step(store: Store, make: Make) -> None:
    """pending → resolved, settled then, out of the deadline index; the resolved line is enqueued."""
    await create(store, make.contract("a", deadline=30))
    line = make.delivery("a", "oncall", "resolved")
    moved = await store.resolve_contract("a", [line], at=make.at(12))
    assert moved is not None
    assert ("pending", "resolved") == (moved.before, moved.after)
    found = await store.get_contract("a")
    assert found is not None
    assert ("resolved", make.at(12)) == (found.state, found.settled_at)
    assert [] == await due_contracts(store, make.at(60))
    assert [line.key] == [d.key for d in await store.list_deliveries("a")]
    assert ["a"] == [c.callback_id for c in (await store.list_contracts(state="resolved")).items]
    assert [] == (await store.list_contracts(state="pending")).items


async def test_a_notifying_contract_is_past_its_page(store: Store, make: Make) -> None:
    """notifying (the agent's message handed over as the page, maybe on the wire already) is left
    alone and nothing is enqueued: settling ``resolved`` now could page people twice."""
    await create(store, make.contract("a"))
    await store.begin_notify("a", [make.delivery("a", "oncall", "notify")], at=make.at(1))
    moved = await store.resolve_contract("a", [make.delivery("a", "oncall", "resolved")], at=make.at(2))
    assert moved is not None
    assert ("notifying", "notifying") == (moved.before, moved.after)
    assert ["notify"] == [d.kind for d in await store.list_deliveries("a")]


async def test_the_agents_page_accepted_after_a_refused_resolution_fulfils(store: Store, make: Make) -> None:
    """The resolution refused while notifying, the agent's message accepted later is the page."""
    await create(store, make.contract("a"))
    notify = make.delivery("a", "oncall", "notify")
    await store.begin_notify("a", [notify], at=make.at(1))
    await store.resolve_contract("a", [], at=make.at(2))
    await store.record_outcomes([DeliveryOutcome(notify.key, "delivered", 1, make.at(3), None, make.at(3))])
    assert "fulfilled" == (await store.get_contract("a") or make.contract("x")).state


async def test_a_resolved_contract_refuses_a_notify(store: Store, make: Make) -> None:
    """After ``resolved`` the session's notify is refused and nothing reaches the outbox."""
    await create(store, make.contract("a"))
    await store.resolve_contract("a", [], at=make.at(2))
    start = await store.begin_notify("a", [make.delivery("a", "oncall", "notify")], at=make.at(3))
    assert start is not None
    assert (False, "resolved") == (start.accepted, start.after)
    assert [] == await store.list_deliveries("a")


async def test_after_the_page_a_resolution_leaves_the_contract_and_enqueues_nothing(
    store: Store, make: Make
) -> None:
    """fulfilled, fallback_sent, expired and an open approval are left as they are; unknown: None."""
    for cid, state in (("f", "fallback_sent"), ("e", "expired")):
        await create(store, make.contract(cid))
        await settle(store, cid, state, at=make.at(30))
    await create(store, make.contract("w"))
    await store.pause_contract("w")
    for cid, state in (("f", "fallback_sent"), ("e", "expired"), ("w", "awaiting_approval")):
        moved = await store.resolve_contract(cid, [make.delivery(cid, "oncall", "resolved")], at=make.at(31))
        assert moved is not None
        assert (state, state) == (moved.before, moved.after)
        assert not [d for d in await store.list_deliveries(cid) if d.kind == "resolved"]
    assert await store.resolve_contract("nope", [], at=make.at(1)) is None


async def test_a_resolution_racing_the_deadline_yields_one_outcome(store: Store, make: Make) -> None:
    """At the deadline the fallback and the resolution race: exactly one of them settles it."""
    await create(store, make.contract("a", deadline=30))
    await due_contracts(store, make.at(30))
    fallback = make.delivery("a", "oncall", "fallback")
    moved, settled = await asyncio.gather(
        store.resolve_contract("a", [make.delivery("a", "oncall", "resolved")], at=make.at(30)),
        settle(store, "a", "fallback_sent", at=make.at(30), deliveries=[fallback]),
    )
    assert moved is not None
    assert (moved.after == "resolved") != settled
    kinds = {d.kind for d in await store.list_deliveries("a")}
    assert kinds == ({"resolved"} if moved.after == "resolved" else {"fallback"})
