"""When the relay wakes: for the next deadline it knows of, including one that fell due while
a pass was settling (the last claim did not take it), not ``MAX_SLEEP_S`` later."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.service import DeliverySpec
from sentinel_hooks.delivery.dispatch import Dispatcher
from sentinel_hooks.relay.relay import BATCH_WINDOW_S, MAX_SLEEP_S, Relay
from sentinel_hooks.store import Delivery, Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def _nowhere(delivery: Delivery, error: str) -> None:
    """Dead letters have nowhere to go in these tests (nothing is sent)."""


def _relay(clock: FakeClock, store: Store) -> Relay:
    """A relay over an open, empty store (its dispatcher is never started)."""
    dispatcher = Dispatcher(store=store, clock=clock, targets={}, spec=DeliverySpec(), dead_letter=_nowhere)
    return Relay(store=store, clock=clock, dispatcher=dispatcher)


async def test_a_deadline_that_fell_due_during_a_pass_is_woken_for_after_the_batch_window(
    memory_store: Store,
) -> None:
    """A deadline between the pass's claim and its end keeps the next sleep short."""
    clock = FakeClock(T0)
    relay = _relay(clock, memory_store)
    relay.expect(T0 + timedelta(milliseconds=5))
    await relay.settle_due()  # claims what is due at T0: nothing yet
    clock.advance(0.03)  # the pass took 30 ms; the deadline at T0 + 5 ms is now overdue
    assert BATCH_WINDOW_S == relay.next_wait_s()


async def test_with_no_deadline_ahead_the_relay_sleeps_at_most_max_sleep(memory_store: Store) -> None:
    """Deadlines the last claim covered are forgotten; with none left it sleeps MAX_SLEEP_S."""
    clock = FakeClock(T0)
    relay = _relay(clock, memory_store)
    relay.expect(T0)
    await relay.settle_due()
    assert MAX_SLEEP_S == relay.next_wait_s()


async def test_the_relay_sleeps_until_the_next_deadline(memory_store: Store) -> None:
    """A deadline ahead sets the sleep (bounded by MAX_SLEEP_S)."""
    clock = FakeClock(T0)
    relay = _relay(clock, memory_store)
    relay.expect(T0 + timedelta(milliseconds=300))
    assert 0.3 == relay.next_wait_s()
