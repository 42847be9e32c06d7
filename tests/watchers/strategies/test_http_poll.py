"""The http-poll strategy against real servers on 127.0.0.1 (SPEC §3, §13 row 2)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.watchers.strategies.http_poll import HttpPollStrategy
from sentinel_hooks.watchers.strategy import (
    Observed,
    ObserveError,
    PollSkipped,
    create_strategy,
)
from tests.net.servers import OpenHttp, Serve, app_with
from tests.support import wait_for
from tests.watchers.strategies.conftest import MakeContext, watcher


def poll_watcher(url: str, **keys: Any) -> Any:
    return watcher(strategy="http-poll", endpoint=url, intervalMs=1000, **keys)


async def poller(
    handler: Any, serve: Serve, open_http: OpenHttp, make_context: MakeContext, **keys: Any
) -> HttpPollStrategy:
    server = await serve(app_with("/p", handler))
    http = await open_http(max_response_bytes=keys.pop("max_bytes", 64 * 1024))
    context = make_context(http, redactor=keys.pop("redactor", None))
    strategy = create_strategy(
        poll_watcher(str(server.make_url("/p")) + keys.pop("query", ""), **keys), context
    )
    assert isinstance(strategy, HttpPollStrategy)
    return strategy


async def test_json_is_observed_at_clock_time(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext, clock: FakeClock
) -> None:
    """A JSON answer becomes the observed value, stamped with the injected clock."""

    async def price(request: web.Request) -> web.Response:
        return web.json_response({"ethereum": {"usd": 1999.5}})

    strategy = await poller(price, serve, open_http, make_context)
    assert Observed(value={"ethereum": {"usd": 1999.5}}, at=clock.now()) == await strategy.poll()


async def test_text_page_is_observed_as_text(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """An HTML page is observed as {"text", "contentType"} with the bare media type."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<p>All systems operational</p>", content_type="text/html", charset="utf-8")

    strategy = await poller(page, serve, open_http, make_context)
    expected = {"text": "<p>All systems operational</p>", "contentType": "text/html"}
    assert expected == (await strategy.poll()).value


