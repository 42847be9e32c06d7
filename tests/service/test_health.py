"""Health, readiness and metrics endpoints."""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from sentinel_hooks.service import Service
from sentinel_hooks.watchers.tally import STATES, classify
from tests.service.conftest import Starter
from tests.support import Endpoint, wait_for

POLLED = """\
id: probe
strategy: http-poll
endpoint: "{url}"
intervalMs: 100
conditions: [{{path: status, op: eq, value: ok}}]
deliveryTargets: [console]
"""


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


async def test_healthz_and_readyz(start_service: Starter) -> None:
    """/healthz answers ok; /readyz says ready with the watcher count."""
    service = await start_service(watchers={})
    assert (200, '{"status": "ok"}') == await get(service.url + "/healthz")
    status, body = await get(service.url + "/readyz")
    assert (200, '{"status": "ready", "watchers": 0}') == (status, body)


async def test_metrics_parse_and_count_polls_and_fires(start_service: Starter, endpoint: Endpoint) -> None:
    """/metrics is Prometheus text with polls, fires and lag by watcher."""
    service = await start_service(watchers={"p.yaml": POLLED.format(url=endpoint.url())})
    await wait_for(lambda: endpoint.requests >= 3, what="a few polls")
    status, text = await get(service.url + "/metrics")
    assert 200 == status
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("sentinel_polls_total", (("watcher", "probe"),))] >= 3
    assert 1 == samples[("sentinel_fires_total", (("kind", "match"), ("watcher", "probe")))]
    assert samples[("sentinel_poll_lag_seconds_count", ())] >= 2
    assert ("sentinel_watcher_poll_lag_seconds", (("watcher", "probe"),)) in samples
    assert 1 == samples[("sentinel_watchers", (("state", "ok"),))]


FAMILIES = {
    "sentinel_polls",
    "sentinel_poll_errors",
    "sentinel_fires",
    "sentinel_poll_lag_seconds",
    "sentinel_watcher_poll_lag_seconds",
    "sentinel_sessions",
    "sentinel_sessions_running",
    "sentinel_tool_calls",
    "sentinel_contracts",
    "sentinel_fallback_lateness_seconds",
    "sentinel_deliveries",
    "sentinel_inbox_open_items",
    "sentinel_watchers",
}


async def test_every_metric_family_and_the_telemetry_file(
    start_service: Starter, endpoint: Endpoint, tmp_path: object
) -> None:
    """After a scripted fire: every metric family is exported and telemetry has a line per event."""
    from pathlib import Path

    extra = "telemetry: {eventsFile: events.jsonl}\nmodels: {rules: {type: scripted}}"
    watcher = POLLED.format(url=endpoint.url()) + ""
    service = await start_service(watchers={"p.yaml": watcher}, extra=extra)
    await wait_for(lambda: service.sessions.queue.finished, what="the scripted session")
    await wait_for(
        lambda: service.metrics.deliveries.labels("console", "delivered")._value.get() >= 1, what="delivery"
    )
    _, text = await get(service.url + "/metrics")
    families = {family.name for family in text_string_to_metric_families(text)}
    assert FAMILIES <= families
    lines = (Path(str(tmp_path)) / "events.jsonl").read_text().splitlines()
    import json

    kinds = {json.loads(line)["kind"] for line in lines}
    assert {"evaluation", "fire", "tool_call", "session", "delivery", "contract"} <= kinds


HOOK = """\
id: hook
strategy: webhook
conditions: [{path: level, op: eq, value: crit}]
deliveryTargets: [console]
"""


async def test_webhook_pushes_are_counted_by_watcher_and_outcome(start_service: Starter) -> None:
    """sentinel_webhook_pushes_total counts each push: accepted, or refused by its error code; a
    push to an id that is no webhook watcher has an empty watcher label (not the path tried)."""
    service = await start_service(
        watchers={"hook.yaml": HOOK, "p.yaml": POLLED.format(url="http://127.0.0.1:9/")}
    )
    async with aiohttp.ClientSession() as session:
        for path, data in [
            ("hook", b'{"level": "crit"}'),
            ("hook", b'{"level": "ok"}'),
            ("hook", b'{"level": NaN}'),
            ("nope-1", b"{}"),
            ("nope-2", b"{}"),
            ("p", b"{}"),
        ]:
            headers = {"Content-Type": "application/json"}
            async with session.post(
                f"{service.url}/hooks/ingest/{path}", data=data, headers=headers
            ) as answer:
                await answer.read()
    _, text = await get(service.url + "/metrics")
    pushes = {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        if family.name == "sentinel_webhook_pushes"
        for s in family.samples
    }
    refused_elsewhere = {labels: n for labels, n in pushes.items() if ("watcher", "hook") not in labels}
    assert (2, 1, {""}, 3) == (
        pushes[(("outcome", "accepted"), ("watcher", "hook"))],
        pushes[(("outcome", "invalid_json"), ("watcher", "hook"))],
        {dict(labels)["watcher"] for labels in refused_elsewhere},
        sum(refused_elsewhere.values()),
    ), pushes


