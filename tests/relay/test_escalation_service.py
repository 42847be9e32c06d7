"""Escalation policies in a running service (SPEC §15): each step of an open inbox item reaches a
real webhook receiver once, in order and on time, and closing the item stops the chain."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from sentinel_hooks.clock import SystemClock
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import InboxItem
from tests.service.test_api import call
from tests.support import Sink, wait_for

LATE_S = 1.0  # SPEC §15: a step goes out at most 1 s after it is due while the service runs

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0, publicUrl: "https://sentinel.example.com/"}}
allowedHosts: ["127.0.0.1"]
notificationPayloadMode: none
targets:
  first: {{type: webhook, url: "{url}/first"}}
  second: {{type: webhook, url: "{url}/second"}}
  third: {{type: webhook, url: "{url}/third"}}
escalationPolicies:
  chain:
    steps:
      - {{afterMs: 0, targets: [first]}}
      - {{afterMs: 700, targets: [second]}}
      - {{afterMs: 1400, targets: [third, first]}}
  nag:
    steps: [{{afterMs: 300, targets: [first]}}]
    repeatAfterMs: 60000
defaultEscalationPolicy: chain
"""
WATCHERS = {
    "w": "id: w\nstrategy: webhook\ndeliveryTargets: [first]\n",
    "nagged": "id: nagged\nstrategy: webhook\ndeliveryTargets: [first]\nescalationPolicy: nag\n",
}


class JumpClock(SystemClock):
    """The wall clock plus an offset the test moves forward, so a one-minute ``repeatAfterMs`` (the
    §15 floor) falls due at once; the relay and dispatcher poll at least every 0.5 s, so they see
    the jump without being woken."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return super().now() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


class TimedSink(Sink):
    """A webhook receiver recording when each request arrived (on the service's clock, like the
    item's time)."""

    def __init__(self, clock: JumpClock) -> None:
        super().__init__()
        self.clock = clock

    async def _record(self, request: web.Request) -> web.StreamResponse:
        response = await super()._record(request)
        self.received[-1]["at"] = self.clock.now()
        return response

    def keys(self) -> list[str]:
        return [r["headers"]["Idempotency-Key"] for r in self.received]

    def at(self, key: str) -> datetime:
        return next(r["at"] for r in self.received if r["headers"]["Idempotency-Key"] == key)


@pytest.fixture
def clock() -> JumpClock:
    return JumpClock()


@pytest.fixture
async def sink(clock: JumpClock) -> AsyncIterator[TimedSink]:
    server = TimedSink(clock)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def service(tmp_path: Path, sink: TimedSink, clock: JumpClock) -> AsyncIterator[Service]:
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(url=sink.url("").rstrip("/")))
    (tmp_path / "watchers").mkdir()
    for name, text in WATCHERS.items():
        (tmp_path / "watchers" / f"{name}.yaml").write_text(text)
    started = Service(load_config(tmp_path / "sentinel.yaml", environ={}), clock=clock)
    await started.start()
    yield started
    await started.stop()


Create = Callable[..., Awaitable[InboxItem]]


@pytest.fixture
def create(service: Service) -> Create:
    async def make(kind: Any = "escalation", watcher_id: str = "w") -> InboxItem:
        return await service.inbox.create(
            kind, severity="critical", reason="vault health low", watcher_id=watcher_id
        )

    return make


def lateness_s(sink: TimedSink, item: InboxItem, key: str, after_ms: int) -> float:
    return (sink.at(key) - (item.created_at + timedelta(milliseconds=after_ms))).total_seconds()


async def test_steps_arrive_in_order_and_on_time(service: Service, sink: TimedSink, create: Create) -> None:
    """Three steps (0, 0.7 s, 1.4 s) arrive once each, no earlier than due and at most 1 s late."""
    item = await create()
    expected = [f"{item.id}:first:escalation.0", f"{item.id}:second:escalation.1"]
    expected += [f"{item.id}:third:escalation.2", f"{item.id}:first:escalation.2"]
    await wait_for(lambda: len(sink.received) >= 4, timeout_s=10, what="four step deliveries")
    assert sorted(expected) == sorted(sink.keys())
    assert expected[:2] == sink.keys()[:2]
    for key, after_ms in zip(expected, (0, 700, 1400, 1400), strict=True):
        assert -0.002 <= lateness_s(sink, item, key, after_ms) <= LATE_S, key


async def test_step_texts_say_how_long_and_link_the_item(
    service: Service, sink: TimedSink, create: Create
) -> None:
    """Every step, the first included, says how long the item has been open, names it with the
    command that acks it, and links it (SPEC §15)."""
    item = await create()
    await wait_for(lambda: len(sink.received) >= 2, timeout_s=10, what="two steps")
    first, second = (b["message"] for b in sink.bodies()[:2])
    link = f"https://sentinel.example.com/#inbox/{item.id}"
    assert (
        f"Unacknowledged for 0s: vault health low (escalation, critical, watcher w) — "
        f"ack: sentinel inbox ack {item.id}\n{link}"
    ) == first
    assert (
        f"Unacknowledged for 0.7s: vault health low (escalation, critical, watcher w) — "
        f"ack: sentinel inbox ack {item.id}\n{link}"
    ) == second


