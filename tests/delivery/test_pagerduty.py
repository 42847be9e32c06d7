"""The pagerduty target against a stand-in of the Events API v2 on 127.0.0.1 (SPEC.md §16)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from sentinel_hooks.delivery.targets.base import (
    CancelledDelivery,
    DeliveryError,
    Target,
    TargetContext,
    TransientDeliveryError,
    details_payload,
)
from sentinel_hooks.delivery.targets.pagerduty import SUMMARY_CHARS, event_action, resolved_prefix, summary
from sentinel_hooks.store.shortcuts import get_checkpoint
from sentinel_hooks.store.sqlite import SqliteStore
from tests.delivery.conftest import MakeTarget, message
from tests.delivery.pagerduty_api import ROUTING_KEY, PagerDutyApi, pagerduty_api

__all__ = ["pagerduty_api"]


def spec(api: PagerDutyApi, **more: Any) -> dict[str, Any]:
    return {"type": "pagerduty", "routingKey": ROUTING_KEY, "apiBase": api.base(), **more}


@pytest.fixture
def pagerduty(make_target: MakeTarget, pagerduty_api: PagerDutyApi) -> Target:
    return make_target(spec(pagerduty_api), name="page")


async def test_a_notify_triggers_an_alert_keyed_by_the_callback(
    pagerduty: Target, pagerduty_api: PagerDutyApi
) -> None:
    """notify → one ``trigger`` with dedup_key = callbackId, the message's first line as summary,
    the watcher as source and the payload as custom_details."""
    sent = message(text="Gas is 182 gwei.\nSecond line.", payload={"gwei": 182})
    await pagerduty.send(sent, idempotency_key="01JCALLBACK:page:notify")
    [event] = pagerduty_api.events
    expected = {
        "routing_key": ROUTING_KEY,
        "event_action": "trigger",
        "dedup_key": "01JCALLBACK",
        "client": "Sentinel",
        "payload": {
            "summary": "Gas is 182 gwei.",
            "source": "eth-gas",
            "severity": "error",
            "component": "gas_high",
            "class": "notify",
            "custom_details": {"gwei": 182},
        },
    }
    assert expected == event


async def test_a_follow_up_triggers_the_same_alert_again(
    pagerduty: Target, pagerduty_api: PagerDutyApi
) -> None:
    """A follow-up of the page (SPEC §6.4) is a ``trigger`` with the same dedup_key, which
    PagerDuty adds to the open alert without paging again."""
    await pagerduty.send(message(kind="fallback", page=True), idempotency_key="01JCALLBACK:page:fallback")
    await pagerduty.send(message(follow_up=True), idempotency_key="01JCALLBACK:page:notify")
    assert [("trigger", "01JCALLBACK"), ("trigger", "01JCALLBACK")] == [
        (e["event_action"], e["dedup_key"]) for e in pagerduty_api.events
    ]


@pytest.mark.parametrize(
    ("priority", "severity"),
    [("critical", "critical"), ("high", "error"), ("normal", "warning"), ("low", "info")],
)
async def test_severity_follows_the_priority(
    pagerduty: Target, pagerduty_api: PagerDutyApi, priority: str, severity: str
) -> None:
    """critical → critical, high → error, normal → warning, low → info."""
    await pagerduty.send(message(priority=priority), idempotency_key="k")
    assert severity == pagerduty_api.events[0]["payload"]["severity"]


async def test_the_fallback_triggers_too(pagerduty: Target, pagerduty_api: PagerDutyApi) -> None:
    """The fallback pages: a trigger keyed by its callback."""
    await pagerduty.send(message(kind="fallback", callback_id="01JFB"), idempotency_key="k")
    assert [("trigger", "01JFB")] == pagerduty_api.actions()


async def test_resolved_resolves_the_alert_of_the_same_callback(
    pagerduty: Target, pagerduty_api: PagerDutyApi
) -> None:
    """A notify then the resolved message of that callback: trigger, then resolve with the same key."""
    await pagerduty.send(message(callback_id="01JFIRE"), idempotency_key="a")
    resolved = message(callback_id="01JFIRE", kind="resolved", text="Resolved.")
    await pagerduty.send(resolved, idempotency_key="b")
    assert [("trigger", "01JFIRE"), ("resolve", "01JFIRE")] == pagerduty_api.actions()
    assert {"routing_key", "event_action", "dedup_key"} == set(pagerduty_api.events[1])
    assert pagerduty_api.alerts["01JFIRE"].resolved


async def test_the_fanout_line_pages_nobody(pagerduty: Target, pagerduty_api: PagerDutyApi) -> None:
    """A fan-out line is accepted without a request (the agent's notify or the fallback pages)."""
    await pagerduty.send(message(kind="fanout"), idempotency_key="k")
    assert 0 == pagerduty_api.requests


async def test_an_escalation_step_triggers_with_the_item_link(
    pagerduty: Target, pagerduty_api: PagerDutyApi
) -> None:
    """An escalation step triggers the callback's alert and links the inbox item."""
    link = "https://sentinel.example/#inbox/01JITEM"
    sent = message(kind="escalation.1", extra={"link": link, "inboxItemId": "01JITEM"})
    await pagerduty.send(sent, idempotency_key="01JITEM:page:escalation.1")
    [event] = pagerduty_api.events
    expected = ("trigger", "01JCALLBACK", [{"href": link, "text": "Sentinel inbox item"}])
    assert expected == (event["event_action"], event["dedup_key"], event["links"])


async def test_a_long_first_line_is_cut_to_pagerdutys_limit(
    pagerduty: Target, pagerduty_api: PagerDutyApi
) -> None:
    """A first line over 1024 characters is cut, so PagerDuty accepts the event."""
    await pagerduty.send(message(text="x" * 5000), idempotency_key="k")
    assert SUMMARY_CHARS == len(pagerduty_api.events[0]["payload"]["summary"])


async def test_a_payload_that_is_not_an_object_is_wrapped(
    pagerduty: Target, pagerduty_api: PagerDutyApi
) -> None:
    """custom_details must be an object: a list payload goes under ``payload``."""
    await pagerduty.send(message(payload=[1, 2]), idempotency_key="k")
    assert {"payload": [1, 2]} == pagerduty_api.events[0]["payload"]["custom_details"]


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_rate_limits_and_server_errors_are_retried(
    pagerduty: Target, pagerduty_api: PagerDutyApi, status: int
) -> None:
    """429 and 5xx are transient: the dispatcher tries again."""
    pagerduty_api.answer_next(status)
    with pytest.raises(TransientDeliveryError):
        await pagerduty.send(message(), idempotency_key="k")


async def test_retry_after_is_kept_on_429(pagerduty: Target, pagerduty_api: PagerDutyApi) -> None:
    """PagerDuty's Retry-After on 429 becomes the retry hint."""
    pagerduty_api.answer_next(429, headers={"Retry-After": "7"})
    with pytest.raises(TransientDeliveryError) as caught:
        await pagerduty.send(message(), idempotency_key="k")
    assert 7.0 == caught.value.retry_after_s


async def test_a_refused_event_is_not_retried_and_hides_the_routing_key(
    make_target: MakeTarget, pagerduty_api: PagerDutyApi
) -> None:
    """400 (here: a wrong routing key, which PagerDuty's error quotes) is permanent, says what
    PagerDuty said, and never shows the key."""
    target = make_target(spec(pagerduty_api, routingKey="WrongKeyWrongKeyWrongKey"), name="page")
    with pytest.raises(DeliveryError) as caught:
        await target.send(message(), idempotency_key="k")
    text = str(caught.value)
    assert not caught.value.retryable
    assert "HTTP 400" in text
    assert "Invalid routing key" in text
    assert "WrongKey" not in text
    assert "***" in text


async def test_a_host_outside_allowed_hosts_is_refused(make_target: MakeTarget) -> None:
    """The default apiBase (events.pagerduty.com) is not in the test's allowedHosts: refused, not sent."""
    target = make_target({"type": "pagerduty", "routingKey": ROUTING_KEY}, name="page")
    with pytest.raises(DeliveryError) as caught:
        await target.send(message(), idempotency_key="k")
    assert "events.pagerduty.com" in str(caught.value)
    assert ROUTING_KEY not in str(caught.value)


def test_event_actions_by_kind() -> None:
    """notify, notify.N, fallback and escalation.N trigger; resolved resolves; fanout is not sent."""
    kinds = ["notify", "notify.2", "fallback", "escalation.0", "resolved", "fanout"]
    assert ["trigger"] * 4 + ["resolve", None] == [event_action(kind) for kind in kinds]


def test_summary_skips_blank_lines_and_is_never_empty() -> None:
    """The first non-blank line; an empty text still gives PagerDuty a summary."""
    assert ("first", "Sentinel alert") == (summary("\n  \nfirst\nsecond"), summary(""))


def test_details_payload_keeps_small_payloads_and_cuts_big_ones() -> None:
    """A small payload is kept as is; a big one becomes a cut JSON string under ``truncated``."""
    big = details_payload({"blob": "y" * 10_000})
    assert {"a": 1} == details_payload({"a": 1})
    assert ["truncated"] == list(big)
    assert len(big["truncated"]) == 2000


async def test_no_trigger_follows_the_resolve_of_its_dedup_key(
    pagerduty: Target, pagerduty_api: PagerDutyApi
) -> None:
    """Resolved, then a fallback or follow-up of that callback: cancelled without a request, the
    reason said (a trigger after resolve would open an incident nothing closes)."""
    await pagerduty.send(message(callback_id="01JFIRE", kind="resolved", text="Over."), idempotency_key="a")
    for kind, key in (("fallback", "b"), ("notify.2", "c")):
        with pytest.raises(CancelledDelivery, match="its alert was resolved"):
            await pagerduty.send(message(callback_id="01JFIRE", kind=kind), idempotency_key=key)
    await pagerduty.send(message(callback_id="01JOTHER", kind="fallback"), idempotency_key="d")
    assert [("resolve", "01JFIRE"), ("trigger", "01JOTHER")] == pagerduty_api.actions()


async def test_the_resolved_mark_is_kept_in_the_store_across_restarts(
    make_target: MakeTarget, pagerduty_api: PagerDutyApi, context: TargetContext
) -> None:
    """A target built again over the same store (a restart, another replica) still sends no
    trigger after the resolve; the mark is the checkpoint retention prunes with the callback."""
    store = SqliteStore.in_memory()
    await store.open()
    try:
        with_store = replace(context, store=store)
        first = make_target(spec(pagerduty_api), name="page", ctx=with_store)
        await first.send(message(callback_id="01JFIRE", kind="resolved", text="Over."), idempotency_key="a")
        again = make_target(spec(pagerduty_api), name="page", ctx=with_store)
        with pytest.raises(CancelledDelivery):
            await again.send(message(callback_id="01JFIRE", kind="fallback"), idempotency_key="b")
        assert [("resolve", "01JFIRE")] == pagerduty_api.actions()
        assert await get_checkpoint(store, resolved_prefix("page") + "01JFIRE") is not None
    finally:
        await store.close()


async def test_a_trigger_in_flight_finishes_before_the_resolve(
    pagerduty: Target, pagerduty_api: PagerDutyApi
) -> None:
    """Sent at once, a trigger and the resolve of one callback reach PagerDuty in the order they
    were handed over: never the trigger last."""
    await asyncio.gather(
        pagerduty.send(message(callback_id="01JFIRE", kind="fallback"), idempotency_key="a"),
        pagerduty.send(message(callback_id="01JFIRE", kind="resolved", text="Over."), idempotency_key="b"),
    )
    assert [("trigger", "01JFIRE"), ("resolve", "01JFIRE")] == pagerduty_api.actions()
