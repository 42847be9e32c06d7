"""http-poll through the whole service: fires on a match; every failure of SPEC §13 row 2 fires nothing."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from aiohttp import web

from sentinel_hooks.service import Service
from sentinel_hooks.store.shortcuts import last_observation
from tests.service.conftest import Starter
from tests.support import Endpoint, wait_for


def poll_watcher(
    url: str, *, conditions: str = "[{path: status, op: eq, value: ok}]", extra: str = ""
) -> str:
    return f"""\
id: probe
strategy: http-poll
endpoint: "{url}"
intervalMs: 100
timeoutMs: 300
retry: {{maxRetries: 0, baseMs: 50, maxMs: 100}}
conditions: {conditions}
deliveryTargets: [console]
{extra}
"""


async def contracts(service: Service) -> list[str]:
    page = await service.store.list_contracts(watcher_id="probe")
    return [c.callback_id for c in page.items]


async def api(service: Service, method: str, path: str, body: object = None) -> tuple[int, object]:
    async with aiohttp.ClientSession() as session:
        kwargs = {} if body is None else {"json": body}
        async with session.request(method, service.url + path, **kwargs) as response:
            text = await response.text()
            return response.status, json.loads(text) if text else None


async def test_match_fires_once_edge_triggered(start_service: Starter, endpoint: Endpoint) -> None:
    """A matching endpoint fires once (edge), and status counts the fire."""
    service = await start_service(watchers={"p.yaml": poll_watcher(endpoint.url("/health"))})
    await wait_for(lambda: endpoint.requests >= 4, what="several polls")
    assert 1 == len(await contracts(service))
    status, body = await api(service, "GET", "/api/v1/watchers/probe")
    assert 200 == status
    assert (1, "ok", True) == (body["status"]["fires"], body["status"]["state"], body["status"]["firing"])  # type: ignore[index]


async def test_text_page_is_observed_as_text_and_fires_on_contains(
    start_service: Starter, endpoint: Endpoint
) -> None:
    """A plain-text page becomes {"text", "contentType"} and `contains` fires on it."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<html>deploy FAILED</html>", content_type="text/html")

    endpoint.handler = page
    watcher = poll_watcher(endpoint.url(), conditions="[{path: text, op: contains, value: FAILED}]")
    service = await start_service(watchers={"p.yaml": watcher})
    await wait_for(lambda: contracts(service), what="a fire")
    observed = await last_observation(service.store, "probe")
    assert observed is not None
    assert {"text": "<html>deploy FAILED</html>", "contentType": "text/html"} == observed.value


async def _server_error(request: web.Request) -> web.StreamResponse:
    return web.Response(status=500, text="boom")


async def _hang(request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(30)
    return web.json_response({"status": "ok"})


async def _bad_json(request: web.Request) -> web.StreamResponse:
    return web.Response(text='{"status": "ok"', content_type="application/json")


async def _redirect(request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound("http://127.0.0.1:1/elsewhere")


async def _oversized(request: web.Request) -> web.StreamResponse:
    return web.json_response({"status": "ok", "pad": "x" * 10000})


@pytest.mark.parametrize(
    ("handler", "error_part"),
    [
        (_server_error, "500"),
        (_hang, "time"),
        (_bad_json, "JSON"),
        (_redirect, "redirect"),
        (_oversized, "4096"),
    ],
    ids=["500", "hang", "bad-json", "redirect", "oversized"],
)
async def test_failures_fire_nothing_and_show_the_error(
    start_service: Starter, endpoint: Endpoint, handler: object, error_part: str
) -> None:
    """Each failure mode: no fire, the status shows the error, the service stays healthy."""
    endpoint.handler = handler  # type: ignore[assignment]
    conditions = "[]"  # would fire on any observation
    service = await start_service(watchers={"p.yaml": poll_watcher(endpoint.url(), conditions=conditions)})

    async def failing() -> object:
        _, body = await api(service, "GET", "/api/v1/watchers/probe")
        return body["status"]["consecutiveFailures"] >= 2 and body  # type: ignore[index]

    body = await wait_for(failing, what="two failed polls")
    assert "failing" == body["status"]["state"]  # type: ignore[index]
    assert error_part.lower() in body["status"]["lastError"].lower()  # type: ignore[index]
    assert [] == await contracts(service)
    assert (200, {"status": "ok"}) == await api(service, "GET", "/healthz")


async def test_private_address_is_refused(start_service: Starter, endpoint: Endpoint) -> None:
    """A hostname that resolves to a loopback address is refused: listing a name never unlocks it."""
    watcher = poll_watcher(f"http://localhost:{endpoint.port}/", conditions="[]")
    service = await start_service(watchers={"p.yaml": watcher}, allowed='["localhost"]')

    async def failing() -> object:
        _, body = await api(service, "GET", "/api/v1/watchers/probe")
        return body["status"]["consecutiveFailures"] >= 1 and body  # type: ignore[index]

    body = await wait_for(failing, what="a refused poll")
    assert "private" in body["status"]["lastError"].lower()  # type: ignore[index]
    assert 0 == endpoint.requests
    assert [] == await contracts(service)


async def test_transient_failures_are_retried_then_fire(start_service: Starter, endpoint: Endpoint) -> None:
    """Two 503s then success: the retries (with backoff) reach the match, and the failure count resets."""
    answers = iter([503, 503])

    async def flaky(request: web.Request) -> web.Response:
        status = next(answers, 200)
        return web.json_response({"status": "ok"}, status=status)

    endpoint.handler = flaky
    service = await start_service(
        watchers={"p.yaml": poll_watcher(endpoint.url()).replace("maxRetries: 0", "maxRetries: 3")}
    )
    runner = service.manager.get("probe")
    await wait_for(lambda: runner.state.fires == 1, what="the fire after two retries")
    status = service.manager.status(runner)
    assert (0, 1, None) == (status["consecutiveFailures"], status["fires"], status["lastError"])
    assert 2.0 == service.metrics.poll_errors.labels("probe")._value.get()
