"""Health, readiness and metrics endpoints."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

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
