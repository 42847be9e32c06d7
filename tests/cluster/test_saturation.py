"""A replica offered more polls than its CPU can make keeps its leases (issue 34, scale-out).

A real redis-server (tests/conftest.py); the polls are scheduler jobs that burn CPU, so the event
loop is saturated the way a capped replica's is."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest
import redis.asyncio
from apscheduler.triggers.interval import IntervalTrigger

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.cluster.keeper import STOPS_AT_ONCE, STOPS_AT_ONCE_LEAVING
from sentinel_hooks.watchers.schedule import LoopScheduler, add_poll_job
from tests.cluster.conftest import MakeReplica, Replica, watcher_ids
from tests.support import wait_for

pytestmark = pytest.mark.redis

LEASE_MS = 3000  # a tick every 1 s; a lease not renewed for 2 s is dropped; commands bounded by 1 s


class HeldStops:
    """Runner stops held until ``gate`` is set, counted: how many are stopping now, and at most."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.stopping = self.most = 0

    async def before_lost(self, _: str) -> None:
        self.stopping += 1
        self.most = max(self.most, self.stopping)
        await self.gate.wait()
        self.stopping -= 1


async def test_renewals_stay_on_time_while_polls_saturate_the_loop(make_replica: MakeReplica) -> None:
    """3,000 polls of 1 ms of CPU each due every second (three times what one core can do) for
    two leases' time: the replica polls what it can and loses no lease. Without admission the
    scheduler turns each second's 3,000 due jobs into tasks at once, a 3 s turn of the loop: the
    renewals come too late and every lease is dropped."""
    replica = make_replica("a", lease_ms=LEASE_MS)
    ids = watcher_ids(200)
    await replica.start(ids)
    await replica.keeper.drain()
    assert set(ids) == replica.running
    scheduler = LoopScheduler(timezone=UTC)
    scheduler.STARTS_PER_TURN = 4  # a few ms of CPU per turn even on a loaded machine
    polls = 0

    async def poll() -> None:
        nonlocal polls
        polls += 1
        until = time.process_time() + 0.001
        while time.process_time() < until:
            pass

    now = datetime.now(UTC)
    for i in range(3_000):
        trigger = IntervalTrigger(
            seconds=1, start_date=now + timedelta(milliseconds=i % 1000), timezone="UTC"
        )
        add_poll_job(scheduler, f"j{i}", poll, trigger, now)
    loop = asyncio.get_running_loop()
    began = loop.time()
    scheduler.start()
    try:
        await asyncio.sleep(2 * LEASE_MS / 1000)  # the load is the test: nothing to wait for
    finally:
        scheduler.shutdown(wait=False)
    took_s = loop.time() - began
    for _ in range(2):  # the keeper's own ticks after the load: they see what it did to the leases
        await asyncio.wait_for(replica.keeper._ticked.wait(), 5 * LEASE_MS / 1000)
    assert took_s < 2.5 * LEASE_MS / 1000  # the loop kept turning: the sleep ended near its time
    assert polls > 500  # it did poll (about 1,000 a second on a free core)
    assert ([], set(ids)) == (replica.lost, set(replica.keeper.owned()))


async def test_leases_lost_at_once_stop_their_runners_a_batch_at_a_time(
    make_replica: MakeReplica, raw: redis.asyncio.Redis
) -> None:
    """600 leases lost in one tick (gone from under the replica) are one callback batch: at most
    ``STOPS_AT_ONCE`` runners stop at a time, not 600 tasks in one turn of the loop; all stop
    (and the same tick takes the free leases again, started once the batch is through)."""
    stops = HeldStops()
    replica = make_replica("a", before_lost=stops.before_lost)
    ids = watcher_ids(600)
    await replica.start(ids)
    await replica.keeper.drain()
    await raw.delete(*(replica.leases.key(w) for w in ids))  # gone from the server: the renewal says so
    await replica.keeper.halt()
    await replica.keeper.tick()
    await wait_for(lambda: stops.stopping == STOPS_AT_ONCE, what="the first runners stopping")
    tasks = len(asyncio.all_tasks())
    await asyncio.sleep(0.05)
    assert (STOPS_AT_ONCE, STOPS_AT_ONCE) == (stops.most, stops.stopping)
    assert tasks < STOPS_AT_ONCE + 50
    stops.gate.set()
    await wait_for(lambda: len(replica.lost) == len(ids), what="every runner stopped")
    assert STOPS_AT_ONCE == stops.most
    assert sorted(ids) == sorted(replica.lost)


async def test_leases_stay_renewed_through_a_long_acquisition(make_replica: MakeReplica) -> None:
    """Starting the runners of each part of the leases taken moves the clock half a tick (a
    replica short of CPU): taking 20,000 in one tick lasts about five ticks. The held leases are
    renewed on the way and each taken lease counts from its own round trip, so none is dropped
    unrenewed at the end of the tick (all were, tick after tick, in a 60,000-watcher benchmark)."""
    clock = FakeClock()
    replica: Replica

    async def slow_start(_: Mapping[str, int]) -> None:
        clock.advance(replica.keeper.tick_s * 0.51)

    replica = make_replica("a", clock=clock, before_acquired=slow_start)
    ids = watcher_ids(20_000)
    for watcher_id in ids:
        replica.keeper.track(watcher_id)
    await replica.leases.open()
    await replica.membership.open()
    await replica.membership.heartbeat()
    began = clock.now()
    await replica.keeper.tick()
    await replica.keeper.drain()
    assert (clock.now() - began).total_seconds() > 3 * replica.keeper.tick_s
    assert (set(ids), set(ids), []) == (set(replica.keeper.owned()), replica.running, replica.lost)


async def test_a_graceful_stop_stops_more_runners_at_a_time_than_a_hand_off(
    make_replica: MakeReplica, raw: redis.asyncio.Redis
) -> None:
    """Leaving, no poll waits behind the runners' stops (the service starts none any more), and
    each stop waits for its state's write: up to ``STOPS_AT_ONCE_LEAVING`` stop at a time, not
    ``STOPS_AT_ONCE`` (60,000 runners took 469 round trips, past ``sentinel run``'s limit);
    every lease is released once its runner stopped."""
    stops = HeldStops()
    replica = make_replica("a", before_lost=stops.before_lost)
    ids = watcher_ids(600)
    await replica.start(ids)
    await replica.keeper.drain()
    stop = asyncio.create_task(replica.keeper.stop())
    await wait_for(lambda: stops.stopping == len(ids), what="every runner stopping at once")
    assert all([await raw.exists(replica.leases.key(w)) for w in ids])  # none released yet
    stops.gate.set()
    await asyncio.wait_for(stop, 10)
    assert (len(ids), sorted(ids)) == (stops.most, sorted(replica.lost))
    assert STOPS_AT_ONCE < len(ids) <= STOPS_AT_ONCE_LEAVING
    assert not any([await raw.exists(replica.leases.key(w)) for w in ids])  # all released
