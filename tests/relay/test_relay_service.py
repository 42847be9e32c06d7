"""The relay guarantee through a running service, against a real local webhook sink."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from sentinel_hooks.callbacks.intake.intake import LoggingSink
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.relay.relay import escalation_key
from sentinel_hooks.service import Service
from tests.contract.stores import settle
from tests.support import Sink, wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: {timeout}
hookResponseFallbackMode: {mode}
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
delivery: {{maxAttempts: 3, baseMs: 50, maxMs: 200, maxElapsedMs: 60000}}
targets:
  hook: {{type: webhook, url: "{url}", secret: "sign-me-please"}}
"""

WATCHER = "id: w\nstrategy: webhook\nfire: {eventName: disk_full, priority: high}\ndeliveryTargets: [hook]\n"


@pytest.fixture
async def make_service(tmp_path: Path, sink: Sink) -> AsyncIterator[object]:
    services: list[Service] = []

    async def make(*, timeout_ms: int = 300, mode: str = "concise", watcher: str = WATCHER) -> Service:
        (tmp_path / "sentinel.yaml").write_text(
            CONFIG.format(timeout=timeout_ms, mode=mode, url=sink.url("/in"))
        )
        (tmp_path / "watchers").mkdir(exist_ok=True)
        (tmp_path / "watchers" / "w.yaml").write_text(watcher)
        # no agent answers: the hand-off only logs, so every contract waits for its deadline
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}), sink=LoggingSink())
        await service.start()
        services.append(service)
        return service

    yield make
    for service in services:
        await service.stop()


async def fire(service: Service, payload: object) -> str:
    outcome = await service.manager.ingest("w", payload)
    assert outcome.contract is not None
    return outcome.contract.callback_id


async def state_of(service: Service, callback_id: str) -> str:
    contract = await service.store.get_contract(callback_id)
    assert contract is not None
    return contract.state


async def test_silence_sends_exactly_one_fallback(make_service: object, sink: Sink) -> None:
    """No agent answer: one concise fallback reaches the sink, the contract is fallback_sent."""
    service = await make_service()  # type: ignore[operator]
    callback_id = await fire(service, {"disk": "97%"})
    await wait_for(lambda: sink.bodies("fallback"), what="the fallback")
    assert "fallback_sent" == await state_of(service, callback_id)
    [body] = sink.bodies("fallback")
    assert {"callbackId": callback_id, "watcherId": "w", "eventName": "disk_full", "priority": "high"} == {
        k: body[k] for k in ("callbackId", "watcherId", "eventName", "priority")
    }
    assert body["message"] == (
        'Sentinel: disk_full fired on w (high) — no response from the agent within 0.3s.\n{"disk":"97%"}'
    )
    await service.relay.settle_due()
    assert 1 == len(sink.bodies("fallback"))


async def test_fulfilled_contract_gets_no_fallback(make_service: object, sink: Sink) -> None:
    """A contract fulfilled before its deadline is never relayed."""
    service = await make_service(timeout_ms=200)  # type: ignore[operator]
    callback_id = await fire(service, {"n": 1})
    assert await settle(service.store, callback_id, "fulfilled", at=service.clock.now())
    other = await fire(service, {"n": 2})
    await wait_for(lambda: sink.bodies("fallback"), what="the other contract's fallback")
    assert [other] == [b["callbackId"] for b in sink.bodies("fallback")]
    assert "fulfilled" == await state_of(service, callback_id)


async def test_escalation_reason_is_in_the_fallback(make_service: object, sink: Sink) -> None:
    """When the session escalated, the fallback ends with the escalation line."""
    service = await make_service()  # type: ignore[operator]
    callback_id = await fire(service, {"n": 1})
    await service.store.put_checkpoint(
        escalation_key(callback_id), {"severity": "critical", "reason": "disk will fill"}
    )
    await wait_for(lambda: sink.bodies("fallback"), what="the fallback")
    assert sink.bodies("fallback")[0]["message"].endswith("\nEscalated (critical): disk will fill")


async def test_mode_none_expires_and_sends_nothing(make_service: object, sink: Sink) -> None:
    """hookResponseFallbackMode: none → the contract is expired and nothing is sent."""
    service = await make_service(mode="none")  # type: ignore[operator]
    callback_id = await fire(service, {"n": 1})
    await wait_for(lambda: _is(service, callback_id, "expired"), what="expiry")
    assert [] == sink.received


