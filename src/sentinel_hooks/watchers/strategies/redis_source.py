"""What the two Redis strategies share: the client they open, error translation, payload decoding.

The client never retries by itself (redis-py would, by default): a lost connection surfaces at
once as a retryable ``ObserveError`` and the runner reconnects with backoff, so every gap shows
in the watcher's status. Messages name the server with any password masked.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.store.redis_connection import redacted_url
from sentinel_hooks.watchers.strategy import ObserveError

CONNECT_TIMEOUT_S = 5.0


def open_client(url: str, *, watcher_id: str, read_timeout_s: float | None) -> Redis:
    """A client for ``url`` (bytes replies, keepalive, no built-in retries; connects lazily).

    Its connections are named ``sentinel:<watcher id>`` so CLIENT LIST shows whose they are.
    """
    return Redis.from_url(
        url,
        client_name=f"sentinel:{watcher_id}",
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=read_timeout_s,
        socket_keepalive=True,
        retry=Retry(NoBackoff(), 0),  # adapters try once; the runner owns reconnects
    )


@contextmanager
def translated(url: str, redactor: Redactor, doing: str) -> Iterator[None]:
    """Turn ``RedisError`` / ``OSError`` raised inside into a retryable ``ObserveError``."""
    try:
        yield
    except (RedisError, OSError) as exc:
        detail = redactor.text(str(exc) or type(exc).__name__)
        raise ObserveError(f"redis {redacted_url(url)}: {doing} failed: {detail}") from exc


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
