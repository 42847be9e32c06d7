"""SafeHttp against real servers on 127.0.0.1: policy, redirects, limits, timeouts, errors."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

import pytest
from aiohttp import web

from sentinel_hooks.net.client import SafeHttp
from sentinel_hooks.net.errors import (
    ConnectionFailed,
    HostNotAllowed,
    InvalidUrl,
    NoSlot,
    PrivateAddressRefused,
    RedirectRefused,
    RequestTimeout,
    ResponseTooLarge,
)
from tests.net.servers import OpenHttp, Serve, app_with
from tests.support import wait_for


async def ok(request: web.Request) -> web.Response:
    return web.json_response({"ok": True, "path": request.path})


async def test_listed_address_is_reached(serve: Serve, open_http: OpenHttp) -> None:
    """127.0.0.1 listed in allowedHosts: the request reaches the local server."""
    server = await serve(app_with("/", ok))
    http = await open_http(allowed_hosts=["127.0.0.1"])
    response = await http.request("GET", str(server.make_url("/")))
    assert (200, b'{"ok": true, "path": "/"}') == (response.status, response.body)


async def test_response_describes_the_answer(serve: Serve, open_http: OpenHttp) -> None:
    """The response carries the bare media type, the charset, the URL and decoded text."""

    async def latin(request: web.Request) -> web.Response:
        return web.Response(body="café".encode("latin-1"), content_type="text/plain", charset="iso-8859-1")

    server = await serve(app_with("/t", latin))
    http = await open_http()
    url = str(server.make_url("/t"))
    response = await http.request("get", url)
    assert ("text/plain", "iso-8859-1", url, "GET", "café") == (
        response.content_type,
        response.charset,
        response.url,
        response.method,
        response.text(),
    )


async def test_hostname_never_unlocks_loopback(serve: Serve, open_http: OpenHttp) -> None:
    """Only the hostname localhost listed: its loopback address is refused and nothing is sent."""
    hits: list[str] = []

    async def counted(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="hi")

    server = await serve(app_with("/", counted))
    http = await open_http(allowed_hosts=["localhost"])
    with pytest.raises(PrivateAddressRefused, match="localhost"):
        await http.request("GET", f"http://localhost:{server.port}/")
    assert [] == hits


async def test_allow_private_networks_unlocks_hostname(serve: Serve, open_http: OpenHttp) -> None:
    """With allowPrivateNetworks, a listed hostname resolving to loopback is reached."""
    server = await serve(app_with("/", ok))
    http = await open_http(allowed_hosts=["localhost"], allow_private_networks=True)
    response = await http.request("GET", f"http://localhost:{server.port}/")
    assert 200 == response.status


async def test_loopback_literal_refused_when_not_listed(serve: Serve, open_http: OpenHttp) -> None:
    """127.0.0.1 inside a listed CIDR is allowed; a literal outside every entry is not."""
    server = await serve(app_with("/", ok))
    http = await open_http(allowed_hosts=["127.0.0.0/8"])
    assert 200 == (await http.request("GET", str(server.make_url("/")))).status
    with pytest.raises(HostNotAllowed, match="not in allowedHosts"):
        await http.request("GET", f"http://10.0.0.1:{server.port}/")


async def test_host_not_listed_is_refused(open_http: OpenHttp) -> None:
    """A host missing from allowedHosts is refused before any lookup; the message names the request."""
    http = await open_http(allowed_hosts=["api.example.com"])
    with pytest.raises(HostNotAllowed) as caught:
        await http.request("GET", "https://evil.example.net/x")
    assert str(caught.value).startswith("GET https://evil.example.net/x: host 'evil.example.net' is not in")


async def test_refusal_is_not_retryable(open_http: OpenHttp) -> None:
    """Refusals carry retryable=False (retrying cannot change the policy)."""
    http = await open_http(allowed_hosts=[])
    with pytest.raises(HostNotAllowed) as caught:
        await http.request("GET", "https://example.com/")
    assert caught.value.retryable is False


async def test_unsupported_scheme_is_invalid(open_http: OpenHttp) -> None:
    """Only http and https are requested (ws and wss go through ws_connect)."""
    http = await open_http()
    with pytest.raises(InvalidUrl, match="scheme 'ftp'"):
        await http.request("GET", "ftp://127.0.0.1/file")


async def test_redirect_is_refused_with_its_location(serve: Serve, open_http: OpenHttp) -> None:
    """A 302 is not followed: RedirectRefused names the Location, and the target is never asked."""
    hits: list[str] = []

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound("/elsewhere")

    async def elsewhere(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text="you followed me")

    app = app_with("/old", moved)
    app.router.add_get("/elsewhere", elsewhere)
    server = await serve(app)
    http = await open_http()
    url = str(server.make_url("/old"))
    with pytest.raises(RedirectRefused) as caught:
        await http.request("GET", url)
    assert (f"GET {url}: redirect to /elsewhere refused (Sentinel never follows redirects)", []) == (
        str(caught.value),
        hits,
    )


async def test_declared_oversized_body_is_refused(serve: Serve, open_http: OpenHttp) -> None:
    """A Content-Length over the limit is refused before reading."""

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 5000)

    server = await serve(app_with("/", big))
    http = await open_http()
    with pytest.raises(ResponseTooLarge, match="declares 5000 bytes, over the 4096-byte limit"):
        await http.request("GET", str(server.make_url("/")), max_bytes=4096)


async def test_streamed_oversized_body_stops_the_download(serve: Serve, open_http: OpenHttp) -> None:
    """An endless chunked body: the client aborts past the limit and the server sees the connection close."""
    sent: list[int] = []
    stopped = asyncio.Event()

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        try:
            while True:
                await response.write(b"y" * 16384)
                sent.append(16384)
        finally:
            stopped.set()

    server = await serve(app_with("/", endless))
    http = await open_http(max_response_bytes=100_000)
    with pytest.raises(ResponseTooLarge, match="passed the 100000-byte limit; reading stopped"):
        await http.request("GET", str(server.make_url("/")))
    await asyncio.wait_for(stopped.wait(), timeout=10)
    assert stopped.is_set()


async def test_hanging_server_times_out(serve: Serve, open_http: OpenHttp) -> None:
    """A server that never answers: RequestTimeout (retryable) after the request's timeout."""
    gate = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await gate.wait()
        return web.Response(text="late")

    server = await serve(app_with("/", hang))
    http = await open_http()
    try:
        with pytest.raises(RequestTimeout, match=r"no complete answer within 0.2 s") as caught:
            await http.request("GET", str(server.make_url("/")), timeout_s=0.2)
    finally:
        gate.set()
    assert caught.value.retryable is True


