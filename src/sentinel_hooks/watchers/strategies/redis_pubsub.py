"""The `redis-pubsub` strategy (SPEC.md §3): each message on a Redis channel is an observation.

``channel`` is subscribed with SUBSCRIBE, or PSUBSCRIBE when it holds a glob character (``*``,
``?``, ``[``). The observation is the message's data alone, parsed as JSON, else
``{"text": data}``; the channel it came on is not part of it (conditions see what was
published, as with SSE and WebSocket messages). Pub/sub keeps nothing for absent subscribers:
messages published while disconnected are lost, which the runner records as a reconnect gap.
A lost connection raises ``ObserveError``, and so does a silent one: after ``IDLE_PING_S``
without traffic the server is PINGed, and no answer within as long again ends the stream.
Cancelling the stream closes the connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio import Redis

from sentinel_hooks.config.watcher import RedisPubSubWatcher
from sentinel_hooks.store.urls import redacted_url
from sentinel_hooks.watchers.strategies.redis_source import (
    COMMAND_TIMEOUT_S,
    open_client,
    parse_payload,
    quietly,
    translated,
)
from sentinel_hooks.watchers.strategy import Observed, StrategyContext, TransientObserveError

GLOB_CHARS = frozenset("*?[")
# With no message for this long, PING the server; with no answer for as long again, the
# connection is dead (a peer that vanished without closing it would otherwise hang us forever).
IDLE_PING_S = 30.0


def is_pattern(channel: str) -> bool:
    """Whether ``channel`` is a glob pattern (PSUBSCRIBE) rather than a channel name."""
    return any(char in GLOB_CHARS for char in channel)


class RedisPubSub:
    """Subscribes to one channel or pattern and yields each published message."""

    def __init__(
        self, watcher: RedisPubSubWatcher, context: StrategyContext, *, idle_ping_s: float = IDLE_PING_S
    ) -> None:
        self._watcher = watcher
        self._context = context
        self._idle_ping_s = idle_ping_s
        self._client: Redis | None = None

    async def stream(self) -> AsyncIterator[Observed]:
        """Subscribe, then yield one observation per message until the connection fails."""
        url, channel = self._watcher.redis_url, self._watcher.channel
        client = open_client(url, watcher_id=self._watcher.id)
        self._client = client
        pubsub = client.pubsub()  # confirmations and pongs are returned too: None means silence
        try:
            async with translated(url, self._context.redactor, f"subscribing to {channel!r}"):
                if is_pattern(channel):
                    await pubsub.psubscribe(channel)
                else:
                    await pubsub.subscribe(channel)
            pinged = False
            reading, deadline_s = f"reading {channel!r}", self._idle_ping_s + COMMAND_TIMEOUT_S
            while True:
                async with translated(url, self._context.redactor, reading, timeout_s=deadline_s):
                    message: dict[str, Any] | None = await pubsub.get_message(timeout=self._idle_ping_s)
                    if message is None and not pinged:
                        await pubsub.ping()
                        pinged = True
                        continue
                if message is None:
                    raise TransientObserveError(
                        f"redis {redacted_url(url)}: no answer to PING within {self._idle_ping_s:g} s "
                        f"while subscribed to {channel!r}; the connection is presumed dead"
                    )
                pinged = False
                if message["type"] in ("message", "pmessage"):
                    yield Observed(value=parse_payload(message["data"]), at=self._context.clock.now())
        finally:
            with quietly():
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
            await self._release(client)

    async def close(self) -> None:
        """Close the connection if a stream is open."""
        if self._client is not None:
            await self._release(self._client)

    async def _release(self, client: Redis) -> None:
        if self._client is client:
            self._client = None
        with quietly():
            await client.aclose()


def create(watcher: RedisPubSubWatcher, context: StrategyContext) -> RedisPubSub:
    """The subscription strategy for a ``redis-pubsub`` watcher."""
    return RedisPubSub(watcher, context)
