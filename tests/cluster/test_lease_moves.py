"""Rebalancing without waiting for ticks: replicas announce joins, leaves and released leases, and
the others' keepers tick at once (``LeaseKeeper.wake``)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import pytest

from sentinel_hooks.clock import SystemClock
from sentinel_hooks.cluster import ClusterOwnership
from sentinel_hooks.cluster.rendezvous import owned_by
from sentinel_hooks.store.base import SharedState
from tests.cluster.conftest import PREFIX, watcher_ids
from tests.support import wait_for

pytestmark = pytest.mark.redis

IDS = watcher_ids(40)
SLOW_LEASE_MS = 30_000  # a tick every 10 s: anything settled within seconds did not wait for one
WITHIN_S = 4.0


class Node:
    """One replica's ``ClusterOwnership`` with callbacks that record what it runs."""

    def __init__(self, redis_url: str) -> None:
        self.ownership = ClusterOwnership(
            SharedState(url=redis_url, key_prefix=PREFIX), lease_ms=SLOW_LEASE_MS, clock=SystemClock()
        )
        self.running: set[str] = set()

    async def start(self) -> None:
        for watcher_id in IDS:
            self.ownership.track(watcher_id)

        async def acquired(tokens: object) -> None:
            self.running.update(tokens)  # type: ignore[arg-type]

        async def lost(watcher_id: str) -> None:
            self.running.discard(watcher_id)

        await self.ownership.start(acquired, lost)


@pytest.fixture
async def nodes(redis_url: str) -> AsyncIterator[Callable[[], Node]]:
    made: list[Node] = []

    def make() -> Node:
        made.append(Node(redis_url))
        return made[-1]

    yield make
    for node in made:
        await node.ownership.stop()


def shares(nodes: list[Node]) -> bool:
    live = sorted(n.ownership.replica_id for n in nodes)
    return all(n.running == owned_by(n.ownership.replica_id, IDS, live) for n in nodes)


async def test_a_join_settles_without_waiting_for_a_tick(nodes: Callable[[], Node]) -> None:
    """B joins A: A hands B its share and B takes it within seconds, not a tick (10 s) or two."""
    a, b = nodes(), nodes()
    await a.start()
    joined = time.monotonic()
    await b.start()
    await wait_for(lambda: shares([a, b]) and bool(b.running), timeout_s=WITHIN_S, what="B's share")
    assert time.monotonic() - joined < WITHIN_S


async def test_a_graceful_leave_hands_over_without_waiting_for_a_tick(nodes: Callable[[], Node]) -> None:
    """B leaves: A runs every watcher within seconds, not at its next tick."""
    a, b = nodes(), nodes()
    await a.start()
    await b.start()
    await wait_for(lambda: shares([a, b]) and bool(b.running), timeout_s=WITHIN_S, what="B's share")
    await b.ownership.stop()
    await wait_for(lambda: a.running == set(IDS), timeout_s=WITHIN_S, what="A runs all")
