"""The one translation of redis-py's exceptions into Sentinel's, for every Redis client of the store
and the cluster.

Connection trouble, a command with no answer in time, and a server that takes no writes for now
(over its memory limit, a read-only replica, a failed snapshot, loading) are ``StoreUnavailable``;
anything else the server refuses is ``StoreError``. Messages start with ``where``, which names the
client and its server with any password redacted (``redacted_url``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ReadOnlyError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sentinel_hooks.errors import StoreError, StoreUnavailable

_NO_WRITES_NOW = ("used memory > 'maxmemory'", "READONLY", "MISCONF", "NOREPLICAS", "MASTERDOWN")
"""Errors of a server that refuses writes until an operator or time fixes it (matched in the text
too: inside a script's or a pipeline's error the reason is all that is left of them)."""

_REACHABLE = "check that Redis is running and reachable"


@asynccontextmanager
async def translated(where: str, what: str, *, timeout_s: float) -> AsyncIterator[None]:
    """Bound the block by ``timeout_s`` and re-raise Redis failures inside it as Sentinel's errors,
    each saying ``{where}: {what} …``. Cancellation passes through untouched.

    The bound is ``asyncio.timeout`` rather than redis-py's ``socket_timeout``: with a socket
    timeout redis-py wraps reads in ``wait_for``, which on Python 3.11 can swallow a
    cancellation, so a task stopped at shutdown could hang in its next read.
    """
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError as exc:
        raise StoreUnavailable(f"{where}: {what} got no answer within {timeout_s:g} s; {_REACHABLE}") from exc
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise StoreUnavailable(f"{where}: {what} failed: {exc}; {_REACHABLE}") from exc
    except ResponseError as exc:
        if isinstance(exc, OutOfMemoryError | ReadOnlyError) or any(
            reason in str(exc) for reason in _NO_WRITES_NOW
        ):
            raise StoreUnavailable(f"{where}: {what} failed: {exc}") from exc
        raise StoreError(f"{where}: {what} failed: {exc}") from exc
    except RedisError as exc:
        raise StoreError(f"{where}: {what} failed: {exc}") from exc
