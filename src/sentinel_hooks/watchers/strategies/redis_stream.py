"""The `redis-stream` strategy (SPEC.md §3): entries of a Redis stream, read in a consumer group.

Delivery is at least once. Each ``Observed`` carries ``ack`` (XACK of its entry), which the
runner awaits only after the observation is stored, so an entry read but not stored before a
crash or a lost connection is read again:

1. The group is created if missing (``MKSTREAM``, starting at ``$``: only new entries).
2. Entries another consumer of the group left pending for ``claim_idle_ms`` (a Sentinel process
   that died; consumer names contain the pid, so a restarted process has a new name) are
   claimed with XAUTOCLAIM.
3. This consumer's own pending entries (``0``) are delivered again, oldest first.
4. Then new entries (``>``), with XREADGROUP BLOCK bounded (``block_ms``); a read that gets no
   answer within ``block_ms`` + ``COMMAND_TIMEOUT_S`` means a dead connection.

An entry whose fields are a single ``data``, ``json`` or ``payload`` field holding JSON is
observed as that JSON value; any other entry as its field map (``{"field": "value", …}``, all
strings). An entry deleted from the stream while pending is acknowledged and skipped.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from sentinel_hooks.config.watcher import RedisStreamWatcher
from sentinel_hooks.watchers.strategies.redis_source import (
    COMMAND_TIMEOUT_S,
    as_text,
    open_client,
    quietly,
    translated,
)
from sentinel_hooks.watchers.strategy import Observed, StrategyContext

BLOCK_MS = 5000
BATCH = 100
CLAIM_IDLE_MS = 60_000
PAYLOAD_FIELDS = frozenset({"data", "json", "payload"})
Entry = tuple[bytes, dict[bytes, bytes]]


def default_consumer() -> str:
    """``sentinel-<hostname>-<pid>``: stable for the life of this process."""
    return f"sentinel-{socket.gethostname()}-{os.getpid()}"


def entry_value(fields: dict[bytes, bytes]) -> Any:
    """The observation for one entry's fields (see the module docstring)."""
    text = {as_text(key): as_text(value) for key, value in fields.items()}
    if len(text) == 1:
        ((name, raw),) = text.items()
        if name in PAYLOAD_FIELDS:
            try:
                return json.loads(raw)
            except ValueError:
                pass  # not JSON: observed as the field map below
    return text


class RedisStreamReader:
    """Reads one stream as one consumer of one group; the runner acks each entry once stored."""

    def __init__(
        self,
        watcher: RedisStreamWatcher,
        context: StrategyContext,
        *,
        consumer: str | None = None,
        block_ms: int = BLOCK_MS,
        claim_idle_ms: int = CLAIM_IDLE_MS,
    ) -> None:
        self._watcher = watcher
        self._context = context
        self.consumer = consumer or default_consumer()
        self._block_ms = block_ms
        self._claim_idle_ms = claim_idle_ms
        self._client: Redis | None = None

    async def stream(self) -> AsyncIterator[Observed]:
        """Yield pending entries again, then new ones, until the connection fails."""
        client = self._open()
        self._client = client
        try:
            async with self._translated("creating the consumer group"):
                await self._ensure_group(client)
            async with self._translated("claiming abandoned entries"):
                await self._claim_abandoned(client)
            cursor = b"0"
            while entries := await self._read(client, cursor):
                for entry_id, fields in entries:
                    cursor = entry_id
                    if fields:
                        yield self._observed(client, entry_id, fields)
                    else:
                        await self._ack(client, entry_id)
            while True:
                for entry_id, fields in await self._read(client, b">"):
                    yield self._observed(client, entry_id, fields)
        finally:
            await self._release(client)

    async def close(self) -> None:
        """Close the connection if a stream is open."""
        if self._client is not None:
            await self._release(self._client)

    async def _ensure_group(self, client: Redis) -> None:
        try:
            await client.xgroup_create(self._watcher.stream, self._watcher.group, id="$", mkstream=True)
        except ResponseError as exc:
            if not str(exc).startswith("BUSYGROUP"):
                raise

    async def _claim_abandoned(self, client: Redis) -> None:
        start: bytes | str = "0-0"
        while True:
            reply = await client.xautoclaim(
                self._watcher.stream,
                self._watcher.group,
                self.consumer,
                min_idle_time=self._claim_idle_ms,
                start_id=start,
                count=BATCH,
            )
            start = reply[0]
            if start in (b"0-0", "0-0"):
                return

    async def _read(self, client: Redis, after: bytes) -> list[Entry]:
        block = self._block_ms if after == b">" else None
        async with self._translated("reading", timeout_s=self._block_ms / 1000 + COMMAND_TIMEOUT_S):
            reply = await client.xreadgroup(
                self._watcher.group, self.consumer, {self._watcher.stream: after}, count=BATCH, block=block
            )
        streams = cast(list[tuple[bytes, list[Entry]]] | None, reply)  # [[name, [(id, fields), …]]]
        return [entry for _name, entries in streams or [] for entry in entries]

    def _observed(self, client: Redis, entry_id: bytes, fields: dict[bytes, bytes]) -> Observed:
        async def ack() -> None:
            if self._client is client:
                await self._ack(client, entry_id)
                return
            # The stream that read the entry has closed since: ack over a short-lived connection.
            spare = self._open()
            try:
                await self._ack(spare, entry_id)
            finally:
                await self._release(spare)

        return Observed(value=entry_value(fields), at=self._context.clock.now(), ack=ack)

    async def _ack(self, client: Redis, entry_id: bytes) -> None:
        async with self._translated(f"acknowledging entry {as_text(entry_id)}"):
            await client.xack(self._watcher.stream, self._watcher.group, entry_id)

    def _translated(
        self, doing: str, *, timeout_s: float = COMMAND_TIMEOUT_S
    ) -> AbstractAsyncContextManager[None]:
        where = f"{doing} on stream {self._watcher.stream!r} (group {self._watcher.group!r})"
        return translated(self._watcher.redis_url, self._context.redactor, where, timeout_s=timeout_s)

    def _open(self) -> Redis:
        return open_client(self._watcher.redis_url, watcher_id=self._watcher.id)

    async def _release(self, client: Redis) -> None:
        if self._client is client:
            self._client = None
        with quietly():
            await client.aclose()


def create(watcher: RedisStreamWatcher, context: StrategyContext) -> RedisStreamReader:
    """The subscription strategy for a ``redis-stream`` watcher."""
    return RedisStreamReader(watcher, context)
