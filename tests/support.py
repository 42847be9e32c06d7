"""Test helpers: waiting on conditions with a deadline, and small local HTTP endpoints."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web

T = TypeVar("T")


async def wait_for(
    probe: Callable[[], Awaitable[T] | T],
    *,
    timeout_s: float = 10.0,
    interval_s: float = 0.02,
    what: str = "",
) -> T:
    """Poll ``probe`` until it returns a truthy value; fail with ``what`` after the deadline."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        result = probe()
        if asyncio.iscoroutine(result) or isinstance(result, Awaitable):
            result = await result
        if result:
            return result  # type: ignore[return-value]
        last = result
        await asyncio.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what or probe} (last: {last!r})")


def wait_until(
    probe: Callable[[], T], *, timeout_s: float = 15.0, interval_s: float = 0.05, what: str = ""
) -> T:
    """The synchronous form of ``wait_for`` (for subprocess tests)."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        result = probe()
        if result:
            return result
        last = result
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what or probe} (last: {last!r})")


class Endpoint:
    """A programmable HTTP endpoint on 127.0.0.1: set ``handler`` per test; counts requests."""

    def __init__(self) -> None:
        self.requests = 0
        self.handler: Callable[[web.Request], Awaitable[web.StreamResponse]] = self._default
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def _default(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"status": "ok"})

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        return await self.handler(request)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