TROUBLE = """\
watchers:
  - {{id: calm, strategy: http-poll, endpoint: "{url}calm", intervalMs: 100, conditions: [{when}]}}
  - {{id: broken, strategy: http-poll, endpoint: "{url}broken", intervalMs: 100, conditions: [{when}]}}
  - {{id: alarm, strategy: http-poll, endpoint: "{url}alarm", intervalMs: 100, conditions: [{when}]}}
"""
DOWN = "{path: status, op: eq, value: down}"


async def _scraped_after_trouble(start_service: Starter, endpoint: Endpoint, limits: str) -> dict[str, Any]:
    """/metrics of three watchers, one ok, one failing and one firing, once each is so."""
    service = await _in_trouble(start_service, endpoint, limits)
    _, text = await get(service.url + "/metrics")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def _in_trouble(start_service: Starter, endpoint: Endpoint, limits: str) -> Service:
    """A service of three watchers, once one is ok, one failing and one firing."""

    async def answer(request: web.Request) -> web.StreamResponse:
        if request.path == "/broken":
            return web.Response(status=500)
        return web.json_response({"status": "down" if request.path == "/alarm" else "up"})

    endpoint.handler = answer
    service = await start_service(
        watchers={"t.yaml": TROUBLE.format(url=endpoint.url(), when=DOWN)}, limits=limits
    )
    await wait_for(
        lambda: (
            service.watcher("broken").state.consecutive_failures > 0
            and service.watcher("alarm").state.firing.firing
            and service.watcher("calm").state.last_check_at is not None
        ),
        what="one watcher failing, one firing, one ok",
    )
    return service


async def test_metrics_name_every_watcher_up_to_the_limit(start_service: Starter, endpoint: Endpoint) -> None:
    """With no more watchers than ``limits.perWatcherMetricsMax``, every one has its poll series."""
    samples = await _scraped_after_trouble(start_service, endpoint, ", perWatcherMetricsMax: 3")
    named = {dict(labels)["watcher"] for name, labels in samples if name == "sentinel_polls_total"}
    assert {"calm", "broken", "alarm"} == named
    assert samples[("sentinel_polls_all_total", ())] >= 3


async def test_metrics_above_the_limit_name_only_watchers_in_trouble(
    start_service: Starter, endpoint: Endpoint
) -> None:
    """Above ``limits.perWatcherMetricsMax`` watchers, only the failing and the firing ones have
    poll series; the aggregates count every watcher."""
    samples = await _scraped_after_trouble(start_service, endpoint, ", perWatcherMetricsMax: 2")
    for family in ("sentinel_polls_total", "sentinel_watcher_poll_lag_seconds"):
        named = {dict(labels)["watcher"] for name, labels in samples if name == family}
        assert {"broken", "alarm"} == named
    assert 2 == samples[("sentinel_watchers", (("state", "ok"),))]  # calm and alarm (firing is ok)
    assert samples[("sentinel_polls_all_total", ())] >= 3


def _walked(service: Any) -> tuple[dict[str, int], list[str]]:
    """The watchers by state and those in trouble, found by looking at every runner."""
    counts = dict.fromkeys(STATES, 0)
    trouble = []
    for runner in service.manager.runners():
        name, troubled = classify(runner.spec, runner.state, runner.running)
        counts[name] += 1
        if troubled:
            trouble.append(runner.id)
    return counts, sorted(trouble)


async def test_watcher_counts_are_kept_as_watchers_change(start_service: Starter, endpoint: Endpoint) -> None:
    """The counts /metrics and `sentinel status` read are kept as runners change (no walk per
    scrape): after polls fail and fire, a disable, a failing watcher recovering, a removal and
    the stop, they are what looking at every runner finds."""
    service = await _in_trouble(start_service, endpoint, ", perWatcherMetricsMax: 2")
    assert ({"ok": 2, "failing": 1, "disabled": 0, "stopped": 0}, ["alarm", "broken"]) == _walked(service)
    assert _walked(service) == service.manager.status_counts(trouble=True)
    await service.manager.set_enabled("calm", False)

    async def calm(request: web.Request) -> web.StreamResponse:
        return web.json_response({"status": "up"})

    endpoint.handler = calm
    await wait_for(lambda: service.watcher("broken").state.consecutive_failures == 0, what="broken recovered")
    await wait_for(lambda: not service.watcher("alarm").state.firing.firing, what="alarm re-armed")
    assert ({"ok": 2, "failing": 0, "disabled": 1, "stopped": 0}, []) == _walked(service)
    assert _walked(service) == service.manager.status_counts(trouble=True)
    await service.manager._remove("alarm")
    assert _walked(service) == service.manager.status_counts(trouble=True)
    await service.manager.stop()
    assert ({"ok": 0, "failing": 0, "disabled": 1, "stopped": 1}, []) == service.manager.status_counts(
        trouble=True
    )
