"""Watcher changes made through one replica's API, applied by the replica that runs the watcher.

An API call (enable, disable, manual fire) may reach any replica, but only the lease holder runs
a polled or subscribed watcher and writes its state; its next write would undo a change another
replica stored. So the replica that took the call writes the stored state and publishes the
change on the channel ``<prefix>watcher-changes``; every replica listens, and the one holding the
watcher's lease applies it to the state it runs with. Pub/sub delivers at most once: a change
published while no replica holds the lease (a hand-off under way) is found in the stored state
by the next holder, which reads it when it acquires the lease.

The same subscription carries the keepers' announcements on ``<prefix>lease-moves``: a replica
that joined, is leaving, or released leases it handed off says so, and every other replica's
keeper ticks at once (``LeaseKeeper.wake``) instead of at its next period. Lost messages only
make a rebalance wait for the period, as it did without them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from sentinel_hooks.background import BackgroundTask
from sentinel_hooks.clock import Clock, SystemClock
from sentinel_hooks.cluster.connection import bounded, first_command, open_client
from sentinel_hooks.core.retry import call_with_retries
from sentinel_hooks.errors import StoreError
from sentinel_hooks.outages import STORE_RETRY, Outage

log = logging.getLogger(__name__)

Changed = Callable[[str, dict[str, Any]], Awaitable[None]]
"""``on_change(watcher_id, change)``: a change another replica's API made to the watcher."""
Moved = Callable[[], None]
"""``on_leases_moved()``: another replica announced that leases may have moved."""

PUBLISH_TIMEOUT_S = 2.0


class WatcherChanges:
    """Publish API changes to watchers, and hand the ones other replicas publish to ``on_change``."""

    def __init__(
        self, redis_url: str, *, key_prefix: str, replica_id: str, clock: Clock | None = None
    ) -> None:
        self._url = redis_url
        self._subscribing = Outage(log, "watcher changes: subscribing", clock=clock or SystemClock())
        self._replica_id = replica_id
        self.channel = f"{key_prefix}watcher-changes"
        self.moves_channel = f"{key_prefix}lease-moves"
        self._client: Redis | None = None
        self._loop = BackgroundTask()

    async def start(self, on_change: Changed | None, on_leases_moved: Moved | None = None) -> None:
        """Subscribe (``StoreError`` when Redis cannot be reached), then listen in the background."""
        self._client = open_client(self._url, "changes", name=f"sentinel-changes-{self._replica_id}")
        pubsub = await first_command(self._subscribe)
        self._loop.start(lambda: self._listen(pubsub, on_change, on_leases_moved))

    async def stop(self) -> None:
        await self._loop.stop()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None

    async def publish(self, watcher_id: str, change: dict[str, Any]) -> None:
        """Tell the replica running ``watcher_id`` (``StoreError`` when Redis does not answer)."""
        if self._client is None:
            return
        message = json.dumps({"watcherId": watcher_id, "from": self._replica_id, "change": change})
        async with bounded(self._url, "publish a watcher change", timeout_s=PUBLISH_TIMEOUT_S):
            await self._client.publish(self.channel, message)

    async def announce_leases(self, what: str) -> None:
        """Tell the other replicas' keepers that leases may have moved (``StoreError`` when Redis
        does not answer)."""
        if self._client is None:
            return
        async with bounded(self._url, "announce lease moves", timeout_s=PUBLISH_TIMEOUT_S):
            await self._client.publish(self.moves_channel, f"{self._replica_id} {what}")

    async def _subscribe(self) -> PubSub:
        assert self._client is not None
        pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        try:
            async with bounded(self._url, "subscribe to watcher changes", timeout_s=PUBLISH_TIMEOUT_S):
                await pubsub.subscribe(self.channel, self.moves_channel)
        except BaseException:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
            raise
        return pubsub

    async def _listen(self, pubsub: PubSub, on_change: Changed | None, on_leases_moved: Moved | None) -> None:
        while True:
            try:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            except (RedisError, OSError) as exc:
                log.warning("watcher changes: lost the subscription (%s); subscribing again", exc)
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
                pubsub = await self._resubscribe()
                continue
            if message is None:
                continue
            if message.get("channel") == self.moves_channel:
                sender = str(message.get("data")).split(" ", 1)[0]
                if on_leases_moved is not None and sender != self._replica_id:
                    on_leases_moved()
            elif on_change is not None:
                await self._deliver(message.get("data"), on_change)

    async def _resubscribe(self) -> PubSub:
        """Subscribe again, backing off while Redis is away (``outages``: a short log)."""
        await asyncio.sleep(STORE_RETRY.base_s)
        pubsub = await call_with_retries(
            self._subscribe, STORE_RETRY, retry_if=StoreError, before_sleep=self._subscribing.retried
        )
        self._subscribing.succeeded()
        return pubsub

    async def _deliver(self, data: Any, on_change: Changed) -> None:
        try:
            decoded = json.loads(data)
            watcher_id, sender, change = decoded["watcherId"], decoded["from"], decoded["change"]
        except (TypeError, ValueError, KeyError):
            log.warning("watcher changes: ignored a malformed message on %s", self.channel)
            return
        if sender == self._replica_id or not isinstance(change, dict):
            return  # this replica made it: its stored state already holds it
        try:
            await on_change(str(watcher_id), change)
        except Exception:  # one bad change must not stop the listener
            log.exception("watcher %s: applying a change from %s failed", watcher_id, sender)
