"""Contract suites: one suite per plug-in point, run against every implementation of its Protocol.

Each module here parametrizes a fixture over the implementations (every registered type and the
fake that ships in the package) and asserts only what the Protocol's docstring promises, so a
new implementation is covered by adding it to the fixture's parameters. What one implementation
does beyond the contract is tested in its own module under tests/ (delivery/, callbacks/,
watchers/strategies/, cluster/).

The sources are real: aiohttp servers on 127.0.0.1 (``serve``, whose handlers are cancelled when
a client goes away, so a source can tell a connection closed), the tests' own redis-server, real
probe processes.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from sentinel_hooks.net.client import SafeHttp
from tests.delivery.sinks import sink, slack
from tests.net.servers import Serve, serve

__all__ = ["RedisSpace", "Serve", "redis_space", "refused_port", "safe_http", "serve", "sink", "slack"]


@dataclass(frozen=True)
class RedisSpace:
    """A database of the tests' own redis-server, empty when the test starts, and a key prefix."""

    url: str
    prefix: str


def refused_port() -> int:
    """A port on 127.0.0.1 that nobody listens on (bound, read, released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
async def safe_http() -> AsyncIterator[SafeHttp]:
    """The service's HTTP client as tests use it: 127.0.0.1 allowed, 1 MiB, 5 s; closed after."""
    async with SafeHttp(
        allowed_hosts=["127.0.0.1"],
        allow_private_networks=False,
        max_response_bytes=1 << 20,
        request_timeout_s=5,
    ) as client:
        yield client


@pytest.fixture
def redis_space(redis_url: str) -> RedisSpace:
    """The shared ``redis_url`` database (empty when the test starts) and the key prefix the
    contract suites write under.

    Synchronous, so that a fixture can ask for it (``getfixturevalue``) for its Redis parameters
    only: the other parameters run without a server.
    """
    return RedisSpace(redis_url, "sentinel-test:")
