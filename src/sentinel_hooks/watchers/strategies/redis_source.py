"""What the two Redis strategies share: the client they open, error translation, payload decoding.

The client never retries by itself (redis-py would, by default): a lost connection surfaces at
once as a retryable ``ObserveError`` and the runner reconnects with backoff, so every gap shows
in the watcher's status. Messages name the server with any password masked.

Deadlines come from ``asyncio.timeout`` around each operation (``translated``), not from
redis-py's ``socket_timeout``: with that set, redis-py sends through ``asyncio.wait_for``, which
on Python 3.11 can swallow a cancellation arriving just as the send completes — the task then
blocks in the next read and a shutdown hangs. Without it, cancelling always stops a strategy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.store.redis.connection import new_client
from sentinel_hooks.store.urls import redacted_url
from sentinel_hooks.watchers.strategy import TransientObserveError

CONNECT_TIMEOUT_S = 5.0
# A command (connecting included) that gets no answer within this long means a dead link.
COMMAND_TIMEOUT_S = 10.0


def open_client(url: str, *, watcher_id: str) -> Redis:
    """A client for ``url`` (bytes replies, keepalive, no built-in retries; connects lazily).

    Its connections are named ``sentinel:<watcher id>`` so CLIENT LIST shows whose they are; a
    strategy reads one subscription or stream at a time, so its pool holds two at most.
    """
    return new_client(
        url,
        name=f"sentinel:{watcher_id}",
        max_connections=2,
        connect_timeout_s=CONNECT_TIMEOUT_S,
        decode_responses=False,
    )


@asynccontextmanager
async def translated(
    url: str, redactor: Redactor, doing: str, *, timeout_s: float = COMMAND_TIMEOUT_S
) -> AsyncIterator[None]:
    """Bound the block by ``timeout_s`` and turn what it raises into a ``TransientObserveError``.

    Covers ``RedisError``, ``OSError`` and the deadline passing; cancellation passes through.
    """
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError as exc:
        where = redacted_url(url)
        raise TransientObserveError(f"redis {where}: {doing} got no answer within {timeout_s:g} s") from exc
    except (RedisError, OSError) as exc:
        detail = redactor.text(str(exc) or type(exc).__name__)
        raise TransientObserveError(f"redis {redacted_url(url)}: {doing} failed: {detail}") from exc


def quietly() -> contextlib.suppress:
    """Suppress what closing a broken connection may raise (the failure is already reported)."""
    return contextlib.suppress(RedisError, OSError)


def as_text(raw: bytes | str) -> str:
    """A reply as text (invalid UTF-8 replaced, never raising)."""
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw


def parse_payload(raw: bytes | str) -> Any:
    """The JSON value ``raw`` holds, or ``{"text": raw}`` when it is not JSON."""
    text = as_text(raw)
    try:
        return json.loads(text)
    except ValueError:
        return {"text": text}
