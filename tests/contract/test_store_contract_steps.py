"""Store contract: the steps of the response contract's state machine (``contract_states``),
each one atomic, on every backend: a notify handed to delivery, its deliveries' final outcomes,
an approval's pause and decision."""

from __future__ import annotations

import asyncio

from sentinel_hooks.store import Store
from sentinel_hooks.store.records import DeliveryOutcome, Moved
from tests.contract import stores
from tests.contract.stores import Make, create, due_contracts, settle

backend, store, make = stores.backend, stores.store, stores.make


def outcome(make: Make, key: str, state: str, at: float) -> DeliveryOutcome:
    return DeliveryOutcome(key, state, 1, make.at(at), None, make.at(at))  # type: ignore[arg-type]


async def state_of(store: Store, callback_id: str = "a") -> str:
    found = await store.get_contract(callback_id)
    assert found is not None
    return found.state


async def test_a_notify_makes_a_pending_contract_notifying_and_enqueues_its_deliveries(
    store: Store, make: Make
) -> None:
    """pending → notifying; the deliveries are in the outbox; the contract leaves the deadline index."""
    await create(store, make.contract("a", deadline=30))
    deliveries = [make.delivery("a", "oncall", "notify"), make.delivery("a", "log", "notify")]
    start = await store.begin_notify("a", deliveries, at=make.at(5))
    assert start is not None
    assert ("pending", "notifying", True) == (start.before, start.after, start.accepted)
    assert {d.key for d in deliveries} == start.inserted
    assert "notifying" == await state_of(store)
    assert [] == await due_contracts(store, make.at(60))
    assert 2 == len(await store.list_deliveries("a"))
    assert ["a"] == [c.callback_id for c in (await store.list_contracts(state="notifying")).items]
    assert [] == (await store.list_contracts(state="pending")).items


async def test_a_notify_tried_again_enqueues_nothing_new(store: Store, make: Make) -> None:
    """The same deliveries again (a resumed session's retry) are left as they are."""
    await create(store, make.contract("a"))
    deliveries = [make.delivery("a", "oncall", "notify")]
    await store.begin_notify("a", deliveries, at=make.at(1))
    again = await store.begin_notify("a", deliveries, at=make.at(2))
    assert again is not None
    assert ("notifying", "notifying", frozenset()) == (again.before, again.after, again.inserted)


async def test_a_page_candidate_after_the_fallback_is_refused_and_enqueues_nothing(
    store: Store, make: Make
) -> None:
    """fallback_sent (and expired, deduped) refuse a notify as a page: nothing reaches the outbox."""
    await create(store, make.contract("a"))
    await settle(store, "a", "fallback_sent", at=make.at(30))
    start = await store.begin_notify("a", [make.delivery("a", "oncall", "notify")], at=make.at(31))
    assert start is not None
    assert (False, "fallback_sent") == (start.accepted, start.after)
    assert [] == await store.list_deliveries("a")
    assert await store.begin_notify("nope", [], at=make.at(1)) is None


async def test_a_fulfilled_contract_takes_follow_up_notifies(store: Store, make: Make) -> None:
    """After the agent's answer was delivered, more notifies are follow-ups: refused as a page,
    accepted as a follow-up, the contract still fulfilled (SPEC §6.4)."""
    await create(store, make.contract("a"))
    first = make.delivery("a", "oncall", "notify")
    await store.begin_notify("a", [first], at=make.at(1))
    await store.record_outcomes([outcome(make, first.key, "delivered", 2)])
    second = make.delivery("a", "oncall", "notify.2")
    as_page = await store.begin_notify("a", [second], at=make.at(3))
    start = await store.begin_notify("a", [second], at=make.at(3), follow_up=True)
    assert as_page is not None
    assert start is not None
    assert (False, "fulfilled", "fulfilled", True) == (
        as_page.accepted,
        start.before,
        start.after,
        start.accepted,
    )
    assert {"notify", "notify.2"} == {d.kind for d in await store.list_deliveries("a")}


async def test_a_follow_up_of_the_fallback_is_taken_and_leaves_the_contract(store: Store, make: Make) -> None:
    """After the fallback, a follow-up is enqueued and the contract stays fallback_sent; an open
    contract with nothing in flight refuses a follow-up (it would be its page); an expired one
    (nobody was paged) takes it as a follow-up too (SPEC §6.4: never refused)."""
    await create(store, make.contract("a"))
    await create(store, make.contract("b"))
    await create(store, make.contract("c"))
    await settle(store, "a", "fallback_sent", at=make.at(30))
    await settle(store, "c", "expired", at=make.at(30))
    started = [
        await store.begin_notify(
            cid, [make.delivery(cid, "oncall", "notify")], at=make.at(31), follow_up=True
        )
        for cid in ("a", "b", "c")
    ]
    assert [(True, "fallback_sent"), (False, "pending"), (True, "expired")] == [
        (s.accepted, s.after) for s in started if s is not None
    ]
    kinds = [[d.kind for d in await store.list_deliveries(cid)] for cid in ("a", "b", "c")]
    assert [["notify"], [], ["notify"]] == kinds


