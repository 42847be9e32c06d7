"""The http-long-poll strategy: a held request returns with news, or quietly with none."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from sentinel_hooks.watchers.strategies.http_long_poll import HttpLongPollStrategy
from sentinel_hooks.watchers.strategy import NoObservation, ObserveError, create_strategy
from tests.net.servers import OpenHttp, Serve, app_with
from tests.watchers.strategies.conftest import MakeContext, watcher


async def long_poller(
    handler: Any, serve: Serve, open_http: OpenHttp, make_context: MakeContext, **keys: Any
) -> HttpLongPollStrategy:
    server = await serve(app_with("/updates", handler))
    http = await open_http()
    spec = watcher(strategy="http-long-poll", endpoint=str(server.make_url("/updates")), **keys)
    strategy = create_strategy(spec, make_context(http))
    assert isinstance(strategy, HttpLongPollStrategy)
    return strategy


async def test_held_request_returns_the_answer(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """The server holds the request until it has news; the poll then observes it."""
    arrived, news = asyncio.Event(), asyncio.Event()

    async def held(request: web.Request) -> web.Response:
        arrived.set()
        await news.wait()
        return web.json_response({"deploy": "done"})

    strategy = await long_poller(held, serve, open_http, make_context)
    poll = asyncio.create_task(strategy.poll())
    await arrived.wait()
    assert not poll.done()
    news.set()
    assert {"deploy": "done"} == (await poll).value


async def test_hold_timeout_is_a_quiet_no_observation(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """timeoutMs passes with no answer: NoObservation (quiet, retryable), not a failure."""
    gate = asyncio.Event()

    async def silent(request: web.Request) -> web.Response:
        await gate.wait()
        return web.Response()

    strategy = await long_poller(silent, serve, open_http, make_context, timeoutMs=200)
    try:
        with pytest.raises(NoObservation, match=r"no answer within the 0\.2 s hold") as caught:
            await strategy.poll()
    finally:
        gate.set()
    assert (True, True) == (caught.value.quiet, caught.value.retryable)


async def test_no_content_is_a_no_observation(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A 204 at the end of the hold means "nothing new": NoObservation."""

    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=204)

    strategy = await long_poller(empty, serve, open_http, make_context)
    with pytest.raises(NoObservation, match="204 No Content"):
        await strategy.poll()


async def test_server_error_is_a_real_failure(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A 502 is an ordinary retryable error, not a quiet one."""

    async def bad_gateway(request: web.Request) -> web.Response:
        return web.Response(status=502)

    strategy = await long_poller(bad_gateway, serve, open_http, make_context)
    with pytest.raises(ObserveError, match="HTTP 502") as caught:
        await strategy.poll()
    assert (False, True) == (isinstance(caught.value, NoObservation), caught.value.retryable)


async def test_refused_connection_is_not_quiet(
    open_http: OpenHttp, make_context: MakeContext, unused_tcp_port: int
) -> None:
    """Nothing listening: a retryable failure, never mistaken for a quiet hold."""
    http = await open_http()
    spec = watcher(strategy="http-long-poll", endpoint=f"http://127.0.0.1:{unused_tcp_port}/u")
    strategy = create_strategy(spec, make_context(http))
    assert isinstance(strategy, HttpLongPollStrategy)
    with pytest.raises(ObserveError, match="cannot connect") as caught:
        await strategy.poll()
    assert not isinstance(caught.value, NoObservation)