async def test_connection_refused_is_retryable(open_http: OpenHttp, unused_tcp_port: int) -> None:
    """Nothing listening: ConnectionFailed, retryable, caused by the aiohttp error."""
    http = await open_http()
    with pytest.raises(ConnectionFailed, match=r"cannot connect to 127\.0\.0\.1") as caught:
        await http.request("GET", f"http://127.0.0.1:{unused_tcp_port}/")
    assert (True, True) == (caught.value.retryable, caught.value.__cause__ is not None)


async def test_json_body_is_posted(serve: Serve, open_http: OpenHttp) -> None:
    """``json=`` sends a JSON body with its content type; headers are passed through."""
    received: dict[str, Any] = {}

    async def echo(request: web.Request) -> web.Response:
        received.update(
            body=await request.json(), type=request.content_type, token=request.headers.get("X-Token")
        )
        return web.json_response({"stored": True}, status=201)

    server = await serve(app_with("/hook", echo))
    http = await open_http()
    response = await http.request(
        "POST", str(server.make_url("/hook")), json={"n": 12345678901234567890}, headers={"X-Token": "t1"}
    )
    assert (201, {"body": {"n": 12345678901234567890}, "type": "application/json", "token": "t1"}) == (
        response.status,
        received,
    )


async def test_non_2xx_is_returned_not_raised(serve: Serve, open_http: OpenHttp) -> None:
    """A 503 is an answer at this level: the caller gets status and body."""

    async def down(request: web.Request) -> web.Response:
        return web.Response(status=503, text="maintenance")

    server = await serve(app_with("/", down))
    http = await open_http()
    response = await http.request("GET", str(server.make_url("/")))
    assert (503, False, "maintenance") == (response.status, response.ok, response.text())