async def _is(service: Service, callback_id: str, state: str) -> bool:
    return await state_of(service, callback_id) == state


async def test_429_with_retry_after_then_success_delivers_once(make_service: object, sink: Sink) -> None:
    """429 (Retry-After) then 200: exactly one accepted message, same Idempotency-Key on both attempts."""
    sink.statuses = [429]
    sink.retry_after = "0"
    service = await make_service()  # type: ignore[operator]
    await fire(service, {"n": 1})
    await wait_for(lambda: sink.bodies("fallback"), what="the retried fallback")
    keys = [r["headers"]["Idempotency-Key"] for r in sink.received]
    assert 2 == len(keys)
    assert keys[0] == keys[1]
    assert 1 == len(sink.bodies("fallback"))


async def test_500_forever_becomes_a_delivery_failure_item(make_service: object, sink: Sink) -> None:
    """A target that keeps failing: maxAttempts attempts, then a delivery_failure item holding the message."""
    sink.statuses = [500] * 10
    service = await make_service()  # type: ignore[operator]
    callback_id = await fire(service, {"n": 1})

    async def failure_items() -> list[object]:
        page = await service.store.list_inbox(kind="delivery_failure")
        return list(page.items)

    [item] = await wait_for(failure_items, what="the dead letter")
    assert 3 == len(sink.received)
    assert callback_id == item.callback_id  # type: ignore[attr-defined]
    assert "Sentinel: disk_full fired on w" in item.detail["delivery"]["message"]["text"]  # type: ignore[attr-defined]


async def test_signature_verifies(make_service: object, sink: Sink) -> None:
    """X-Sentinel-Signature is the HMAC-SHA256 of the raw body with the target's secret."""
    service = await make_service()  # type: ignore[operator]
    await fire(service, {"n": 1})
    await wait_for(lambda: sink.received, what="a delivery")
    request = sink.received[0]
    expected = hmac.new(b"sign-me-please", request["raw"], hashlib.sha256).hexdigest()
    assert f"sha256={expected}" == request["headers"]["X-Sentinel-Signature"]


async def test_external_envelope_follows_the_same_path(make_service: object, sink: Sink) -> None:
    """POST /hooks/sentinel: contract, then the fallback to the envelope's targets."""
    service = await make_service()  # type: ignore[operator]
    envelope = {
        "watcher": {"id": "ci", "eventName": "deploy_failed"},
        "trigger": {"matchedAt": "2026-01-01T00:00:00Z", "priority": "critical"},
        "payload": {"job": 42},
        "delivery": {"targets": ["hook"], "timeoutMs": 200},
    }
    async with aiohttp.ClientSession() as session:
        async with session.post(service.url + "/hooks/sentinel", json=envelope) as response:
            assert 202 == response.status
            answer = await response.json()
        async with session.post(
            service.url + "/hooks/sentinel", json={**envelope, "delivery": {"targets": ["nope"]}}
        ) as bad:
            assert 400 == bad.status
        async with session.post(
            service.url + "/hooks/sentinel", data=b"x", headers={"Content-Type": "text/plain"}
        ) as bad:
            assert 415 == bad.status
        big = {**envelope, "payload": {"pad": "x" * 70000}}
        async with session.post(
            service.url + "/hooks/sentinel",
            data=json.dumps(big),
            headers={"Content-Type": "application/json"},
        ) as bad:
            assert 413 == bad.status
    assert "pending" == answer["state"]
    await wait_for(lambda: sink.bodies("fallback"), what="the external fallback")
    assert "deploy_failed fired on ci (critical)" in sink.bodies("fallback")[0]["message"]


async def test_test_environment_delivers_to_console_only(
    make_service: object, sink: Sink, capsys: object
) -> None:
    """environment: test routes the fallback to the console, never to the real target."""
    watcher = WATCHER + "environment: test\n"
    service = await make_service(watcher=watcher)  # type: ignore[operator]
    callback_id = await fire(service, {"n": 1})
    await wait_for(lambda: _is(service, callback_id, "fallback_sent"), what="the fallback")
    deliveries = await wait_for(lambda: _delivered(service, callback_id), what="the console delivery")
    assert ["console"] == [d.target for d in deliveries]
    assert [] == sink.received


async def _delivered(service: Service, callback_id: str) -> list[object]:
    found = await service.store.list_deliveries(callback_id)
    return [d for d in found if d.state == "delivered"] if found else []
