"""PagerDuty pacing through the outbox (SPEC.md §16): at most 120 events in any 60 s per routing key,
the rest waiting in the store (not in memory) until their slot, none dropped, and no ``trigger``
after the ``resolve`` of its dedup_key.

A real Dispatcher over each store (SQLite in memory and in a file, the tests' own redis-server) drives
a real PagerDuty target against the Events API stand-in on 127.0.0.1, which answers 429 past 120 events
a minute as PagerDuty does. The controllable clock stands in for the minutes, so nothing waits one.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.service import DeliverySpec
from sentinel_hooks.delivery.dispatch import Dispatcher
from sentinel_hooks.delivery.targets.base import Message, TargetContext
from sentinel_hooks.delivery.targets.pagerduty import PACE_LIMIT, pace_key
from sentinel_hooks.store import Delivery, Store
from tests.contract import stores
from tests.delivery.conftest import MakeTarget, message
from tests.delivery.pagerduty_api import ROUTING_KEY, PagerDutyApi, pagerduty_api
from tests.delivery.test_pagerduty import spec

backend, store = stores.backend, stores.store
__all__ = ["backend", "pagerduty_api", "store"]


async def _dead(delivery: Delivery, error: str) -> None:
    raise AssertionError(f"{delivery.key} dead-lettered: {error}")


@pytest.fixture
def outbox(
    store: Store,
    clock: FakeClock,
    make_target: MakeTarget,
    pagerduty_api: PagerDutyApi,
    context: TargetContext,
) -> Dispatcher:
    """A Dispatcher over ``store`` with one target, ``page``, paging the stand-in."""
    target = make_target(spec(pagerduty_api), name="page", ctx=replace(context, store=store))
    return Dispatcher(
        store=store,
        clock=clock,
        targets={"page": target},
        spec=DeliverySpec(maxAttempts=3),
        dead_letter=_dead,
    )


async def enqueue(d: Dispatcher, clock: FakeClock, sent: Message) -> None:
    await d.enqueue(
        d.new_deliveries(
            sent, ["page"], "fallback" if sent.kind != "resolved" else "resolved", at=clock.now()
        )
    )


async def drain(d: Dispatcher) -> None:
    """Pass over the outbox until nothing is due at the clock's instant."""
    while await d.drain_due():
        pass


async def test_two_hundred_triggers_all_go_out_at_most_120_a_minute(
    outbox: Dispatcher, store: Store, clock: FakeClock, pagerduty_api: PagerDutyApi
) -> None:
    """A storm of 200 pages: 120 at once, the other 80 wait in the outbox for their slot and go out a
    minute later; PagerDuty never answers 429, nothing is dead-lettered, no attempt is spent waiting."""
    pagerduty_api.limit_per_minute, pagerduty_api.clock = PACE_LIMIT, clock
    d = outbox
    for n in range(200):
        await enqueue(d, clock, message(callback_id=f"cb{n:03d}", kind="fallback"))
    await drain(d)
    assert PACE_LIMIT == len(pagerduty_api.events)
    waiting = [x for x in await _all(store, 200) if x.state == "pending"]
    assert 80 == len(waiting)
    assert {0} == {x.attempts for x in waiting}  # the wait is not an attempt
    assert {clock.now() + timedelta(seconds=60)} == {x.next_attempt_at for x in waiting}
    clock.advance(59)
    await drain(d)
    assert PACE_LIMIT == len(pagerduty_api.events)  # nothing before its slot
    clock.advance(1)
    await drain(d)
    assert 200 == len(pagerduty_api.events)
    assert {f"cb{n:03d}" for n in range(200)} == {e["dedup_key"] for e in pagerduty_api.events}
    assert 0 == pagerduty_api.throttled
    assert pagerduty_api.most_in_a_minute() <= PACE_LIMIT
    assert {"delivered"} == {x.state for x in await _all(store, 200)}


async def test_a_queued_trigger_resolved_meanwhile_is_cancelled_not_sent(
    outbox: Dispatcher, store: Store, clock: FakeClock, pagerduty_api: PagerDutyApi
) -> None:
    """The window is full; a trigger waits for its slot; its fire resolves. The resolve goes out
    when a slot frees, and the trigger ends ``cancelled`` with the reason, never sent after it."""
    d = outbox
    for n in range(PACE_LIMIT):  # another storm filled the minute
        key, holder = pace_key(ROUTING_KEY), f"storm{n}"
        assert (
            await store.take_pace_slot(key, holder=holder, limit=PACE_LIMIT, window_ms=60_000, at=clock.now())
            is None
        )
    await enqueue(d, clock, message(callback_id="cbX", kind="fallback"))
    await drain(d)
    clock.advance(10)
    await enqueue(d, clock, message(callback_id="cbX", kind="resolved", text="Over."))
    await drain(d)
    assert [] == pagerduty_api.events
    clock.advance(50)
    await drain(d)
    assert [("resolve", "cbX")] == pagerduty_api.actions()
    by_kind = {x.kind: x for x in await store.list_deliveries("cbX")}
    assert "delivered" == by_kind["resolved"].state
    assert "cancelled" == by_kind["fallback"].state
    assert "its alert was resolved" in (by_kind["fallback"].last_error or "")
    clock.advance(120)
    await drain(d)
    assert [("resolve", "cbX")] == pagerduty_api.actions()


async def _all(store: Store, n: int) -> list[Delivery]:
    found: list[Delivery] = []
    for i in range(n):
        found += await store.list_deliveries(f"cb{i:03d}")
    return found
