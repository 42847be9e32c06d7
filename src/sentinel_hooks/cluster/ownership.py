"""Cluster mode for one replica: membership, leases and the keeper, behind one small object.

``ClusterOwnership`` is what ``WatcherManager`` is given when replicas share the store's state
(see its ``Ownership`` protocol): the manager tracks polled and subscribed watchers here and starts a
runner only while this replica holds the watcher's lease; runners fence each observation with
``holds``. Start it after the manager has tracked its watchers, stop it before the manager.
API changes made on a replica that does not hold a watcher's lease reach the holder through
``announce`` (``cluster.changes``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sentinel_hooks.clock import Clock
from sentinel_hooks.cluster.changes import Changed, WatcherChanges
from sentinel_hooks.cluster.keeper import Acquired, LeaseKeeper, Lost
from sentinel_hooks.cluster.leases import Leases
from sentinel_hooks.cluster.membership import Membership
from sentinel_hooks.errors import StoreError
from sentinel_hooks.store.base import SharedState

log = logging.getLogger(__name__)


class ClusterOwnership:
    """Which polled/subscribed watchers this replica runs, among all replicas sharing ``shared``
    (the store's ``SharedState``: a Redis server, whose clients are ``cluster.connection``'s)."""

    def __init__(self, shared: SharedState, *, lease_ms: int, clock: Clock) -> None:
        redis_url, key_prefix = shared.url, shared.key_prefix
        self.membership = Membership(redis_url, key_prefix=key_prefix, lease_ms=lease_ms, clock=clock)
        self.replica_id = self.membership.replica_id
        self.leases = Leases(redis_url, key_prefix=key_prefix, replica_id=self.replica_id, lease_ms=lease_ms)
        self.changes = WatcherChanges(
            redis_url, key_prefix=key_prefix, replica_id=self.replica_id, clock=clock
        )
        self.keeper = LeaseKeeper(
            self.leases,
            self.membership,
            clock=clock,
            on_acquired=self._acquired,
            on_lost=self._lost,
            announce=self.changes.announce_leases,
        )
        self._on_acquired: Acquired | None = None
        self._on_lost: Lost | None = None

    def track(self, watcher_id: str) -> int | None:
        """Consider ``watcher_id`` for a lease; its fencing token when held right now."""
        return self.keeper.track(watcher_id)

    async def untrack(self, watcher_id: str) -> None:
        """The watcher is gone from this replica: stop considering it, release its lease if held."""
        await self.keeper.untrack(watcher_id)

    async def holds(self, watcher_id: str, token: int) -> bool:
        """The fencing check: True only while this replica holds the lease with ``token``."""
        return await self.keeper.holds(watcher_id, token)

    async def announce(self, watcher_id: str, change: dict[str, Any]) -> None:
        """Tell the replica holding the watcher's lease about a change made here.

        The change is already stored; if Redis cannot take the message, the holder keeps running
        with its own state until the lease moves (then the next holder reads the stored one).
        """
        try:
            await self.changes.publish(watcher_id, change)
        except StoreError as exc:
            log.warning("watcher %s: could not tell its owner about %s: %s", watcher_id, change, exc)

    async def start(self, on_acquired: Acquired, on_lost: Lost, on_change: Changed | None = None) -> None:
        """Join the cluster and take the leases this replica should own (``StoreError`` if Redis fails).

        ``on_acquired({watcher_id: token, …})`` starts the runners of the leases one tick took,
        ``on_lost(watcher_id)`` stops one,
        ``on_change(watcher_id, change)`` applies what another replica ``announce``d.
        """
        self._on_acquired, self._on_lost = on_acquired, on_lost
        await self.changes.start(on_change, on_leases_moved=self.keeper.wake)
        await self.leases.open()
        await self.membership.start()
        await self.keeper.announce("joined")  # the others hand this replica its share at once
        await self.keeper.start()
        log.info("joined the cluster as %s (%d lease(s) held)", self.replica_id, len(self.keeper.owned()))

    async def stop(self) -> None:
        """Leave gracefully: leave the set (and say so), then stop this replica's runners and
        release their leases a batch at a time, each batch announced, so the others take them as
        they come free instead of after the last of thousands of runners stopped."""
        try:
            await self.keeper.halt()
            await self.membership.leave()
            await self.keeper.announce("leaving")
            await self.keeper.stop()
        finally:
            await self.membership.leave()
            await self.leases.close()
            await self.changes.stop()

    async def _acquired(self, tokens: Mapping[str, int]) -> None:
        if self._on_acquired is not None:
            await self._on_acquired(tokens)

    async def _lost(self, watcher_id: str) -> None:
        if self._on_lost is not None:
            await self._on_lost(watcher_id)
