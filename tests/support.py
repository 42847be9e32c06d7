"""Test helpers: waiting on conditions with a deadline, small local HTTP endpoints, a slow model."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import pytest
from aiohttp import web

from sentinel_hooks.testing import FakeOpenAIServer

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


class Sink(Endpoint):
    """A webhook receiver on 127.0.0.1 that records every request; ``statuses`` scripts its answers.

    ``statuses`` is consumed one per request (then 200): e.g. ``[429]`` answers 429 once.
    ``retry_after`` is sent with 429/503 answers.
    """

    def __init__(self) -> None:
        super().__init__()
        self.received: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.retry_after: str | None = None
        self.handler = self._record

    async def _record(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        status = self.statuses.pop(0) if self.statuses else 200
        self.received.append(
            {"headers": dict(request.headers), "raw": raw, "path": request.path, "status": status}
        )
        headers = {"Retry-After": self.retry_after} if self.retry_after and status in (429, 503) else {}
        return web.json_response({"ok": status < 300}, status=status, headers=headers)

    def bodies(self, kind: str | None = None) -> list[dict[str, Any]]:
        """JSON bodies answered 2xx, optionally only those whose Idempotency-Key ends with ``kind``."""
        import json

        found = []
        for request in self.received:
            key = request["headers"].get("Idempotency-Key", "")
            if kind is not None and not key.endswith(f":{kind}"):
                continue
            if request["status"] < 300:
                found.append(json.loads(request["raw"]))
        return found


def unavailable(reason: str, *, in_ci: str) -> NoReturn:
    """Something a test needs is not on this machine: skip it locally, fail when ``CI`` is set
    (``.ci/run`` installs it, so its absence there is a broken CI, not a skipped test)."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; {in_ci}")
    pytest.skip(reason)


class HeldModel(FakeOpenAIServer):
    """A model server stand-in that holds its first request until ``answer`` is set: the agent
    that takes its time (``held`` is set once that request arrived)."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()
        self.held = asyncio.Event()
        self._first = True

    async def _handle(self, request: web.Request) -> web.Response:
        if self._first:
            self._first = False
            self.held.set()
            await self.answer.wait()
        return await super()._handle(request)
