"""The notify tool's immediate send: one attempt, never also claimed by the outbox worker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from sentinel_hooks.callbacks.intake.intake import LoggingSink
from sentinel_hooks.clock import iso
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.delivery.targets.base import Message
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Delivery
from tests.contract.stores import get_delivery
from tests.support import Sink, wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
targets: {{hook: {{type: webhook, url: "{url}"}}}}
"""


class SlowSink(Sink):
    """Records each request on arrival, answers 200 after ``delay_s``."""

    delay_s = 1.0

    async def _record(self, request: web.Request) -> web.StreamResponse:
        response = await super()._record(request)
        await asyncio.sleep(self.delay_s)  # a slow receiver, so a second sender would overlap
        return response


@pytest.fixture
async def sink() -> AsyncIterator[SlowSink]:
    server = SlowSink()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def service(tmp_path: Path, sink: SlowSink) -> AsyncIterator[Service]:
    """A started service whose one target, ``hook``, is the slow sink."""
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(url=sink.url("/in")))
    started = Service(load_config(tmp_path / "sentinel.yaml", environ={}), sink=LoggingSink())
    await started.start()
    yield started
    await started.stop()


async def held_notify(service: Service, callback_id: str) -> list[Delivery]:
    """A notify to ``hook`` stored held, as the notify tool stores it before its own attempt."""
    fields = {"watcher_id": "w", "event_name": "e", "priority": "normal", "kind": "notify"}
    message = Message(callback_id=callback_id, text="hi", **fields)
    deliveries = service.dispatcher.held_deliveries(message, ["hook"], "notify", at=service.clock.now())
    for delivery in deliveries:
        assert await service.store.enqueue_delivery(delivery)
    return deliveries


async def test_an_attempt_now_is_not_sent_again_by_the_worker_meanwhile(
    service: Service, sink: SlowSink
) -> None:
    """While the notify's own attempt waits for a slow target, the outbox worker (which would
    claim every due delivery) leaves it alone: the receiver sees one request."""
    deliveries = await held_notify(service, "01JSENDNOW")
    service.dispatcher.wake()  # the worker looks at the outbox while the attempt is under way
    assert [True] == await service.dispatcher.attempt_now(deliveries)
    stored = await get_delivery(service.store, deliveries[0].key)
    assert stored is not None
    assert ("delivered", 1) == (stored.state, stored.attempts)
    assert ["01JSENDNOW:hook:notify"] == [r["headers"]["Idempotency-Key"] for r in sink.received]


async def test_an_attempt_now_outlives_its_cancelled_caller_and_the_stop_waits_for_it(
    service: Service, sink: SlowSink
) -> None:
    """A hook session stopped with its service (its task cancelled) while its notify is being
    sent: the send finishes and its outcome is recorded before the dispatcher has stopped. Were
    the attempt cancelled with its caller, the receiver's copy would go unrecorded and be sent
    again after the lease, the contract settled only then."""
    deliveries = await held_notify(service, "01JSTOPPED")
    caller = asyncio.ensure_future(service.dispatcher.attempt_now(deliveries))
    await wait_for(lambda: bool(sink.received), timeout_s=10, what="the target to receive the notify")
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await service.dispatcher.stop()
    stored = await get_delivery(service.store, deliveries[0].key)
    assert stored is not None
    assert ("delivered", 1, 1) == (stored.state, stored.attempts, len(sink.received))


async def test_a_notify_cancelled_while_handed_over_is_still_sent_at_once(
    service: Service, sink: SlowSink
) -> None:
    """A hook session stopped while its notify is being handed over (its deliveries stored held
    for the immediate attempt): the hand-over and the attempt finish without it. Were the
    session's task to run them, the page would wait out its 20 s lease before anyone sent it."""
    envelope = Envelope.model_validate(
        {
            "watcher": {"id": "disk", "eventName": "disk_full"},
            "trigger": {"kind": "match", "matchedAt": iso(service.clock.now()), "priority": "high"},
            "payload": {"used": 0.97},
            "delivery": {"targets": ["hook"], "timeoutMs": 600_000},
        }
    )
    contract = await service.intake.accept(envelope)
    fields = {"watcher_id": "disk", "event_name": "disk_full", "priority": "high", "kind": "notify"}
    message = Message(callback_id=contract.callback_id, text="disk full on db-1", **fields)
    caller = asyncio.ensure_future(service.relay.notify(contract, message, ["hook"]))
    await asyncio.sleep(0)  # one turn: the notify is in its first store step
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await wait_for(
        lambda: any(r["headers"]["Idempotency-Key"].endswith(":notify") for r in sink.received),
        timeout_s=10,
        what="the page to be sent before its lease ends",
    )
    await service.dispatcher.stop()
    found = await service.store.list_deliveries(contract.callback_id)
    [delivery] = [d for d in found if d.kind == "notify"]
    pages = [r for r in sink.received if r["headers"]["Idempotency-Key"] == delivery.key]
    assert ("delivered", 1, 1) == (delivery.state, delivery.attempts, len(pages))
    assert "fulfilled" == (await service.store.get_contract(contract.callback_id)).state
