"""The Redis client the cluster code uses, and how its failures map onto Sentinel's errors.

Membership and leases keep their own small client (not the store's) because their deadlines
differ: a lease renewal that gets no answer within a fraction of the lease is as good as lost.
Deadlines come from ``asyncio.timeout`` around each operation (``bounded``), never from
redis-py's ``socket_timeout``: with that set, redis-py sends through ``asyncio.wait_for``, which
on Python 3.11 can swallow a cancellation arriving as a send completes, and a replica's graceful
stop then hangs (the same reason as in ``watchers/strategies/redis_source.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sentinel_hooks.errors import StoreError, StoreUnavailable
from sentinel_hooks.store.redis_connection import redacted_url

CONNECT_TIMEOUT_S = 5.0


def open_client(url: str, *, name: str) -> Redis:
    """A client for ``url``: text replies, no built-in retries, connects lazily.

    ``name`` becomes the connections' CLIENT SETNAME, so CLIENT LIST shows whose they are.
    Raises ``StoreUnavailable`` for a malformed URL.
    """
    try:
        return Redis.from_url(
            url,
            decode_responses=True,
            client_name=name,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            socket_timeout=None,  # see the module docstring: deadlines are set by ``bounded``
            socket_keepalive=True,
            retry=Retry(NoBackoff(), 0),  # adapters try once; the keeper's next tick is the retry
        )
    except ValueError as exc:
        raise StoreUnavailable(f"cluster redis {redacted_url(url)}: invalid URL ({exc})") from exc


def command_timeout_s(lease_ms: int) -> float:
    """How long one cluster command may take: a third of the lease, between 0.5 s and 5 s."""
    return min(5.0, max(0.5, lease_ms / 3000))


@asynccontextmanager
async def bounded(url: str, what: str, *, timeout_s: float) -> AsyncIterator[None]:
    """Bound the block by ``timeout_s``; Redis failures become ``StoreUnavailable``/``StoreError``.

    Cancellation passes through untouched.
    """
    where = redacted_url(url)
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError as exc:
        raise StoreUnavailable(
            f"cluster redis {where}: {what} got no answer within {timeout_s:g} s; "
            "check that Redis is running and reachable"
        ) from exc
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise StoreUnavailable(
            f"cluster redis {where}: {what} failed: {exc}; check that Redis is running and reachable"
        ) from exc
    except RedisError as exc:
        raise StoreError(f"cluster redis {where}: {what} failed: {exc}") from exc