async def test_a_delivered_notify_fulfils_the_contract_when_the_target_accepted(
    store: Store, make: Make
) -> None:
    """The outcome write moves the contract: fulfilled, settled when the target accepted it."""
    await create(store, make.contract("a", deadline=30))
    sent = make.delivery("a", "oncall", "notify")
    await store.begin_notify("a", [sent], at=make.at(1))
    recorded = await store.record_outcomes([outcome(make, sent.key, "delivered", 40)])
    assert ({sent.key}, {"a": "fulfilled"}) == (set(recorded.keys), recorded.moved)
    found = await store.get_contract("a")
    assert found is not None
    assert ("fulfilled", make.at(40)) == (found.state, found.settled_at)


async def test_a_retry_outcome_leaves_the_contract_notifying(store: Store, make: Make) -> None:
    """A failed attempt that will be retried changes nothing about the contract."""
    await create(store, make.contract("a"))
    sent = make.delivery("a", "oncall", "notify")
    await store.begin_notify("a", [sent], at=make.at(1))
    recorded = await store.record_outcomes([outcome(make, sent.key, "pending", 2)])
    assert {} == recorded.moved
    assert "notifying" == await state_of(store)


async def test_a_notify_that_failed_for_good_returns_the_contract_to_pending_due_at_its_deadline(
    store: Store, make: Make
) -> None:
    """Every delivery failed: pending again, due at its deadline (at once when that has passed)."""
    await create(store, make.contract("a", deadline=30))
    one, two = make.delivery("a", "oncall", "notify"), make.delivery("a", "log", "notify")
    await store.begin_notify("a", [one, two], at=make.at(1))
    first = await store.record_outcomes([outcome(make, one.key, "failed", 2)])
    assert ({}, "notifying") == (first.moved, await state_of(store))
    second = await store.record_outcomes([outcome(make, two.key, "failed", 3)])
    assert {"a": "pending"} == second.moved
    assert [] == await due_contracts(store, make.at(29))
    assert ["a"] == [c.callback_id for c in await due_contracts(store, make.at(30))]


async def test_one_target_accepting_is_enough_when_the_other_fails(store: Store, make: Make) -> None:
    """One delivered, one failed for good, in one batch: fulfilled."""
    await create(store, make.contract("a"))
    one, two = make.delivery("a", "oncall", "notify"), make.delivery("a", "log", "notify")
    await store.begin_notify("a", [one, two], at=make.at(1))
    await store.record_outcomes([outcome(make, one.key, "failed", 2), outcome(make, two.key, "delivered", 2)])
    assert "fulfilled" == await state_of(store)


async def test_a_later_notify_still_in_flight_keeps_the_contract_notifying(store: Store, make: Make) -> None:
    """notify failed for good while notify.2 (a follow-up: a page candidate was in flight) may
    still succeed: no fallback yet."""
    await create(store, make.contract("a"))
    first, second = make.delivery("a", "oncall", "notify"), make.delivery("a", "oncall", "notify.2")
    await store.begin_notify("a", [first], at=make.at(1))
    await store.begin_notify("a", [second], at=make.at(2), follow_up=True)
    await store.record_outcomes([outcome(make, first.key, "failed", 3)])
    assert "notifying" == await state_of(store)
    await store.record_outcomes([outcome(make, second.key, "delivered", 4)])
    assert "fulfilled" == await state_of(store)


async def test_a_second_page_candidate_while_one_is_in_flight_is_refused(store: Store, make: Make) -> None:
    """The page is decided in the store (SPEC §6.4): while notify is in flight (``notifying``, or
    ``awaiting_approval`` with it pending) notify.2 is refused as a page and taken as a follow-up;
    once notify failed for good (``pending`` again) the next notify is a page candidate again."""
    await create(store, make.contract("a"))
    first, second = make.delivery("a", "oncall", "notify"), make.delivery("a", "oncall", "notify.2")
    await store.begin_notify("a", [first], at=make.at(1))
    as_page = await store.begin_notify("a", [second], at=make.at(2))
    assert as_page is not None
    assert (False, "notifying") == (as_page.accepted, as_page.after)
    await store.pause_contract("a")
    as_page = await store.begin_notify("a", [second], at=make.at(2))
    as_follow_up = await store.begin_notify("a", [second], at=make.at(2), follow_up=True)
    assert as_page is not None
    assert as_follow_up is not None
    assert (False, True) == (as_page.accepted, as_follow_up.accepted)
    await store.record_outcomes(
        [outcome(make, first.key, "failed", 3), outcome(make, second.key, "failed", 3)]
    )
    third = make.delivery("a", "oncall", "notify.3")
    as_follow_up = await store.begin_notify("a", [third], at=make.at(4), follow_up=True)
    as_page = await store.begin_notify("a", [third], at=make.at(4))
    assert as_page is not None
    assert as_follow_up is not None
    assert (False, True) == (as_follow_up.accepted, as_page.accepted)


