"""New inbox items reach escalationTargets naming their callback, one delivery key per item."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import InboxItem, InboxKind
from tests.contract.stores import get_delivery
from tests.support import Endpoint, Sink, wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: {timeout_ms}
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
escalationTargets: [pager]
targets:
  pager: {{type: webhook, url: "{pager}"}}
  broken: {{type: webhook, url: "{broken}"}}
"""

WATCHER = """\
id: vault
strategy: webhook
deliveryTargets: [broken]
fire: {eventName: vault_low, escalate: true}
"""


@pytest.fixture
async def broken() -> AsyncIterator[Endpoint]:
    """A target that refuses every message for good (400): each delivery to it dead-letters."""
    server = Endpoint()

    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"error": "no"}, status=400)

    server.handler = refuse
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def pager() -> AsyncIterator[Sink]:
    """The escalation target: a webhook receiver that records every request."""
    server = Sink()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def start(
    tmp_path: Path, pager: Sink, broken: Endpoint
) -> AsyncIterator[Callable[[int], Awaitable[Service]]]:
    """``await start(timeout_ms)``: a running service whose watcher's session escalates."""
    services: list[Service] = []

    async def run(timeout_ms: int) -> Service:
        text = CONFIG.format(pager=pager.url("/pager"), broken=broken.url(), timeout_ms=timeout_ms)
        (tmp_path / "sentinel.yaml").write_text(text)
        (tmp_path / "watchers").mkdir()
        (tmp_path / "watchers" / "vault.yaml").write_text(WATCHER)
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
        await service.start()
        services.append(service)
        return service

    yield run
    for service in services:
        await service.stop()


async def test_escalation_notices_carry_the_callback_id_and_one_key_per_item(
    start: Callable[[int], Awaitable[Service]], pager: Sink
) -> None:
    """The session's escalation and the fallback's dead letter (two items of one callback) reach
    the escalation target with the callback's id in the body and an Idempotency-Key per item."""
    service = await start(2_000)  # the session escalates well before the fallback goes out
    outcome = await service.manager.ingest("vault", {"health": 1.05})
    assert outcome.contract is not None
    callback_id = outcome.contract.callback_id
    await wait_for(lambda: len(pager.bodies()) >= 2, timeout_s=20, what="two escalation notices")
    items = (await service.store.list_inbox(limit=10)).items
    assert ["delivery_failure", "escalation"] == sorted(item.kind for item in items)
    assert [callback_id, callback_id] == [item.callback_id for item in items]
    assert [callback_id, callback_id] == [body["callbackId"] for body in pager.bodies()]
    keys = sorted(request["headers"]["Idempotency-Key"] for request in pager.received)
    assert sorted(f"{item.id}:pager:escalation.0" for item in items) == keys


async def test_a_failed_escalation_notice_is_kept_naming_its_callback_and_not_escalated(
    start: Callable[[int], Awaitable[Service]], pager: Sink
) -> None:
    """An escalation notice the target refuses becomes a delivery_failure item of the same callback,
    which is not sent to that target again."""
    pager.statuses = [400]
    service = await start(600_000)
    outcome = await service.manager.ingest("vault", {"health": 1.05})
    assert outcome.contract is not None
    [escalation] = await wait_for(lambda: inbox(service, "escalation"), what="the escalation item")
    key = f"{escalation.id}:pager:escalation.0"
    await wait_for(lambda: delivery_state(service, key, "failed"), what="the refused notice")
    [failure] = await inbox(service, "delivery_failure")
    assert outcome.contract.callback_id == failure.callback_id
    assert ([], 1) == (await service.store.list_deliveries(failure.id), len(pager.received))


async def inbox(service: Service, kind: InboxKind) -> list[InboxItem]:
    return (await service.store.list_inbox(kind=kind, limit=10)).items


async def delivery_state(service: Service, key: str, state: str) -> bool:
    delivery = await get_delivery(service.store, key)
    return delivery is not None and delivery.state == state
