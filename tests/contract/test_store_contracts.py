"""Store contract: response contracts, their listing, deadline claims and settlement."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from sentinel_hooks.store import InvalidCursor, Store
from sentinel_hooks.store.shortcuts import get_envelope
from tests.contract import stores
from tests.contract.stores import create, create_deduped, due_contracts, settle

backend, store, make = stores.backend, stores.store, stores.make


async def test_created_contract_reads_back_equal(store: Store, make) -> None:
    """A created contract is returned by get_contract exactly as written."""
    written = make.contract("cb-1")
    await create(store, written)
    assert written == await store.get_contract("cb-1")


async def test_accept_contract_returns_the_contract_for_a_new_id(store: Store, make) -> None:
    """Accepting a contract under an unused callback id returns it as stored."""
    assert make.contract("cb-1") == await store.accept_contract(make.contract("cb-1"), make.envelope())


async def test_accept_contract_refuses_an_existing_id_and_keeps_the_first(store: Store, make) -> None:
    """A second contract with the same callback id is refused and writes nothing."""
    await create(store, make.contract("cb-1", watcher_id="first"), make.envelope(payload={"n": 1}))
    refused = await create(store, make.contract("cb-1", watcher_id="second"), make.envelope(payload={"n": 2}))
    kept = await store.get_contract("cb-1")
    assert (False, "first", make.envelope(payload={"n": 1})) == (
        refused,
        kept.watcher_id if kept else None,
        await get_envelope(store, "cb-1"),
    )


async def test_accept_contract_enqueues_the_deliveries_it_brings(store: Store, make) -> None:
    """A pending contract's deliveries (its fan-out line) are in the outbox, due, after the one step."""
    wanted = [make.delivery("cb-1", "oncall", "fanout"), make.delivery("cb-1", "slack", "fanout")]
    await store.accept_contract(make.contract("cb-1"), make.envelope(), deliveries=wanted)
    claimed = await store.claim_deliveries(make.at(1))
    assert (sorted(wanted, key=lambda d: d.key), {d.key for d in wanted}) == (
        await store.list_deliveries("cb-1"),
        {d.key for d in claimed},
    )


async def test_a_refused_or_deduped_contract_enqueues_none_of_its_deliveries(store: Store, make) -> None:
    """A taken callback id writes nothing, and a deduped repeat sends no fan-out line."""
    await create(store, make.contract("cb-1"))
    await store.accept_contract(
        make.contract("cb-1"), make.envelope(), deliveries=[make.delivery("cb-1", "oncall", "fanout")]
    )
    key = "dedupe:same"
    await store.accept_contract(
        make.contract("cb-2"), make.envelope("cb-2"), dedupe_key=key, dedupe_ttl_ms=60_000
    )
    repeat = await store.accept_contract(
        make.contract("cb-3"),
        make.envelope("cb-3"),
        dedupe_key=key,
        dedupe_ttl_ms=60_000,
        deliveries=[make.delivery("cb-3", "oncall", "fanout")],
    )
    assert ("deduped", [], []) == (
        repeat.state if repeat else None,
        await store.list_deliveries("cb-1"),
        await store.list_deliveries("cb-3"),
    )


async def test_accept_contract_leaves_an_existing_delivery_key_untouched(store: Store, make) -> None:
    """Enqueueing through accept_contract is idempotent by delivery key, as every enqueue."""
    first = make.delivery("cb-1", "oncall", "fanout", due=1)
    await store.enqueue_delivery(first)
    again = make.delivery("cb-1", "oncall", "fanout", due=9)
    await store.accept_contract(make.contract("cb-1"), make.envelope(), deliveries=[again])
    assert [first] == await store.list_deliveries("cb-1")


async def test_envelope_reads_back_equal(store: Store, make) -> None:
    """The envelope stored with a contract comes back unchanged, nested values included."""
    envelope = make.envelope("cb-1", payload={"price": 1999.5, "tags": [], "ok": None})
    await create(store, make.contract("cb-1"), envelope)
    assert envelope == await get_envelope(store, "cb-1")


