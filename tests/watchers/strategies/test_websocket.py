"""The websocket strategy against a live WebSocket server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import WSMsgType, web

from sentinel_hooks.config.service import LimitsSpec
from sentinel_hooks.watchers.strategies.websocket import WebSocketStrategy
from sentinel_hooks.watchers.strategy import ObserveError, create_strategy
from tests.net.servers import OpenHttp, Serve, app_with
from tests.watchers.strategies.conftest import MakeContext, watcher


async def ws_strategy(
    handler: Any,
    serve: Serve,
    open_http: OpenHttp,
    make_context: MakeContext,
    heartbeat_s: float = 30.0,
    limits: LimitsSpec | None = None,
    **keys: Any,
) -> WebSocketStrategy:
    server = await serve(app_with("/ws", handler))
    spec = watcher(strategy="websocket", endpoint=str(server.make_url("/ws").with_scheme("ws")), **keys)
    strategy = create_strategy(spec, make_context(await open_http(max_response_bytes=1 << 20), limits=limits))
    assert isinstance(strategy, WebSocketStrategy)
    strategy.heartbeat_s = heartbeat_s
    return strategy


async def test_subscribe_message_then_json_messages_then_close(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """subscribeMessage is sent as JSON; text messages become observations; binary is ignored; close fails."""

    async def feed(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        subscribe = await ws.receive()
        await ws.send_str(f'{{"echo": {subscribe.data}}}')
        await ws.send_bytes(b"\x00binary")
        await ws.send_str('{"price": 2001}')
        await ws.send_str("plain words")
        await ws.close(code=4000, message=b"bye")
        return ws

    strategy = await ws_strategy(
        feed, serve, open_http, make_context, subscribeMessage={"op": "subscribe", "channel": "eth"}
    )
    stream = strategy.stream()
    observed = [(await anext(stream)).value for _ in range(3)]
    with pytest.raises(ObserveError, match="closed the WebSocket \\(code 4000\\)") as caught:
        await anext(stream)
    expected = [{"echo": {"op": "subscribe", "channel": "eth"}}, {"price": 2001}, {"text": "plain words"}]
    assert (expected, True) == (observed, caught.value.retryable)


async def test_string_subscribe_message_is_sent_as_is(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A string subscribeMessage goes out unchanged."""
    received: list[str] = []
    done = asyncio.Event()

    async def feed(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        received.append((await ws.receive()).data)
        await ws.send_str("{}")
        await done.wait()
        return ws

    strategy = await ws_strategy(feed, serve, open_http, make_context, subscribeMessage="SUB ticker")
    stream = strategy.stream()
    try:
        await anext(stream)
    finally:
        done.set()
        await stream.aclose()  # type: ignore[attr-defined]
    assert ["SUB ticker"] == received


async def test_heartbeat_pings_the_server(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """The client sends pings; a server that answers them keeps the connection."""
    pinged, done = asyncio.Event(), asyncio.Event()

    async def feed(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        message = await ws.receive()
        if message.type == WSMsgType.PING:
            await ws.pong(message.data)
            pinged.set()
            await ws.send_str('{"alive": true}')
        await done.wait()
        return ws

    strategy = await ws_strategy(feed, serve, open_http, make_context, heartbeat_s=0.05)
    stream = strategy.stream()
    try:
        value = (await anext(stream)).value
    finally:
        done.set()
        await stream.aclose()  # type: ignore[attr-defined]
    assert (True, {"alive": True}) == (pinged.is_set(), value)


async def test_missing_pong_fails_the_connection(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A server that never answers pings is detected as dead: retryable error."""
    done = asyncio.Event()

    async def deaf(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=False)
        await ws.prepare(request)
        await done.wait()
        return ws

    strategy = await ws_strategy(deaf, serve, open_http, make_context, heartbeat_s=0.05)
    try:
        with pytest.raises(ObserveError, match="PONG") as caught:
            await anext(strategy.stream())
    finally:
        done.set()
    assert caught.value.retryable is True


async def test_oversized_message_fails(serve: Serve, open_http: OpenHttp, make_context: MakeContext) -> None:
    """A message past limits.maxResponseBytes fails the connection."""

    async def huge(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_str("x" * 100_000)
        await ws.receive()
        return ws

    strategy = await ws_strategy(
        huge, serve, open_http, make_context, limits=LimitsSpec(maxResponseBytes=65536)
    )
    with pytest.raises(ObserveError, match=r"WebSocket failed: .*exceeds limit 65536"):
        await anext(strategy.stream())


async def test_unlisted_host_is_refused(open_http: OpenHttp, make_context: MakeContext) -> None:
    """ws_connect applies allowedHosts: a non-retryable error, nothing connected."""
    strategy = create_strategy(
        watcher(strategy="websocket", endpoint="wss://stream.example.net/ws"), make_context(await open_http())
    )
    with pytest.raises(ObserveError, match="not in allowedHosts") as caught:
        await anext(strategy.stream())  # type: ignore[union-attr]
    assert caught.value.retryable is False