async def test_an_outcome_recorded_twice_moves_the_contract_once(store: Store, make: Make) -> None:
    """The second write of a final outcome finds the delivery final already: nothing moves."""
    await create(store, make.contract("a"))
    sent = make.delivery("a", "oncall", "notify")
    await store.begin_notify("a", [sent], at=make.at(1))
    await store.record_outcomes([outcome(make, sent.key, "failed", 2)])
    again = await store.record_outcomes([outcome(make, sent.key, "failed", 3)])
    assert {} == again.moved


async def test_fallback_outcomes_never_move_a_contract(store: Store, make: Make) -> None:
    """Only the agent's notifies move contracts."""
    await create(store, make.contract("a"))
    fallback = make.delivery("a", "oncall", "fallback")
    await settle(store, "a", "fallback_sent", at=make.at(30), deliveries=[fallback])
    recorded = await store.record_outcomes([outcome(make, fallback.key, "delivered", 31)])
    assert ({fallback.key}, {}) == (set(recorded.keys), recorded.moved)


async def test_outcomes_with_their_claimed_copies_move_contracts_too(store: Store, make: Make) -> None:
    """The in-place write path (an outcome carrying the delivery as claimed) applies the same
    rule as rewriting the record (no way around it)."""
    await create(store, make.contract("a"))
    await store.begin_notify("a", [make.delivery("a", "oncall", "notify")], at=make.at(1))
    (claimed,) = await store.claim_deliveries(make.at(1))
    done = DeliveryOutcome(claimed.key, "delivered", 1, make.at(2), None, make.at(2), claimed=claimed)
    recorded = await store.record_outcomes([done])
    assert ({"a": "fulfilled"}, "fulfilled") == (recorded.moved, await state_of(store))


async def test_an_approval_pauses_the_deadline_and_its_decision_gives_a_new_one(
    store: Store, make: Make
) -> None:
    """awaiting_approval is never claimed; after the decision it is pending with the new deadline."""
    await create(store, make.contract("a", deadline=30))
    assert Moved("pending", "awaiting_approval") == await store.pause_contract("a")
    assert [] == await due_contracts(store, make.at(100))
    assert ["a"] == [c.callback_id for c in (await store.list_contracts(state="awaiting_approval")).items]
    assert Moved("awaiting_approval", "pending") == await store.resume_contract("a", deadline=make.at(130))
    found = await store.get_contract("a")
    assert found is not None
    assert ("pending", make.at(130)) == (found.state, found.deadline)
    assert [] == await due_contracts(store, make.at(129))
    assert ["a"] == [c.callback_id for c in await due_contracts(store, make.at(130))]


async def test_a_decision_while_a_notify_is_in_flight_leaves_the_contract_notifying(
    store: Store, make: Make
) -> None:
    """notifying → awaiting_approval → notifying (with the new deadline), never pending meanwhile."""
    await create(store, make.contract("a", deadline=30))
    sent = make.delivery("a", "oncall", "notify")
    await store.begin_notify("a", [sent], at=make.at(1))
    assert Moved("notifying", "awaiting_approval") == await store.pause_contract("a")
    await store.record_outcomes([outcome(make, sent.key, "pending", 2)])
    assert Moved("awaiting_approval", "notifying") == await store.resume_contract("a", deadline=make.at(60))
    await store.record_outcomes([outcome(make, sent.key, "failed", 3)])
    assert "pending" == await state_of(store)
    assert ["a"] == [c.callback_id for c in await due_contracts(store, make.at(60))]


async def test_a_notify_failing_during_an_approval_keeps_it_paused(store: Store, make: Make) -> None:
    """The approval request reached people: no fallback while it is open."""
    await create(store, make.contract("a", deadline=30))
    sent = make.delivery("a", "oncall", "notify")
    await store.begin_notify("a", [sent], at=make.at(1))
    await store.pause_contract("a")
    await store.record_outcomes([outcome(make, sent.key, "failed", 2)])
    assert "awaiting_approval" == await state_of(store)


async def test_pause_and_resume_leave_settled_contracts_alone(store: Store, make: Make) -> None:
    """A fulfilled contract stays fulfilled through an approval; unknown ids give None."""
    await create(store, make.contract("a"))
    await settle(store, "a", "fulfilled", at=make.at(1))
    assert Moved("fulfilled", "fulfilled") == await store.pause_contract("a")
    assert Moved("fulfilled", "fulfilled") == await store.resume_contract("a", deadline=make.at(60))
    assert await store.pause_contract("nope") is None
    assert await store.resume_contract("nope", deadline=make.at(60)) is None


async def test_a_notify_racing_the_relay_yields_one_outcome(store: Store, make: Make) -> None:
    """At the deadline, a notify and the fallback race: exactly one of them wins."""
    await create(store, make.contract("a", deadline=30))
    claimed = await due_contracts(store, make.at(30))
    assert ["a"] == [c.callback_id for c in claimed]
    fallback = make.delivery("a", "oncall", "fallback")
    start, settled = await asyncio.gather(
        store.begin_notify("a", [make.delivery("a", "oncall", "notify")], at=make.at(30)),
        settle(store, "a", "fallback_sent", at=make.at(30), deliveries=[fallback]),
    )
    assert start is not None
    assert start.accepted != settled
    kinds = {d.kind for d in await store.list_deliveries("a")}
    assert kinds in ({"notify"}, {"fallback"})
