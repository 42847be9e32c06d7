"""The sse strategy against a live event stream on 127.0.0.1: filter, drop, resume."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from sentinel_hooks.watchers.strategies.sse import SseStrategy
from sentinel_hooks.watchers.strategy import Observed, ObserveError, SubscribeStrategy, create_strategy
from tests.net.servers import OpenHttp, Serve, app_with
from tests.watchers.strategies.conftest import MakeContext, watcher

FIRST_CONNECTION = (
    ": stream opened\n"
    "retry: 1500\n"
    "\n"
    'id: 1\nevent: price\ndata: {"usd": 1}\n\n'
    "id: 2\nevent: heartbeat\ndata: tick\n\n"
    ": comment between events\n"
    "id: 3\nevent: price\ndata: line one\ndata: line two\n\n"
)


async def sse_strategy(
    handler: Any, serve: Serve, open_http: OpenHttp, make_context: MakeContext, **keys: Any
) -> SseStrategy:
    server = await serve(app_with("/events", handler))
    http = await open_http()
    spec = watcher(strategy="sse", endpoint=str(server.make_url("/events")), **keys)
    strategy = create_strategy(spec, make_context(http))
    assert isinstance(strategy, SseStrategy)
    return strategy


async def open_stream(request: web.Request, content_type: str = "text/event-stream") -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": content_type})
    await response.prepare(request)
    return response


async def values(stream: AsyncIterator[Observed], count: int) -> list[Any]:
    return [(await anext(stream)).value for _ in range(count)]


async def test_filtered_events_then_drop_then_resume_with_last_event_id(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """Comments skipped, multi-line data joined, other types filtered; after a drop the reconnect resumes."""
    seen: list[tuple[str | None, str | None]] = []
    drop, done = asyncio.Event(), asyncio.Event()

    async def events(request: web.Request) -> web.StreamResponse:
        seen.append((request.headers.get("Last-Event-ID"), request.headers.get("Accept")))
        response = await open_stream(request)
        if len(seen) == 1:
            await response.write(FIRST_CONNECTION.encode())
            await drop.wait()
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write(b'id: 4\nevent: price\ndata: {"usd": 4}\n\n')
        await done.wait()
        return response

    strategy = await sse_strategy(events, serve, open_http, make_context, eventTypes=["price"])
    first = strategy.stream()
    assert [{"usd": 1}, "line one\nline two"] == await values(first, 2)
    drop.set()
    with pytest.raises(ObserveError) as caught:
        await anext(first)
    second = strategy.stream()
    try:
        resumed = await values(second, 1)
    finally:
        done.set()
        await second.aclose()  # type: ignore[attr-defined]
    assert (True, [{"usd": 4}], [(None, "text/event-stream"), ("3", "text/event-stream")]) == (
        caught.value.retryable,
        resumed,
        seen,
    )


async def test_clean_end_raises_with_the_retry_hint(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """Every type passes by default; the end of the stream is a retryable error carrying retry: as seconds."""

    async def events(request: web.Request) -> web.StreamResponse:
        response = await open_stream(request)
        await response.write(FIRST_CONNECTION.encode())
        return response

    strategy = await sse_strategy(events, serve, open_http, make_context)
    stream = strategy.stream()
    observed = await values(stream, 3)
    with pytest.raises(ObserveError, match="the server closed the event stream") as caught:
        await anext(stream)
    assert ([{"usd": 1}, "tick", "line one\nline two"], 1.5, "3") == (
        observed,
        caught.value.retry_after_s,
        strategy.last_event_id,
    )


async def test_wrong_content_type_is_not_retryable(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A page that is not text/event-stream is a configuration error."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<html></html>", content_type="text/html")

    strategy = await sse_strategy(page, serve, open_http, make_context)
    with pytest.raises(ObserveError, match="Content-Type is 'text/html', not text/event-stream") as caught:
        await anext(strategy.stream())
    assert caught.value.retryable is False


async def test_server_error_is_retryable(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A 503 on connect is retryable and keeps Retry-After."""

    async def busy(request: web.Request) -> web.Response:
        return web.Response(status=503, headers={"Retry-After": "12"})

    strategy = await sse_strategy(busy, serve, open_http, make_context)
    with pytest.raises(ObserveError, match="HTTP 503") as caught:
        await anext(strategy.stream())
    assert (True, 12.0) == (caught.value.retryable, caught.value.retry_after_s)


async def test_silent_stream_times_out(serve: Serve, open_http: OpenHttp, make_context: MakeContext) -> None:
    """No bytes for the idle timeout: a retryable error (the runner reconnects)."""
    gate = asyncio.Event()

    async def silent(request: web.Request) -> web.StreamResponse:
        response = await open_stream(request)
        await gate.wait()
        return response

    server = await serve(app_with("/events", silent))
    spec = watcher(strategy="sse", endpoint=str(server.make_url("/events")))
    strategy = SseStrategy(spec, make_context(await open_http()), idle_timeout_s=0.2)  # type: ignore[arg-type]
    try:
        with pytest.raises(ObserveError, match="sent nothing") as caught:
            await anext(strategy.stream())
    finally:
        gate.set()
    assert caught.value.retryable is True


async def test_unlisted_host_is_refused(open_http: OpenHttp, make_context: MakeContext) -> None:
    """The stream goes through the same allowlist: an unlisted host is a non-retryable error."""
    strategy = create_strategy(
        watcher(strategy="sse", endpoint="https://events.example.net/feed"), make_context(await open_http())
    )
    assert isinstance(strategy, SubscribeStrategy)
    with pytest.raises(ObserveError, match="not in allowedHosts") as caught:
        await anext(strategy.stream())
    assert caught.value.retryable is False
