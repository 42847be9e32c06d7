"""The relay hands its fallbacks to the outbox in-process: stored held by this process, started at
once on slots the outbox promised, never claimed back (so never sent twice), and only as many as
the outbox has free slots for; the rest stay due for the worker's claim."""

from __future__ import annotations

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.service import DeliverySpec
from sentinel_hooks.delivery.dispatch import CONCURRENCY, Dispatcher
from sentinel_hooks.delivery.targets.recording import RecordingTarget
from sentinel_hooks.relay.relay import Relay
from sentinel_hooks.store import Delivery, Store
from tests.contract import stores
from tests.contract.stores import create
from tests.support import wait_for

backend, store, make = stores.backend, stores.store, stores.make


async def _nowhere(delivery: Delivery, error: str) -> None:
    """No dead letters here: the recording target accepts everything."""


def _parts(store: Store, make: stores.Make) -> tuple[FakeClock, RecordingTarget, Dispatcher, Relay]:
    """A relay and its dispatcher (the worker never started) over ``store``, at 31 s after T0
    (past the builders' 30 s deadline), sending to a recording ``oncall`` target."""
    clock, target = FakeClock(make.at(31)), RecordingTarget()
    dispatcher = Dispatcher(
        store=store, clock=clock, targets={"oncall": target}, spec=DeliverySpec(), dead_letter=_nowhere
    )
    return clock, target, dispatcher, Relay(store=store, clock=clock, dispatcher=dispatcher)


async def test_a_pass_sends_its_fallback_itself_and_leaves_nothing_to_claim(store: Store, make) -> None:
    """The fallback goes out from the relay's pass (no worker runs) and is recorded delivered; it
    was never due for a claim, so no worker here or on another replica could send it again."""
    clock, target, _, relay = _parts(store, make)
    await create(store, make.contract("cb-1"))
    assert 1 == await relay.settle_due()
    assert [] == await store.claim_deliveries(clock.now())  # held while its send runs
    await wait_for(lambda: len(target.sent) == 1, what="the fallback sent by the pass")

    async def recorded() -> bool:
        return [d.state for d in await store.list_deliveries("cb-1")] == ["delivered"]

    await wait_for(recorded, what="its outcome recorded")
    [stored] = await store.list_deliveries("cb-1")
    assert ("cb-1:oncall:fallback", "delivered", 1) == (stored.key, stored.state, stored.attempts)
    assert ["cb-1:oncall:fallback"] == [sent.idempotency_key for sent in target.sent]


async def test_fallbacks_past_the_free_slots_stay_due_for_the_claim(store: Store, make) -> None:
    """With every slot but one promised elsewhere, one fallback of two is started by the pass and
    the other is stored due now, for the worker's claim (none waits out a lease unsent)."""
    clock, target, dispatcher, relay = _parts(store, make)
    assert CONCURRENCY - 1 == dispatcher.reserve(CONCURRENCY - 1)
    for callback_id in ("cb-1", "cb-2"):
        await create(store, make.contract(callback_id))
    assert 2 == await relay.settle_due()
    due = await store.claim_deliveries(clock.now())
    await wait_for(lambda: len(target.sent) == 1, what="the one fallback the pass had a slot for")
    assert {"cb-1:oncall:fallback", "cb-2:oncall:fallback"} == {
        *(sent.idempotency_key for sent in target.sent),
        *(d.key for d in due),
    }
    assert 1 == len(due)
