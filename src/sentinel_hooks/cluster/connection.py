"""The Redis clients the cluster code uses, and how their failures map onto Sentinel's errors.

Membership, leases, watcher changes and the session stream each keep their own small client
with its own bounded pool (``POOL_SIZES``), not the store's: a lease renewal or a heartbeat that
waits behind a burst of store writes for a connection, past a fraction of the lease, is as good
as lost. Each pool makes a command wait for a free connection rather than fail
(``store.redis.connection.new_client``); what they hold is small and fixed, so a process opens
at most the store's 64 connections plus ``sum(POOL_SIZES.values())`` to its Redis.
Deadlines come from ``asyncio.timeout`` around each operation (``bounded``), never from
redis-py's ``socket_timeout``: with that set, redis-py sends through ``asyncio.wait_for``, which
on Python 3.11 can swallow a cancellation arriving as a send completes, and a replica's graceful
stop then hangs (the same reason as in ``watchers/strategies/redis_source.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Literal, TypeVar

from redis.asyncio import Redis

from sentinel_hooks.core.retry import Backoff, call_with_retries
from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store.redis.connection import new_client
from sentinel_hooks.store.redis.errors import translated
from sentinel_hooks.store.urls import redacted_url

CONNECT_TIMEOUT_S = 5.0
FIRST_COMMAND_ATTEMPTS = 3  # see ``first_command``
# Tried again at once: each try is bounded by a command timeout, which is the pause that matters.
FIRST_COMMAND_BACKOFF = Backoff(base_s=0, cap_s=0, max_attempts=FIRST_COMMAND_ATTEMPTS)

T = TypeVar("T")

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


async def first_command(call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, a client's first command at start, tried ``FIRST_COMMAND_ATTEMPTS`` times on
    ``StoreUnavailable``: it also opens the connection, which a busy machine can delay past one
    command's bound (a third of the lease, 0.5 s at the shortest). A Redis that is really down
    fails all attempts within a few bounds, and the start fails with its error."""
    return await call_with_retries(call, FIRST_COMMAND_BACKOFF, retry_if=StoreUnavailable)


@asynccontextmanager
async def bounded(url: str, what: str, *, timeout_s: float) -> AsyncIterator[None]:
    """Bound the block by ``timeout_s``; Redis failures become ``StoreUnavailable``/``StoreError``
    (``store.redis.errors.translated``, as for the store), naming the cluster's server.

    Cancellation passes through untouched.
    """
    async with translated(f"cluster redis {redacted_url(url)}", what, timeout_s=timeout_s):
        yield