async def test_cookies_are_not_kept(serve: Serve, open_http: OpenHttp) -> None:
    """A cookie set by one answer is never sent back (watchers must not share state)."""
    seen: list[str | None] = []

    async def cookie(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Cookie"))
        response = web.Response(text="ok")
        response.set_cookie("session", "abc")
        return response

    server = await serve(app_with("/", cookie))
    http = await open_http()
    for _ in range(2):
        await http.request("GET", str(server.make_url("/")))
    assert [None, None] == seen


async def test_request_before_start_is_a_programming_error() -> None:
    """Using the client before start() says how to fix it."""
    http = SafeHttp(
        allowed_hosts=[], allow_private_networks=False, max_response_bytes=1024, request_timeout_s=1
    )
    with pytest.raises(RuntimeError, match="not started"):
        await http.request("GET", "http://127.0.0.1/")


def held_app(release: asyncio.Event, hits: list[str]) -> web.Application:
    """``/hold`` answers once ``release`` is set; ``/quick`` at once. Every request is counted."""

    async def hold(request: web.Request) -> web.Response:
        hits.append(request.path)
        await release.wait()
        return web.json_response({"held": True})

    async def quick(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.json_response({"quick": True})

    app = web.Application()
    app.router.add_get("/hold", hold)
    app.router.add_get("/quick", quick)
    return app


async def test_timeout_starts_once_a_slot_is_held(serve: Serve, open_http: OpenHttp) -> None:
    """One slot, held by a slow request: a second request waits for it longer than its own
    timeout without timing out, then is answered (waiting for a slot is not the request's time)."""
    release, hits = asyncio.Event(), []
    server = await serve(held_app(release, hits))
    http = await open_http(pool_size=1)
    first = asyncio.create_task(http.request("GET", str(server.make_url("/hold"))))
    await wait_for(lambda: hits == ["/hold"], what="the first request to hold the slot")
    second = asyncio.create_task(http.request("GET", str(server.make_url("/quick")), timeout_s=0.2))
    done, _ = await asyncio.wait({second}, timeout=0.6)  # three times its timeout
    assert (set(), ["/hold"]) == (done, hits)
    release.set()
    assert (200, 200) == ((await first).status, (await second).status)


async def test_no_slot_within_start_within_s_sends_nothing(serve: Serve, open_http: OpenHttp) -> None:
    """A request that cannot get a slot within ``start_within_s`` fails with NoSlot, unsent."""
    release, hits = asyncio.Event(), []
    server = await serve(held_app(release, hits))
    http = await open_http(pool_size=1)
    first = asyncio.create_task(http.request("GET", str(server.make_url("/hold"))))
    await wait_for(lambda: hits == ["/hold"], what="the first request to hold the slot")
    url = str(server.make_url("/quick"))
    with pytest.raises(
        NoSlot, match=r"GET http://127\.0\.0\.1:\d+/quick: did not start.*1 request slot"
    ) as info:
        await http.request("GET", url, start_within_s=0.1)
    assert (False, ["/hold"]) == (info.value.retryable, hits)
    release.set()
    await first
    assert 200 == (await http.request("GET", url, start_within_s=0.1)).status  # the slot is free again


async def test_refused_url_is_refused_every_time(open_http: OpenHttp) -> None:
    """The policy's verdict is remembered per scheme and host, refusals never: asking again,
    on the same path or another, still refuses."""
    http = await open_http(allowed_hosts=["127.0.0.1"])
    for path in ("/", "/", "/other"):
        with pytest.raises(HostNotAllowed):
            await http.request("GET", f"http://example.invalid{path}")


async def test_one_verdict_serves_every_path_of_a_host(serve: Serve, open_http: OpenHttp) -> None:
    """Many watchers on one host (a path each) keep one remembered verdict, not a parsed URL
    each (about 530 bytes apiece: 53 MB at 100,000 watchers)."""
    server = await serve(app_with("/w/{i}", ok))
    http = await open_http(allowed_hosts=["127.0.0.1"])
    for i in range(50):
        assert 200 == (await http.request("GET", str(server.make_url(f"/w/{i}")))).status
    assert 1 == len(http._allowed)


async def test_compressed_body_is_limited_after_decompression(serve: Serve, open_http: OpenHttp) -> None:
    """A small gzip body that inflates past the limit is refused, whatever Content-Length says."""
    packed = gzip.compress(b"0" * (256 * 1024))

    async def bomb(request: web.Request) -> web.Response:
        return web.Response(body=packed, headers={"Content-Encoding": "gzip", "Content-Type": "text/plain"})

    server = await serve(app_with("/z", bomb))
    http = await open_http(max_response_bytes=64 * 1024)
    assert len(packed) < 64 * 1024
    with pytest.raises(ResponseTooLarge):
        await http.request("GET", str(server.make_url("/z")))