async def test_ack_between_steps_stops_the_rest(service: Service, sink: TimedSink, create: Create) -> None:
    """Acked after step 1: step 2 is cancelled when it comes due, never sent, and the API shows
    the chain stopped at step 1."""
    item = await create()
    await wait_for(lambda: len(sink.received) >= 2, timeout_s=10, what="steps 0 and 1")
    status, _ = await call(service, "POST", f"/api/v1/inbox/{item.id}/ack", body={})
    assert 200 == status
    step_2 = f"{item.id}:third:escalation.2"
    await wait_for(lambda: cancelled(service, item.id, step_2), timeout_s=5, what="step 2 cancelled")
    assert 2 == len(sink.received)
    _, shown = await call(service, "GET", f"/api/v1/inbox/{item.id}")
    assert {"policy": "chain", "step": 1, "nextStep": None, "nextAt": None} == shown["item"]["escalation"]


async def test_an_open_item_shows_the_step_reached_and_the_next(
    service: Service, sink: TimedSink, create: Create
) -> None:
    """While open, the list and the item show the last step sent and when the next goes out."""
    item = await create()
    await wait_for(lambda: len(sink.received) >= 1, timeout_s=10, what="step 0")
    due = item.created_at + timedelta(milliseconds=700)
    expected = {"policy": "chain", "step": 0, "nextStep": 1, "nextAt": due.isoformat(timespec="milliseconds")}
    expected["nextAt"] = expected["nextAt"].replace("+00:00", "Z")
    _, listed = await call(service, "GET", "/api/v1/inbox?status=open")
    _, shown = await call(service, "GET", f"/api/v1/inbox/{item.id}")
    assert [expected, expected] == [listed["items"][0]["escalation"], shown["item"]["escalation"]]


@pytest.mark.parametrize("decision", ["approve", "deny", "expire"])
async def test_a_decided_approval_stops_its_chain(
    service: Service, sink: TimedSink, create: Create, decision: str
) -> None:
    """Approve, deny or expiry after step 0 cancels step 1; step 0 said how to approve or deny."""
    item = await create("approval")
    await wait_for(lambda: len(sink.received) >= 1, timeout_s=10, what="step 0")
    await getattr(service.inbox, decision)(item.id, actor="ana")
    await wait_for(
        lambda: cancelled(service, item.id, f"{item.id}:second:escalation.1"),
        timeout_s=5,
        what="step 1 cancelled",
    )
    assert [f"{item.id}:first:escalation.0"] == sink.keys()
    assert f"— approve: sentinel approvals approve {item.id}" in sink.bodies()[0]["message"]


async def test_repeat_after_ms_starts_the_steps_over_while_open(
    service: Service, sink: TimedSink, create: Create, clock: JumpClock
) -> None:
    """One step at 0.3 s repeated a minute after itself (the §15 floor): steps 0, 1, 2 at 0.3, 60.3
    and 120.3 s on the service's clock (moved a minute on after each step), then the ack ends it."""
    item = await create(watcher_id="nagged")
    keys = [f"{item.id}:first:escalation.{n}" for n in range(3)]
    for rounds in range(1, 4):
        await wait_for(lambda n=rounds: len(sink.received) >= n, timeout_s=10, what=f"round {rounds}")
        assert keys[:rounds] == sink.keys()
        if rounds < 3:
            clock.advance(60)
    await service.inbox.ack(item.id, actor="ana")
    for key, after_ms in zip(keys, (300, 60_300, 120_300), strict=True):
        assert -0.002 <= lateness_s(sink, item, key, after_ms) <= LATE_S, key
    sent = len(sink.received)
    pending = [d for d in await service.store.list_deliveries(item.id) if d.state == "pending"]
    assert len(pending) == 1  # the next round, which the gate cancels when it falls due
    clock.advance(60)
    await wait_for(lambda: cancelled(service, item.id, pending[0].key), timeout_s=5, what="the next round")
    assert sent == len(sink.received)


async def test_steps_sent_are_counted_by_policy_and_step(
    service: Service, sink: TimedSink, create: Create
) -> None:
    """sentinel_escalation_steps_sent counts accepted step deliveries by policy and policy step."""
    await create()
    await wait_for(lambda: len(sink.received) >= 4, timeout_s=10, what="every step")
    expected = [
        'sentinel_escalation_steps_sent_total{policy="chain",step="2"} 2.0',
        'sentinel_escalation_steps_sent_total{policy="chain",step="1"} 1.0',
    ]
    # a step is counted once its send returned, a moment after the receiver has it
    await wait_for(
        lambda: all(line in service.metrics.render().decode() for line in expected),
        timeout_s=5,
        what="the steps counted",
    )


async def cancelled(service: Service, item_id: str, key: str) -> bool:
    return any(d.key == key and d.state == "cancelled" for d in await service.store.list_deliveries(item_id))
