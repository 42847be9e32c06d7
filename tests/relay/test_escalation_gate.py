"""The outbox's escalation gate on a real store and a fake clock: the next step is queued before a
step is sent, a closed item's step is cancelled, and racing outboxes send each step once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.service import DeliverySpec, ServiceConfig
from sentinel_hooks.delivery.dispatch import Dispatcher
from sentinel_hooks.delivery.targets.recording import RecordingTarget
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.relay.escalation import Escalations
from sentinel_hooks.store import Delivery, Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CONFIG = ServiceConfig.model_validate(
    {
        "targets": {"a": {"type": "console"}, "b": {"type": "console"}},
        "escalationPolicies": {
            "p": {"steps": [{"afterMs": 0, "targets": ["a"]}, {"afterMs": 1000, "targets": ["b"]}]},
        },
        "defaultEscalationPolicy": "p",
    }
)


async def _nowhere(delivery: Delivery, error: str) -> None:
    raise AssertionError(f"no delivery should fail here: {delivery.key}: {error}")


def parts(store: Store, clock: FakeClock, target: RecordingTarget) -> tuple[Inbox, Escalations, Dispatcher]:
    escalations = Escalations(store=store, clock=clock, service=CONFIG, watcher=lambda _: None)
    dispatcher = Dispatcher(
        store=store,
        clock=clock,
        targets={"a": target, "b": target},
        spec=DeliverySpec(),
        dead_letter=_nowhere,
        gate=escalations,
    )
    return Inbox(store, clock, plan=escalations.first_step), escalations, dispatcher


async def states(store: Store, item_id: str) -> dict[str, str]:
    return {d.kind: d.state for d in await store.list_deliveries(item_id)}


async def test_the_next_step_is_queued_when_a_step_is_sent(memory_store: Store) -> None:
    """Step 0 goes out at once with step 1 queued for its time; step 1 goes out then, once."""
    clock, target = FakeClock(T0), RecordingTarget()
    inbox, _, dispatcher = parts(memory_store, clock, target)
    item = await inbox.create("escalation", severity="warning", reason="disk full")
    assert {"escalation.0": "pending"} == await states(memory_store, item.id)
    assert 1 == await dispatcher.drain_due()
    assert {"escalation.0": "delivered", "escalation.1": "pending"} == await states(memory_store, item.id)
    clock.advance(0.999)
    assert 0 == await dispatcher.drain_due()
    clock.advance(0.001)
    assert 1 == await dispatcher.drain_due()
    assert [f"{item.id}:a:escalation.0", f"{item.id}:b:escalation.1"] == [
        s.idempotency_key for s in target.sent
    ]


async def test_a_step_of_a_closed_item_is_cancelled_and_ends_the_chain(memory_store: Store) -> None:
    """Acked before step 1 is due: step 1 is recorded cancelled, never sent, and nothing follows."""
    clock, target = FakeClock(T0), RecordingTarget()
    inbox, _, dispatcher = parts(memory_store, clock, target)
    item = await inbox.create("escalation", severity="warning", reason="disk full")
    await dispatcher.drain_due()
    await inbox.ack(item.id, actor="ana")
    clock.advance(5)
    await dispatcher.drain_due()
    assert {"escalation.0": "delivered", "escalation.1": "cancelled"} == await states(memory_store, item.id)
    assert 1 == len(target.sent)


async def test_admitting_a_step_twice_queues_the_next_once(memory_store: Store) -> None:
    """A step claimed again after a crash (admitted a second time) adds no second next step."""
    clock = FakeClock(T0)
    inbox, escalations, _ = parts(memory_store, clock, RecordingTarget())
    item = await inbox.create("escalation", severity="warning", reason="disk full")
    [step_0] = await memory_store.list_deliveries(item.id)
    assert [True, True] == [await escalations.admit(step_0), await escalations.admit(step_0)]
    assert ["escalation.0", "escalation.1"] == [d.kind for d in await memory_store.list_deliveries(item.id)]


async def test_racing_outboxes_send_each_step_once(memory_store: Store) -> None:
    """Four dispatchers drain the same store at every tick: 20 items, each step sent exactly once."""
    clock, target = FakeClock(T0), RecordingTarget()
    inbox, _, _ = parts(memory_store, clock, target)
    dispatchers = [parts(memory_store, clock, target)[2] for _ in range(4)]
    items = [await inbox.create("escalation", severity="warning", reason=f"disk {n}") for n in range(20)]
    for _ in range(4):
        await asyncio.gather(*(d.drain_due() for d in dispatchers))
        clock.advance(0.5)
    keys = sorted(s.idempotency_key for s in target.sent)
    assert sorted(f"{i.id}:{t}:escalation.{n}" for i in items for t, n in (("a", 0), ("b", 1))) == keys
