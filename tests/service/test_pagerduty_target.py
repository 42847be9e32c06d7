"""A fire paged through PagerDuty by a running service (SPEC.md §16), against an Events API stand-in.

The agent's notify triggers an alert keyed by the fire's callback, carrying the observed payload;
the fan-out line pages nobody; when the watcher resolves, the resolved message resolves that alert.
Without an agent answer, the fallback triggers it instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from sentinel_hooks.callbacks.intake.intake import LoggingSink
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from tests.delivery.pagerduty_api import ROUTING_KEY, PagerDutyApi, pagerduty_api
from tests.service.test_resolved_before_page import past_the_deadline
from tests.support import wait_for

__all__ = ["pagerduty_api"]

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: {timeout}
hookResponseDedupeWindowMs: 0
delivery: {{maxAttempts: 3, baseMs: 50, maxMs: 200, maxElapsedMs: 60000}}
targets:
  page: {{type: pagerduty, routingKey: "${{env:PD_ROUTING_KEY}}", apiBase: "{api}"}}
"""

WATCHER = """\
id: disk
strategy: webhook
conditions: [{path: used, op: gte, value: 90}]
fire: {eventName: disk_full, priority: critical, notifyResolved: true}
deliveryTargets: [page]
"""

Make = Callable[..., Awaitable[Service]]


@pytest.fixture
async def make_service(tmp_path: Path, pagerduty_api: PagerDutyApi) -> AsyncIterator[Make]:
    """``await make_service(agent=False, timeout_ms=…)`` → a started Service paging the stand-in."""
    services: list[Service] = []

    async def make(*, agent: bool = True, timeout_ms: int = 20_000) -> Service:
        (tmp_path / "sentinel.yaml").write_text(CONFIG.format(timeout=timeout_ms, api=pagerduty_api.base()))
        (tmp_path / "watchers").mkdir(exist_ok=True)
        (tmp_path / "watchers" / "disk.yaml").write_text(WATCHER)
        config = load_config(tmp_path / "sentinel.yaml", environ={"PD_ROUTING_KEY": ROUTING_KEY})
        service = Service(config) if agent else Service(config, sink=LoggingSink())
        await service.start()
        services.append(service)
        return service

    yield make
    for service in services:
        await service.stop()


async def fire(service: Service, used: int) -> str | None:
    outcome = await service.manager.ingest("disk", {"used": used})
    return outcome.contract.callback_id if outcome.fired and outcome.contract is not None else None


async def test_notify_triggers_and_resolving_resolves_the_same_alert(
    make_service: Make, pagerduty_api: PagerDutyApi
) -> None:
    """The agent notifies: one trigger (critical, the payload as custom_details) keyed by the fire's
    callback; the watcher resolves: a resolve with that key."""
    service = await make_service()
    callback_id = await fire(service, 97)
    assert callback_id is not None
    await wait_for(lambda: pagerduty_api.events, what="the notify's trigger")
    [trigger] = pagerduty_api.events
    payload = trigger["payload"]
    assert ("trigger", callback_id) == (trigger["event_action"], trigger["dedup_key"])
    shown = (payload["severity"], payload["source"], payload["custom_details"])
    assert ("critical", "disk", {"used": 97}) == shown
    assert None is await fire(service, 10)
    await wait_for(lambda: len(pagerduty_api.events) == 2, what="the resolve")
    assert [("trigger", callback_id), ("resolve", callback_id)] == pagerduty_api.actions()
    assert pagerduty_api.alerts[callback_id].resolved


async def test_without_an_answer_the_fallback_triggers(
    make_service: Make, pagerduty_api: PagerDutyApi
) -> None:
    """No agent answer: the fallback triggers the callback's alert (the fan-out line sent nothing)."""
    service = await make_service(agent=False, timeout_ms=300)
    callback_id = await fire(service, 97)
    await wait_for(lambda: pagerduty_api.events, what="the fallback's trigger")
    [trigger] = pagerduty_api.events
    assert (callback_id, "fallback") == (trigger["dedup_key"], trigger["payload"]["class"])
    assert trigger["payload"]["summary"].startswith("Sentinel: disk_full fired on disk (critical)")
    assert 1 == pagerduty_api.requests


async def test_a_rate_limited_trigger_is_retried_once_accepted(
    make_service: Make, pagerduty_api: PagerDutyApi
) -> None:
    """429 then 502 from PagerDuty: the outbox retries and the trigger arrives (one alert)."""
    pagerduty_api.answer_next(429, headers={"Retry-After": "0"})
    pagerduty_api.answer_next(502)
    service = await make_service()
    callback_id = await fire(service, 97)
    await wait_for(lambda: pagerduty_api.events, what="the trigger after the retries")
    assert ([("trigger", callback_id)], 3) == (pagerduty_api.actions(), pagerduty_api.requests)


async def test_a_condition_over_before_the_page_resolves_and_never_triggers(
    make_service: Make, pagerduty_api: PagerDutyApi
) -> None:
    """The watcher's condition turns false while nothing paged yet: the contract is ``resolved``,
    PagerDuty gets the ``resolve`` only, and the deadline sends no fallback (no trigger after it)."""
    service = await make_service(agent=False, timeout_ms=3000)
    callback_id = await fire(service, 97)
    assert callback_id is not None
    assert None is await fire(service, 10)
    contract = await service.store.get_contract(callback_id)
    assert contract is not None
    assert "resolved" == contract.state
    await past_the_deadline(service, contract)
    assert [("resolve", callback_id)] == pagerduty_api.actions()