async def test_labelled_json_that_does_not_parse_fails(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """application/json with an HTML body is a non-retryable error naming the request."""

    async def broken(request: web.Request) -> web.Response:
        return web.Response(text="<html>proxy error</html>", content_type="application/json")

    strategy = await poller(broken, serve, open_http, make_context)
    with pytest.raises(ObserveError, match=r"GET http://127.0.0.1:\d+/p: body labelled JSON") as caught:
        await strategy.poll()
    assert caught.value.retryable is False


async def test_server_error_is_retryable(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A 500 is a retryable error with the status in the message."""

    async def fail(request: web.Request) -> web.Response:
        return web.Response(status=500, text="boom")

    strategy = await poller(fail, serve, open_http, make_context)
    with pytest.raises(ObserveError, match="HTTP 500 Internal Server Error: boom") as caught:
        await strategy.poll()
    assert caught.value.retryable is True


async def test_rate_limit_carries_retry_after(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A 429 with Retry-After hands the delay to the runner."""

    async def limited(request: web.Request) -> web.Response:
        return web.Response(status=429, headers={"Retry-After": "30"})

    strategy = await poller(limited, serve, open_http, make_context)
    with pytest.raises(ObserveError) as caught:
        await strategy.poll()
    assert (True, 30.0) == (caught.value.retryable, caught.value.retry_after_s)


async def test_not_found_is_not_retryable(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A 404 will not fix itself by retrying."""

    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404)

    strategy = await poller(missing, serve, open_http, make_context)
    with pytest.raises(ObserveError) as caught:
        await strategy.poll()
    assert caught.value.retryable is False


async def test_redirect_is_refused(serve: Serve, open_http: OpenHttp, make_context: MakeContext) -> None:
    """A redirect is an error, not followed."""

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("https://elsewhere.example.com/")

    strategy = await poller(moved, serve, open_http, make_context)
    with pytest.raises(ObserveError, match=r"redirect to https://elsewhere\.example\.com/ refused") as caught:
        await strategy.poll()
    assert caught.value.retryable is False


async def test_oversized_body_fails(serve: Serve, open_http: OpenHttp, make_context: MakeContext) -> None:
    """A body past limits.maxResponseBytes is an error."""

    async def huge(request: web.Request) -> web.Response:
        return web.json_response({"blob": "x" * 2_000_000})

    strategy = await poller(huge, serve, open_http, make_context)
    with pytest.raises(ObserveError, match="over the 1048576-byte limit"):
        await strategy.poll()


async def test_hanging_server_times_out(serve: Serve, open_http: OpenHttp, make_context: MakeContext) -> None:
    """No answer within timeoutMs: a retryable timeout error."""
    gate = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await gate.wait()
        return web.Response()

    strategy = await poller(hang, serve, open_http, make_context, timeoutMs=200)
    try:
        with pytest.raises(ObserveError, match=r"within 0\.2 s") as caught:
            await strategy.poll()
    finally:
        gate.set()
    assert caught.value.retryable is True


async def test_private_address_is_refused(open_http: OpenHttp, make_context: MakeContext) -> None:
    """A listed hostname resolving to loopback: refused, not retryable."""
    http = await open_http(allowed_hosts=["localhost"])
    strategy = create_strategy(poll_watcher("http://localhost:9/p"), make_context(http))
    assert isinstance(strategy, HttpPollStrategy)
    with pytest.raises(ObserveError, match="loopback") as caught:
        await strategy.poll()
    assert caught.value.retryable is False


async def test_post_sends_object_body_as_json_with_headers(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """method POST with an object body sends JSON; configured headers are sent."""
    seen: dict[str, Any] = {}

    async def record(request: web.Request) -> web.Response:
        seen.update(
            method=request.method, body=await request.json(), auth=request.headers.get("Authorization")
        )
        return web.json_response({"ok": True})

    strategy = await poller(
        record,
        serve,
        open_http,
        make_context,
        method="POST",
        body={"query": "{ health }"},
        headers={"Authorization": "Bearer t0k3n"},
    )
    await strategy.poll()
    assert {"method": "POST", "body": {"query": "{ health }"}, "auth": "Bearer t0k3n"} == seen


async def test_string_body_is_sent_as_is(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A string body is sent byte for byte."""
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(await request.text())
        return web.json_response({})

    strategy = await poller(record, serve, open_http, make_context, method="POST", body="a=1&b=2")
    await strategy.poll()
    assert ["a=1&b=2"] == seen


async def test_error_message_is_redacted(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A secret in the URL never appears in the error message."""

    async def fail(request: web.Request) -> web.Response:
        return web.Response(status=503)

    strategy = await poller(
        fail, serve, open_http, make_context, query="?key=sup3rs3cret", redactor=Redactor(["sup3rs3cret"])
    )
    with pytest.raises(ObserveError) as caught:
        await strategy.poll()
    assert ("key=***" in str(caught.value), "sup3rs3cret" in str(caught.value)) == (True, False)


async def test_poll_that_cannot_get_a_request_slot_within_its_interval_is_skipped(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """Every request slot busy for longer than one interval: the poll is skipped (not a failure), unsent."""
    release, hits = asyncio.Event(), []

    async def held(request: web.Request) -> web.Response:
        hits.append(request.path)
        await release.wait()
        return web.json_response({"ok": True})

    server = await serve(app_with("/p", held))
    http = await open_http(pool_size=1)
    holder = asyncio.create_task(http.request("GET", str(server.make_url("/p"))))
    await wait_for(lambda: len(hits) == 1, what="the slot to be taken")
    strategy = create_strategy(
        watcher(strategy="http-poll", endpoint=str(server.make_url("/p")), intervalMs=200), make_context(http)
    )
    with pytest.raises(PollSkipped, match="did not start") as info:
        await strategy.poll()
    assert ("no_slot", False, 1) == (info.value.reason, info.value.retryable, len(hits))
    release.set()
    await holder
