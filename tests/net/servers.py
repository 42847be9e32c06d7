"""Real aiohttp servers on 127.0.0.1 for wire tests, and a resolver that answers what a test says."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestServer

from sentinel_hooks.net.client import SafeHttp

Serve = Callable[[web.Application], Awaitable[TestServer]]
OpenHttp = Callable[..., Awaitable[SafeHttp]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start ``app`` on 127.0.0.1 (a free port); every server is closed after the test."""
    servers: list[TestServer] = []

    async def start(app: web.Application) -> TestServer:
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()


@pytest.fixture
async def open_http() -> AsyncIterator[OpenHttp]:
    """Start a ``SafeHttp`` (127.0.0.1 allowed, 64 KiB, 5 s unless overridden); closed after the test."""
    clients: list[SafeHttp] = []

    async def start(**overrides: Any) -> SafeHttp:
        options: dict[str, Any] = {
            "allowed_hosts": ["127.0.0.1"],
            "allow_private_networks": False,
            "max_response_bytes": 64 * 1024,
            "request_timeout_s": 5.0,
        }
        http = SafeHttp(**(options | overrides))
        await http.start()
        clients.append(http)
        return http

    yield start
    for client in clients:
        await client.close()


def app_with(path: str, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.Application:
    """An application answering GET and POST on ``path`` with ``handler``."""
    app = web.Application()
    app.router.add_route("*", path, handler)
    return app


class ScriptedResolver(AbstractResolver):
    """Answers each lookup with the next address list in ``answers`` (the last one repeats)."""

    def __init__(self, *answers: Sequence[str]) -> None:
        self.answers = [list(a) for a in answers]
        self.lookups: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups.append(host)
        addresses = self.answers[min(len(self.lookups), len(self.answers)) - 1]
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in addresses
        ]

    async def close(self) -> None:
        return None


@pytest.fixture
def datagrams() -> Iterator[socket.socket]:
    """A UDP socket bound to 127.0.0.1, as a syslog server would be: what the tests send to it."""
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(5)
    yield receiver
    receiver.close()


def received(receiver: socket.socket) -> list[bytes]:
    """The datagrams that reached ``receiver`` so far: an unguarded marker datagram is sent after the
    test's own, and everything read before it is returned (no waiting on a hunch)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as marker:
        marker.sendto(b"marker", receiver.getsockname())
    found: list[bytes] = []
    while (datagram := receiver.recv(65536)) != b"marker":
        found.append(datagram)
    return found
