"""Which replicas are alive: each one heartbeats into one sorted set, scored by last-seen time.

Key ``<prefix>replicas`` (a sorted set, the only key membership writes): member = replica id,
score = epoch ms of its last heartbeat, written every ``lease_ms / 3``. A replica is live while
its score is within ``lease_ms`` of now, so a dead one drops out after at most ``lease_ms``;
``leave`` removes it at once on a graceful stop. Entries long dead are pruned by every
heartbeat, so the set does not grow with restarts.

Scores come from each replica's injected clock: replicas' clocks must agree to well within
``lease_ms`` (NTP). Skew only makes replicas disagree about who *should* own a watcher for a
while; leases (``leases.py``) still let only one of them hold it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket

from redis.asyncio import Redis

from sentinel_hooks.background import BackgroundTask
from sentinel_hooks.clock import Clock, to_ms
from sentinel_hooks.cluster.connection import bounded, command_timeout_s, first_command, open_client
from sentinel_hooks.errors import StoreError, StoreUnavailable
from sentinel_hooks.outages import Outage

log = logging.getLogger(__name__)

PRUNE_AFTER_LEASES = 10  # entries older than this many leases are removed by heartbeats


def new_replica_id() -> str:
    """``<hostname>-<pid>-<4 random hex>``: unique per process start, readable in logs."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


class Membership:
    """This replica's heartbeat, and the live replicas as seen from here."""

    def __init__(
        self,
        redis_url: str,
        *,
        key_prefix: str = "sentinel:",
        lease_ms: int,
        clock: Clock,
        replica_id: str | None = None,
    ) -> None:
        self.url = redis_url
        self.replica_id = replica_id or new_replica_id()
        self.key = f"{key_prefix}replicas"
        self.lease_ms = lease_ms
        self._clock = clock
        self._timeout_s = command_timeout_s(lease_ms)
        self._client: Redis | None = None
        self._loop = BackgroundTask()
        self._beats = Outage(log, "cluster heartbeat", clock=clock)

    @property
    def client(self) -> Redis:
        """The open client; ``StoreUnavailable`` before ``open``/``start``."""
        if self._client is None:
            raise StoreUnavailable("cluster membership is not open; call `await membership.start()`")
        return self._client

    async def open(self) -> None:
        """Create the client (it connects on first use); idempotent."""
        if self._client is None:
            self._client = open_client(self.url, "membership", name=f"sentinel-membership:{self.replica_id}")

    async def start(self) -> None:
        """Open, heartbeat once (raising if Redis cannot be reached), then every ``lease_ms / 3``."""
        await self.open()
        await first_command(self.heartbeat)
        self._loop.start(self._beat_forever)

    async def heartbeat(self) -> None:
        """Record this replica as seen now, and prune replicas dead for ``PRUNE_AFTER_LEASES`` leases."""
        now_ms = to_ms(self._clock.now())
        async with (
            bounded(self.url, "heartbeat", timeout_s=self._timeout_s),
            self.client.pipeline(transaction=True) as pipe,
        ):
            pipe.zadd(self.key, {self.replica_id: now_ms})
            pipe.zremrangebyscore(self.key, "-inf", now_ms - PRUNE_AFTER_LEASES * self.lease_ms)
            await pipe.execute()

    async def live(self) -> list[str]:
        """Ids of the replicas seen within ``lease_ms``, sorted."""
        since_ms = to_ms(self._clock.now()) - self.lease_ms
        async with bounded(self.url, "list replicas", timeout_s=self._timeout_s):
            members = await self.client.zrangebyscore(self.key, f"({since_ms}", "+inf")
        return sorted(str(member) for member in members)

    async def leave(self) -> None:
        """Graceful stop: stop heartbeating, remove this replica from the set, close the client."""
        await self.halt()
        if self._client is not None:
            try:
                async with bounded(self.url, "leave", timeout_s=self._timeout_s):
                    await self._client.zrem(self.key, self.replica_id)
            except StoreError as exc:
                log.warning("could not leave the cluster (others notice within the lease): %s", exc)
        await self.close()

    async def halt(self) -> None:
        """Stop heartbeating without leaving (others see this replica die after ``lease_ms``)."""
        await self._loop.stop()

    async def close(self) -> None:
        """Stop heartbeating and close the client; idempotent."""
        await self.halt()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()

    async def _beat_forever(self) -> None:
        while True:
            await self._clock.sleep(self.lease_ms / 3000)
            try:
                await self.heartbeat()
            except StoreError as exc:  # beats stay a third of a lease apart: they are what keeps it
                self._beats.failed(exc)
            else:
                self._beats.succeeded()
