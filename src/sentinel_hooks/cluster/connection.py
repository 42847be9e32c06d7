"""The Redis clients the cluster code uses, and how their failures map onto Sentinel's errors.

Membership, leases, watcher changes and the session stream each keep their own small client
with its own bounded pool (``POOL_SIZES``), not the store's: a lease renewal or a heartbeat that
waits behind a burst of store writes for a connection, past a fraction of the lease, is as good
as lost. Each pool makes a command wait for a free connection rather than fail
(``store.redis_connection.new_client``); what they hold is small and fixed, so a process opens
at most the store's 64 connections plus ``sum(POOL_SIZES.values())`` to its Redis.
Deadlines come from ``asyncio.timeout`` around each operation (``bounded``), never from
redis-py's ``socket_timeout``: with that set, redis-py sends through ``asyncio.wait_for``, which
on Python 3.11 can swallow a cancellation arriving as a send completes, and a replica's graceful
stop then hangs (the same reason as in ``watchers/strategies/redis_source.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sentinel_hooks.errors import StoreError, StoreUnavailable
from sentinel_hooks.store.redis_connection import new_client, redacted_url

CONNECT_TIMEOUT_S = 5.0

Role = Literal["leases", "membership", "changes", "sessions"]

POOL_SIZES: dict[Role, int] = {
    "leases": 4,  # one keeper tick at a time (three pipelines), plus releases of untracked watchers
    "membership": 2,  # the heartbeat loop and the keeper's read of the live replicas
    "changes": 4,  # the subscription holds one for good; publishes of API changes share the rest
    "sessions": 32,  # one blocking read, reclaims, and a few commands per running hook session
}


def open_client(url: str, role: Role, *, name: str) -> Redis:
    """A client for ``url`` with ``role``'s bounded pool: text replies, no built-in retries
    (the keeper's next tick is the retry), connects lazily.

    ``name`` becomes the connections' CLIENT SETNAME, so CLIENT LIST shows whose they are.
    Raises ``StoreUnavailable`` for a malformed URL.
    """
    try:
        return new_client(
            url, name=name, max_connections=POOL_SIZES[role], connect_timeout_s=CONNECT_TIMEOUT_S
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