async def test_unknown_callback_has_no_contract_or_envelope(store: Store) -> None:
    """get_contract and get_envelope return None for an unknown callback id."""
    assert (None, None) == (await store.get_contract("nope"), await get_envelope(store, "nope"))


async def test_list_contracts_is_newest_first(store: Store, make) -> None:
    """Contracts are listed by created_at descending."""
    for i, cid in enumerate(["a", "b", "c"]):
        await create(store, make.contract(cid, created=i))
    page = await store.list_contracts()
    assert ["c", "b", "a"] == [c.callback_id for c in page.items]


async def test_listing_page_dumps_to_the_api_shape(store: Store, make) -> None:
    """A listing page serialises as {"items": [contract…], "nextCursor": …} with camelCase keys."""
    await create(store, make.contract("a", created=1))
    await create(store, make.contract("b", created=2))
    dumped = (await store.list_contracts(limit=1)).model_dump(mode="json", by_alias=True)
    assert (["items", "nextCursor"], "b", "2026-01-01T00:00:02.000Z", True) == (
        list(dumped),
        dumped["items"][0]["callbackId"],
        dumped["items"][0]["createdAt"],
        isinstance(dumped["nextCursor"], str),
    )


async def test_list_contracts_breaks_time_ties_by_callback_id_descending(store: Store, make) -> None:
    """Contracts created in the same millisecond are listed by callback id descending."""
    for cid in ["01A", "01C", "01B"]:
        await create(store, make.contract(cid, created=5))
    page = await store.list_contracts()
    assert ["01C", "01B", "01A"] == [c.callback_id for c in page.items]


async def test_list_contracts_filters_by_watcher(store: Store, make) -> None:
    """watcher_id keeps only that watcher's contracts."""
    await create(store, make.contract("a", watcher_id="w1"))
    await create(store, make.contract("b", watcher_id="w2"))
    page = await store.list_contracts(watcher_id="w2")
    assert ["b"] == [c.callback_id for c in page.items]


async def test_list_contracts_filters_by_state(store: Store, make) -> None:
    """state keeps only contracts in that state (deduped ones included when asked for)."""
    await create_deduped(store, make.contract("b"), holder=make.contract("a"))
    page = await store.list_contracts(state="deduped")
    assert ["b"] == [c.callback_id for c in page.items]


async def test_list_contracts_filters_by_watcher_and_state(store: Store, make) -> None:
    """Both filters together keep contracts matching both."""
    holder = make.contract("a", watcher_id="w1")
    await create_deduped(store, make.contract("b", watcher_id="w1"), holder=holder)
    await create_deduped(store, make.contract("c", watcher_id="w2"), holder=holder)
    page = await store.list_contracts(watcher_id="w1", state="deduped")
    assert ["b"] == [c.callback_id for c in page.items]


async def test_list_contracts_follows_a_settled_contract_to_its_new_state(store: Store, make) -> None:
    """After settling, a contract is listed under its final state and no longer as pending."""
    await create(store, make.contract("a", watcher_id="w1"))
    await settle(store, "a", "fulfilled", at=make.at(1))
    pending = await store.list_contracts(watcher_id="w1", state="pending")
    fulfilled = await store.list_contracts(watcher_id="w1", state="fulfilled")
    assert ([], ["a"]) == (pending.items, [c.callback_id for c in fulfilled.items])


