"""Two Services on one Redis share escalation deadlines: both run the outbox, yet every step of
every item reaches the receiver exactly once and on time, and a chain goes on when the replica
that created its item stops (SPEC §15)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import InboxItem
from tests.cluster.conftest import SERVICE_LEASE_MS, stop_all
from tests.support import Sink, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

ITEMS = 12
AFTER_MS = (0, 800, 1600)

CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
cluster: {{leaseMs: {lease_ms}}}
notificationPayloadMode: none
targets:
  pager: {{type: webhook, url: "{url}"}}
escalationPolicies:
  chain:
    steps:
      - {{afterMs: 0, targets: [pager]}}
      - {{afterMs: 800, targets: [pager]}}
      - {{afterMs: 1600, targets: [pager]}}
defaultEscalationPolicy: chain
"""


class TimedSink(Sink):
    async def _record(self, request: web.Request) -> web.StreamResponse:
        response = await super()._record(request)
        self.received[-1]["at"] = datetime.now(UTC)
        return response

    def keys(self) -> Counter[str]:
        return Counter(r["headers"]["Idempotency-Key"] for r in self.received)


@pytest.fixture
async def sink() -> AsyncIterator[TimedSink]:
    server = TimedSink()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def replicas(tmp_path: Path, redis_url: str, sink: TimedSink) -> AsyncIterator[list[Service]]:
    """Two started services on the test Redis, one project."""
    text = CONFIG.format(store=redis_url, lease_ms=SERVICE_LEASE_MS, url=sink.url("/pager"))
    (tmp_path / "sentinel.yaml").write_text(text)
    (tmp_path / "watchers").mkdir()
    started: list[Service] = []
    for _ in range(2):
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
        started.append(service)
        await service.start()
    yield started
    await stop_all(started)


async def create(service: Service, n: int) -> InboxItem:
    return await service.inbox.create("escalation", severity="warning", reason=f"disk {n} full")


def step_keys(item: InboxItem) -> list[str]:
    return [f"{item.id}:pager:escalation.{n}" for n in range(len(AFTER_MS))]


async def test_each_step_of_each_item_arrives_once_and_on_time(
    replicas: list[Service], sink: TimedSink
) -> None:
    """Items created on both replicas: every step once (by Idempotency-Key), at most 1 s late."""
    items = [await create(replicas[n % 2], n) for n in range(ITEMS)]
    expected = [key for item in items for key in step_keys(item)]
    await wait_for(lambda: len(sink.received) >= len(expected), timeout_s=20, what="every step")
    # a few more outbox passes on both replicas: a second send would show up now
    await wait_for(lambda: all_settled(replicas[0], items), timeout_s=10, what="every step recorded")
    assert dict.fromkeys(expected, 1) == dict(sink.keys())
    arrivals = {r["headers"]["Idempotency-Key"]: r["at"] for r in sink.received}
    for item in items:
        for key, after_ms in zip(step_keys(item), AFTER_MS, strict=True):
            late = arrivals[key] - (item.created_at + timedelta(milliseconds=after_ms))
            assert timedelta(0) <= late <= timedelta(seconds=1), (key, late)


async def test_the_chain_goes_on_when_the_creating_replica_stops(
    replicas: list[Service], sink: TimedSink
) -> None:
    """The replica that created the item stops after step 0; the other sends steps 1 and 2, once."""
    first, second = replicas
    item = await create(first, 0)
    await wait_for(lambda: len(sink.received) >= 1, timeout_s=10, what="step 0")
    replicas.remove(first)
    await first.stop()
    await wait_for(lambda: len(sink.received) >= 3, timeout_s=10, what="steps 1 and 2 from the other replica")
    await wait_for(lambda: all_settled(second, [item]), timeout_s=10, what="every step recorded")
    assert dict.fromkeys(step_keys(item), 1) == dict(sink.keys())


async def test_an_ack_on_one_replica_stops_the_chain_on_both(
    replicas: list[Service], sink: TimedSink
) -> None:
    """Acked through the other replica after step 0: neither sends step 1 or 2."""
    item = await create(replicas[0], 0)
    await wait_for(lambda: len(sink.received) >= 1, timeout_s=10, what="step 0")
    await replicas[1].inbox.ack(item.id, actor="ana")
    key = step_keys(item)[1]

    async def cancelled() -> bool:
        return any(
            d.key == key and d.state == "cancelled" for d in await replicas[0].store.list_deliveries(item.id)
        )

    await wait_for(cancelled, timeout_s=5, what="step 1 cancelled")
    assert {step_keys(item)[0]: 1} == dict(sink.keys())


async def all_settled(service: Service, items: list[InboxItem]) -> bool:
    for item in items:
        deliveries = await service.store.list_deliveries(item.id)
        if len(deliveries) < len(AFTER_MS) or any(d.state == "pending" for d in deliveries):
            return False
    return True
