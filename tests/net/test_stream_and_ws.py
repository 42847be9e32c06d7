"""SafeHttp.stream (SSE) and SafeHttp.ws_connect: same host rules, no redirects, timeouts."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import WSMsgType, web

from sentinel_hooks.net.errors import HostNotAllowed, InvalidUrl, RedirectRefused, RequestTimeout
from tests.net.servers import OpenHttp, Serve, app_with


async def moved(request: web.Request) -> web.Response:
    raise web.HTTPTemporaryRedirect("http://127.0.0.1:9/next")


async def test_stream_yields_the_open_response(serve: Serve, open_http: OpenHttp) -> None:
    """The body is read incrementally from the yielded response."""

    async def chunks(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for part in (b"a", b"b", b"c"):
            await response.write(part)
        return response

    server = await serve(app_with("/s", chunks))
    http = await open_http()
    async with http.stream("GET", str(server.make_url("/s"))) as response:
        body = b"".join([chunk async for chunk in response.content.iter_any()])
    assert (200, b"abc") == (response.status, body)


async def test_stream_refuses_redirects(serve: Serve, open_http: OpenHttp) -> None:
    """A 307 on a stream is refused with its Location."""
    server = await serve(app_with("/s", moved))
    http = await open_http()
    with pytest.raises(RedirectRefused, match=r"redirect to http://127\.0\.0\.1:9/next refused"):
        async with http.stream("GET", str(server.make_url("/s"))):
            pass


async def test_stream_idle_timeout(serve: Serve, open_http: OpenHttp) -> None:
    """A stream that goes silent past idle_timeout_s fails with a retryable RequestTimeout."""
    gate = asyncio.Event()

    async def silent(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"first")
        await gate.wait()
        return response

    server = await serve(app_with("/s", silent))
    http = await open_http()
    received: list[bytes] = []

    async def read_all() -> None:
        async with http.stream("GET", str(server.make_url("/s")), idle_timeout_s=0.2) as response:
            async for chunk in response.content.iter_any():
                received.append(chunk)

    try:
        with pytest.raises(RequestTimeout, match="sent nothing"):
            await read_all()
    finally:
        gate.set()
    assert [b"first"] == received


async def test_stream_checks_the_host(open_http: OpenHttp) -> None:
    """Streams obey allowedHosts like requests."""
    http = await open_http(allowed_hosts=["api.example.com"])
    with pytest.raises(HostNotAllowed):
        async with http.stream("GET", "http://events.example.net/feed"):
            pass


async def test_ws_connect_exchanges_messages(serve: Serve, open_http: OpenHttp) -> None:
    """ws:// URLs use the http host rules; text messages flow both ways."""

    async def echo(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            await ws.send_str(f"echo {message.data}")
        return ws

    server = await serve(app_with("/ws", echo))
    http = await open_http()
    ws = await http.ws_connect(str(server.make_url("/ws").with_scheme("ws")))
    await ws.send_str("hi")
    reply = await ws.receive()
    await ws.close()
    assert (WSMsgType.TEXT, "echo hi") == (reply.type, reply.data)


async def test_ws_connect_refuses_redirects(serve: Serve, open_http: OpenHttp) -> None:
    """A redirected WebSocket handshake is refused (aiohttp would follow it)."""
    server = await serve(app_with("/ws", moved))
    http = await open_http()
    with pytest.raises(RedirectRefused, match=r"redirect to http://127\.0\.0\.1:9/next"):
        await http.ws_connect(str(server.make_url("/ws").with_scheme("ws")))


async def test_ws_connect_refuses_unlisted_host(open_http: OpenHttp) -> None:
    """wss:// to a host outside allowedHosts is refused."""
    http = await open_http(allowed_hosts=["api.example.com"])
    with pytest.raises(HostNotAllowed, match=r"GET wss://stream\.example\.net/ws"):
        await http.ws_connect("wss://stream.example.net/ws")


async def test_ws_connect_needs_a_ws_scheme(open_http: OpenHttp) -> None:
    """http:// is not a WebSocket URL."""
    http = await open_http()
    with pytest.raises(InvalidUrl, match="use ws:// or wss://"):
        await http.ws_connect("http://127.0.0.1/ws")