async def test_list_contracts_cursor_pages_through_all_without_gaps_or_repeats(store: Store, make) -> None:
    """Following next_cursor with limit 3 visits 10 contracts (with time ties) once each."""
    expected = []
    for i in range(10):
        cid = f"cb-{i:02d}"
        await create(store, make.contract(cid, created=i // 3))
        expected.append(cid)
    seen, cursor = [], None
    while True:
        page = await store.list_contracts(limit=3, cursor=cursor)
        seen += [c.callback_id for c in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(expected, key=lambda c: (int(c[3:]) // 3, c), reverse=True) == seen


async def test_last_page_has_no_next_cursor(store: Store, make) -> None:
    """A page that holds the last item has next_cursor None."""
    await create(store, make.contract("a"))
    await create(store, make.contract("b"))
    page = await store.list_contracts(limit=2)
    assert page.next_cursor is None


async def test_list_contracts_refuses_a_cursor_it_did_not_issue(store: Store) -> None:
    """A malformed cursor raises InvalidCursor."""
    with pytest.raises(InvalidCursor):
        await store.list_contracts(cursor="not-a-cursor!")


async def test_claim_due_returns_pending_contracts_past_their_deadline(store: Store, make) -> None:
    """A pending contract whose deadline has passed is claimed."""
    await create(store, make.contract("a", deadline=30))
    claimed = await due_contracts(store, make.at(30))
    assert ["a"] == [c.callback_id for c in claimed]


async def test_claim_due_skips_contracts_not_yet_due(store: Store, make) -> None:
    """A contract whose deadline is after now is not claimed."""
    await create(store, make.contract("a", deadline=30))
    assert [] == await due_contracts(store, make.at(29.999))


async def test_claim_due_orders_by_deadline(store: Store, make) -> None:
    """Claimed contracts come earliest deadline first, whatever their creation order."""
    for cid, deadline in [("a", 20), ("b", 10), ("c", 15)]:
        await create(store, make.contract(cid, deadline=deadline))
    claimed = await due_contracts(store, make.at(60))
    assert ["b", "c", "a"] == [c.callback_id for c in claimed]


async def test_claim_due_takes_at_most_limit(store: Store, make) -> None:
    """limit caps how many contracts one claim returns; the rest stay claimable."""
    for i in range(5):
        await create(store, make.contract(f"cb-{i}", deadline=10 + i))
    first = await due_contracts(store, make.at(60), limit=2)
    rest = await due_contracts(store, make.at(60))
    assert (["cb-0", "cb-1"], ["cb-2", "cb-3", "cb-4"]) == (
        [c.callback_id for c in first],
        [c.callback_id for c in rest],
    )


async def test_claimed_contract_is_not_claimed_again_within_the_lease(store: Store, make) -> None:
    """A second claim before the lease ends gets nothing."""
    await create(store, make.contract("a", deadline=30))
    await due_contracts(store, make.at(30), lease_ms=10_000)
    assert [] == await due_contracts(store, make.at(39.999))


async def test_claimed_contract_is_claimable_again_when_the_lease_runs_out(store: Store, make) -> None:
    """A claimer that never settles releases the contract when its lease ends."""
    await create(store, make.contract("a", deadline=30))
    await due_contracts(store, make.at(30), lease_ms=10_000)
    reclaimed = await due_contracts(store, make.at(40))
    assert ["a"] == [c.callback_id for c in reclaimed]


async def test_settled_contract_is_never_claimed(store: Store, make) -> None:
    """Settling removes a contract from the deadline index."""
    await create(store, make.contract("a", deadline=30))
    await settle(store, "a", "fulfilled", at=make.at(5))
    assert [] == await due_contracts(store, make.at(100))


async def test_deduped_contract_is_never_claimed(store: Store, make) -> None:
    """A contract stored deduped has no deadline to claim."""
    await create_deduped(store, make.contract("a", deadline=30), holder=make.contract("h", deadline=500))
    assert [] == await due_contracts(store, make.at(100))


async def test_concurrent_claimers_each_get_distinct_contracts(store: Store, make) -> None:
    """20 concurrent claimers over 200 due contracts claim each exactly once."""
    for i in range(200):
        await create(store, make.contract(f"cb-{i:03d}", deadline=i % 7))
    batches = await asyncio.gather(*(due_contracts(store, make.at(60), limit=15) for _ in range(20)))
    claimed = [c.callback_id for batch in batches for c in batch]
    assert sorted(f"cb-{i:03d}" for i in range(200)) == sorted(claimed)


async def test_settle_moves_pending_to_the_final_state_with_settled_at(store: Store, make) -> None:
    """A successful settle returns True and records the state and settled_at."""
    await create(store, make.contract("a"))
    settled = await settle(store, "a", "fallback_sent", at=make.at(31))
    found = await store.get_contract("a")
    assert (True, "fallback_sent", make.at(31)) == (
        settled,
        found.state if found else None,
        found.settled_at if found else None,
    )


async def test_settle_refuses_a_contract_that_is_not_pending(store: Store, make) -> None:
    """Settling an already settled contract returns False and keeps the first outcome."""
    await create(store, make.contract("a"))
    await settle(store, "a", "fulfilled", at=make.at(5))
    second = await settle(store, "a", "fallback_sent", at=make.at(31))
    found = await store.get_contract("a")
    assert (False, "fulfilled", make.at(5)) == (
        second,
        found.state if found else None,
        found.settled_at if found else None,
    )


async def test_settle_refuses_an_unknown_contract(store: Store, make) -> None:
    """Settling a callback id that does not exist returns False."""
    assert await settle(store, "nope", "expired", at=make.at(1)) is False


async def test_settle_refuses_a_state_that_is_not_final(store: Store, make) -> None:
    """pending and deduped are not states a contract can be settled to."""
    await create(store, make.contract("a"))
    with pytest.raises(ValueError, match="deduped"):
        await settle(store, "a", "deduped", at=make.at(1))  # type: ignore[arg-type]


async def test_racing_settlers_produce_exactly_one_winner(store: Store, make) -> None:
    """Fulfilment racing the fallback (10 each, concurrently) yields one True, one final state."""
    await create(store, make.contract("a"))
    fallback = make.delivery("a", "oncall", "fallback")
    results = await asyncio.gather(
        *(settle(store, "a", "fulfilled", at=make.at(30)) for _ in range(10)),
        *(settle(store, "a", "fallback_sent", at=make.at(30), deliveries=[fallback]) for _ in range(10)),
    )
    found = await store.get_contract("a")
    winner = "fulfilled" if results.index(True) < 10 else "fallback_sent"
    assert (1, winner) == (results.count(True), found.state if found else None)


async def test_settle_enqueues_its_deliveries(store: Store, make) -> None:
    """The deliveries passed to a winning settle are in the outbox afterwards."""
    await create(store, make.contract("a"))
    wanted = [make.delivery("a", "oncall", "fallback"), make.delivery("a", "slack", "fallback")]
    await settle(store, "a", "fallback_sent", at=make.at(31), deliveries=wanted)
    assert sorted(wanted, key=lambda d: d.key) == await store.list_deliveries("a")


async def test_failed_settle_enqueues_nothing(store: Store, make) -> None:
    """A settle that loses the compare-and-set writes no deliveries."""
    await create(store, make.contract("a"))
    await settle(store, "a", "fulfilled", at=make.at(5))
    late = make.delivery("a", "oncall", "fallback")
    await settle(store, "a", "fallback_sent", at=make.at(31), deliveries=[late])
    assert [] == await store.list_deliveries("a")


async def test_settle_leaves_an_existing_delivery_key_untouched(store: Store, make) -> None:
    """Enqueueing through settle is idempotent by delivery key."""
    await create(store, make.contract("a"))
    first = make.delivery("a", "oncall", "fallback", due=1)
    await store.enqueue_delivery(first)
    again = make.delivery("a", "oncall", "fallback", due=9)
    await settle(store, "a", "fallback_sent", at=make.at(31), deliveries=[again])
    assert [first] == await store.list_deliveries("a")


async def test_claim_due_refuses_a_naive_now(store: Store) -> None:
    """A datetime without a timezone is refused with ValueError, not misread as UTC."""
    with pytest.raises(ValueError, match="timezone-aware"):
        await due_contracts(store, datetime(2026, 1, 1))


async def test_list_contracts_refuses_a_limit_below_one(store: Store) -> None:
    """limit=0 is a caller's bug and raises ValueError naming the argument."""
    with pytest.raises(ValueError, match="limit"):
        await store.list_contracts(limit=0)
