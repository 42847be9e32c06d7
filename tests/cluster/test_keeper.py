"""The lease keeper: one holder per watcher, rebalancing on join, take-over when a replica dies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

import pytest
import redis.asyncio

from sentinel_hooks.clock import Clock, FakeClock, SystemClock
from sentinel_hooks.cluster.keeper import ADOPT_AFTER_TICKS
from sentinel_hooks.cluster.rendezvous import owned_by
from sentinel_hooks.errors import StoreUnavailable
from tests.cluster.conftest import LEASE_MS, PREFIX, MakeReplica, Replica, settle_within_s, watcher_ids
from tests.support import wait_for

pytestmark = pytest.mark.redis

IDS = watcher_ids(30)
SETTLE_S = settle_within_s(LEASE_MS)


def settled(replicas: list[Replica]) -> bool:
    """Every replica holds, and runs, exactly its rendezvous share among these replicas."""
    live = sorted(r.id for r in replicas)
    return all(set(r.keeper.owned()) == r.running == owned_by(r.id, IDS, live) for r in replicas)


async def ticked_by_hand(
    make_replica: MakeReplica, clock: Clock, watcher_ids: list[str], lease_ms: int = LEASE_MS
) -> Replica:
    """A replica that joined and ran one tick; no loops (on a fake clock they would spin it)."""
    replica = make_replica("a", clock=clock, lease_ms=lease_ms)
    await replica.leases.open()
    await replica.membership.open()
    await replica.membership.heartbeat()
    for watcher_id in watcher_ids:
        replica.keeper.track(watcher_id)
    await replica.keeper.tick()
    return replica


async def test_lone_keeper_acquires_and_runs_every_tracked_watcher(make_replica: MakeReplica) -> None:
    """Alone, a replica takes every lease in its first tick and starts every watcher."""
    a = make_replica("a")
    await a.start(IDS)
    await a.keeper.drain()
    assert (set(IDS), set(IDS)) == (set(a.keeper.owned()), a.running)


async def test_joining_replica_gets_its_rendezvous_share(make_replica: MakeReplica) -> None:
    """When B joins, A hands B exactly B's rendezvous share and keeps the rest."""
    a, b = make_replica("a"), make_replica("b")
    await a.start(IDS)
    await b.start(IDS)
    await wait_for(lambda: settled([a, b]), timeout_s=SETTLE_S, what="rebalance after a join")
    assert set(IDS) == a.running | b.running


async def test_two_keepers_never_hold_or_run_the_same_watcher(make_replica: MakeReplica) -> None:
    """Sampled continuously through a join, a graceful leave and a re-join: no watcher is held
    (or running) on both replicas at once."""
    a, b = make_replica("a"), make_replica("b")
    overlaps: list[set[str]] = []
    samples = 0
    stop = asyncio.Event()

    async def sample() -> None:
        nonlocal samples
        while not stop.is_set():
            samples += 1
            both = (set(a.keeper.owned()) & set(b.keeper.owned())) | (a.running & b.running)
            if both:
                overlaps.append(both)
            await asyncio.sleep(0.002)

    sampler = asyncio.get_running_loop().create_task(sample())
    await a.start(IDS)
    await b.start(IDS)
    await wait_for(lambda: settled([a, b]), timeout_s=SETTLE_S, what="rebalance after B joined")
    await b.keeper.stop()
    await b.membership.leave()
    await wait_for(lambda: settled([a]), timeout_s=SETTLE_S, what="A takes everything back")
    await b.start(IDS)
    await wait_for(lambda: settled([a, b]), timeout_s=SETTLE_S, what="rebalance after B re-joined")
    stop.set()
    await sampler
    assert [] == overlaps
    assert samples > 100


async def test_watchers_of_a_stalled_keeper_move_within_two_leases(make_replica: MakeReplica) -> None:
    """A replica that stops renewing and heartbeating loses all its watchers to the other one
    within 2 x lease_ms."""
    a, b = make_replica("a"), make_replica("b")
    await a.start(IDS)
    await b.start(IDS)
    await wait_for(lambda: settled([a, b]), timeout_s=SETTLE_S, what="rebalance")
    await a.halt()
    halted_at = time.monotonic()
    await wait_for(lambda: b.running == set(IDS), timeout_s=2 * LEASE_MS / 1000, what="B runs all")
    elapsed_s = time.monotonic() - halted_at
    assert elapsed_s <= 2 * LEASE_MS / 1000


async def test_paused_keeper_reports_every_lease_lost_at_its_first_tick(make_replica: MakeReplica) -> None:
    """After a pause longer than the lease (B took over), the first tick calls on_lost for all."""
    a, b = make_replica("a"), make_replica("b")
    await a.start(IDS)
    await a.halt()
    await b.start(IDS)
    await wait_for(lambda: b.running == set(IDS), timeout_s=SETTLE_S, what="B takes over")
    await a.keeper.tick()
    await a.keeper.drain()
    assert (set(IDS), set(), {}) == (set(a.lost), a.running, a.keeper.owned())


async def test_keeper_drops_leases_it_cannot_renew_before_they_expire(
    make_replica: MakeReplica, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With Redis unreachable, leases are given up once they may have expired on the server, not
    before: kept after two failed renewals (their polls are refused in the last tick meanwhile),
    dropped after the third, a whole lease after the last renewal."""
    clock = FakeClock()
    a = await ticked_by_hand(make_replica, clock, IDS)

    async def unreachable(*args: object, **kwargs: object) -> set[str]:
        raise StoreUnavailable("cluster redis: renew leases failed: connection refused")

    monkeypatch.setattr(a.leases, "renew", unreachable)
    tick_s = LEASE_MS / 3000 + 0.001  # a tick's period plus the time the tick itself takes
    kept = []
    for _ in range(3):
        clock.advance(tick_s)
        await a.keeper.tick()
        await a.keeper.drain()
        kept.append(set(a.running))
    assert [set(IDS), set(IDS), set()] == kept


async def test_untracked_watcher_lease_is_released(
    make_replica: MakeReplica, raw: redis.asyncio.Redis
) -> None:
    """Untracking a held watcher deletes its lease at once (no callback: its runner is gone)."""
    a = make_replica("a")
    await a.start(["w1"])
    await a.keeper.untrack("w1")
    assert (0, [], {}) == (await raw.exists(f"{PREFIX}lease:w1"), a.lost, a.keeper.owned())


async def test_track_returns_the_token_of_a_held_lease(make_replica: MakeReplica) -> None:
    """``track`` of a watcher already held returns its token (a reloaded runner restarts with it)."""
    a = make_replica("a")
    await a.start(["w1"])
    assert (a.keeper.owned()["w1"], None) == (a.keeper.track("w1"), a.keeper.track("w2"))


async def test_graceful_stop_hands_everything_to_the_other_within_a_tick(make_replica: MakeReplica) -> None:
    """A graceful stop calls on_lost, releases and leaves, so B takes all within about a tick."""
    a, b = make_replica("a"), make_replica("b")
    await a.start(IDS)
    await b.start(IDS)
    await wait_for(lambda: settled([a, b]), timeout_s=SETTLE_S, what="rebalance")
    share, before = set(a.running), len(a.lost)
    await a.keeper.stop()
    await a.membership.leave()
    assert (share, set()) == (set(a.lost[before:]), a.running)
    await wait_for(lambda: b.running == set(IDS), timeout_s=LEASE_MS / 1000, what="B runs all")


async def test_hand_off_stops_the_runner_before_releasing_the_lease(make_replica: MakeReplica) -> None:
    """While on_lost is still stopping a runner, the lease stays with the old owner."""
    release = asyncio.Event()
    stopping: list[str] = []

    async def slow_stop(watcher_id: str) -> None:
        stopping.append(watcher_id)
        await release.wait()

    a, b = make_replica("a", before_lost=slow_stop), make_replica("b")
    await a.start(IDS)
    await b.start(IDS)
    await wait_for(lambda: stopping, timeout_s=SETTLE_S, what="a hand-off to start")
    moving = stopping[0]
    holder = await a.leases.holder(moving)
    await b.keeper.tick()
    assert (a.id, False) == (holder and holder[0], moving in b.running)
    release.set()
    await wait_for(lambda: moving in b.running, timeout_s=SETTLE_S, what="B to take the watcher")


async def test_leases_whose_runners_could_not_start_are_given_back_and_taken_again(
    make_replica: MakeReplica,
) -> None:
    """on_acquired failing (the stored states unreadable in time) does not leave the leases held
    with no runner: they are released and the next tick takes them again and starts them."""
    failures = [StoreUnavailable("get watcher states got no answer within 5 s")]

    async def flaky(tokens: Mapping[str, int]) -> None:
        if failures:
            raise failures.pop()

    a = make_replica("a", before_acquired=flaky)
    await a.start(IDS)
    await a.keeper.drain()
    assert (set(), {}) == (a.running, a.keeper.owned())
    assert [None] * len(IDS) == [await a.leases.holder(w) for w in IDS]  # released, not left to expire
    await a.keeper.tick()
    await a.keeper.drain()
    assert (set(IDS), set(IDS)) == (a.running, set(a.keeper.owned()))


async def test_orphan_nobody_should_own_here_is_adopted(make_replica: MakeReplica) -> None:
    """A watcher whose rendezvous owner does not know it (B tracks nothing) is adopted by A."""
    a, b = make_replica("a"), make_replica("b")
    await b.start([])
    await a.start(IDS)
    await a.keeper.drain()
    theirs = owned_by(b.id, IDS, sorted([a.id, b.id]))
    assert set(IDS) - theirs == a.running
    timeout_s = (ADOPT_AFTER_TICKS + 2) * LEASE_MS / 3000
    await wait_for(lambda: a.running == set(IDS), timeout_s=timeout_s, what="A adopts B's share")


async def test_fencing_check_needs_no_redis_round_trip(make_replica: MakeReplica) -> None:
    """``holds`` answers from the keeper's own renewals: with its Redis client closed, a fresh
    lease is still held with its token, and not with another."""
    a = make_replica("a")
    await a.start(["w1"])
    token = a.keeper.owned()["w1"]
    await a.leases.close()  # any Redis command now raises StoreUnavailable
    assert (True, False) == (await a.keeper.holds("w1", token), await a.keeper.holds("w1", token + 1))


async def test_fencing_check_in_a_leases_last_tick_waits_for_the_renewal(make_replica: MakeReplica) -> None:
    """A lease whose renewal is overdue (within one tick of expiring) is confirmed by the next
    tick's renewal: the check waits for it instead of dropping the observation."""
    clock = FakeClock()
    a = await ticked_by_hand(make_replica, clock, ["w1"])
    token = a.keeper.owned()["w1"]
    clock.advance(LEASE_MS / 1000 * 0.8)  # past lease - tick: a renewal is overdue
    check = asyncio.ensure_future(a.keeper.holds("w1", token))
    await asyncio.sleep(0.05)
    waiting = not check.done()
    await a.keeper.tick()
    assert (True, True) == (waiting, await check)


async def test_fencing_check_of_a_lease_not_renewed_in_time_cannot_tell(make_replica: MakeReplica) -> None:
    """Once a lease could have expired on the server without a renewal, ``holds`` raises."""
    clock = FakeClock()
    a = await ticked_by_hand(make_replica, clock, ["w1"])
    token = a.keeper.owned()["w1"]
    clock.advance(LEASE_MS / 1000)
    with pytest.raises(StoreUnavailable, match="not renewed within"):
        await a.keeper.holds("w1", token)


async def test_fencing_check_is_false_once_another_replica_took_the_lease(make_replica: MakeReplica) -> None:
    """A paused replica whose leases were taken answers False at once after its next tick."""
    a, b = make_replica("a"), make_replica("b")
    await a.start(IDS)
    tokens = a.keeper.owned()
    await a.halt()
    await b.start(IDS)
    await wait_for(lambda: b.running == set(IDS), timeout_s=SETTLE_S, what="B takes over")
    await a.keeper.tick()
    assert [False] * len(IDS) == [await a.keeper.holds(w, t) for w, t in tokens.items()]


async def test_fencing_check_of_a_lease_dropped_for_want_of_renewal_cannot_tell(
    make_replica: MakeReplica, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lease the keeper gave up because Redis could not renew it is neither held nor known to be
    another replica's: ``holds`` raises, so the observation counts as missed, not as moved."""
    clock = FakeClock()
    a = await ticked_by_hand(make_replica, clock, ["w1"])
    token = a.keeper.owned()["w1"]

    async def unreachable(*args: object, **kwargs: object) -> set[str]:
        raise StoreUnavailable("cluster redis: renew leases failed: connection refused")

    monkeypatch.setattr(a.leases, "renew", unreachable)
    for _ in range(3):
        clock.advance(LEASE_MS / 3000 + 0.001)
        await a.keeper.tick()
    assert {} == a.keeper.owned()
    with pytest.raises(StoreUnavailable, match="not renewed within"):
        await a.keeper.holds("w1", token)


async def test_hand_offs_found_taken_are_one_line_saying_how_late_this_replica_was(
    make_replica: MakeReplica, raw: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A replica so late that another one took the leases it was handing off (a CPU-starved start):
    one warning for the whole batch, naming its own delay, none blaming Redis (before: nothing said
    they were gone, and a timed-out release was one "check that Redis is running" line per lease)."""
    clock = FakeClock()
    ids = watcher_ids(200)
    late, taken = asyncio.Event(), asyncio.Event()
    b = make_replica("b", clock=clock)

    async def too_late(watcher_id: str) -> None:
        if late.is_set():
            await taken.wait()
            return
        late.set()  # the runners stopped 1.5 leases after the last renewal: B took over meanwhile
        clock.advance(1.5 * LEASE_MS / 1000)
        async with raw.pipeline(transaction=False) as pipe:
            for other in theirs:
                pipe.set(f"{PREFIX}lease:{other}", f"{b.id}:999999", px=LEASE_MS)
            await pipe.execute()
        taken.set()

    a = make_replica("a", clock=clock, before_lost=too_late)
    await a.leases.open()
    await a.membership.open()
    await a.membership.heartbeat()
    for watcher_id in ids:
        a.keeper.track(watcher_id)
    await a.keeper.tick()
    await b.membership.open()
    await b.membership.heartbeat()
    theirs = owned_by(b.id, ids, sorted([a.id, b.id]))
    caplog.clear()
    await a.keeper.tick()
    await a.keeper.drain()

    lines = [r.getMessage() for r in caplog.records if r.name == "sentinel_hooks.cluster.keeper"]
    gone = [line for line in lines if "no longer this replica's" in line]
    assert theirs == set(a.lost), lines
    assert 1 == len(gone), lines
    assert f"{len(theirs)} watcher lease(s)" in gone[0]
    assert f"expired {LEASE_MS // 2} ms before this replica, late, released them" in gone[0]
    assert not [line for line in lines if "check that Redis" in line], lines


async def test_a_release_this_replica_read_late_blames_its_own_delay_not_redis(
    make_replica: MakeReplica, raw: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A release that failed only after this replica's event loop was held up for a second (past
    the command's 0.5 s bound) says so, instead of "check that Redis is running"."""
    clock = FakeClock()
    ids = watcher_ids(30)
    b = make_replica("b", clock=clock)
    held_up = asyncio.Event()

    async def busy(watcher_id: str) -> None:
        if not held_up.is_set():
            held_up.set()
            await raw.execute_command("CLIENT", "PAUSE", 2000, "WRITE")  # the release waits on Redis
            asyncio.get_running_loop().call_later(0.05, time.sleep, 1.0)  # while this process is busy

    a = make_replica("a", clock=clock, before_lost=busy)
    await a.leases.open()
    await a.membership.open()
    await a.membership.heartbeat()
    for watcher_id in ids:
        a.keeper.track(watcher_id)
    await a.keeper.tick()
    await b.membership.open()
    await b.membership.heartbeat()
    caplog.clear()
    try:
        await a.keeper.tick()
        await a.keeper.drain()
    finally:
        await raw.execute_command("CLIENT", "UNPAUSE")
    released = [r.getMessage() for r in caplog.records if "could not release" in r.getMessage()]
    assert 1 == len(released), released
    assert "ms late itself (its event loop busy, or short of CPU), so Redis may well be fine" in released[0]
    assert "check that Redis" not in released[0]


async def test_cancelling_a_chained_callback_leaves_the_one_it_waits_for_running(
    make_replica: MakeReplica,
) -> None:
    """A callback chained after a batch's waits for it without owning it: cancelling the later
    ones (a stop past its time limit) does not cancel the batch once per later callback."""
    keeper = make_replica("a").keeper
    release, finished = asyncio.Event(), []

    async def batch() -> None:
        await release.wait()
        finished.append("batch")

    keeper._chain(["w1", "w2"], batch)
    first = keeper._chains["w1"]
    for watcher_id in ("w1", "w2"):
        keeper._chain([watcher_id], lambda: asyncio.sleep(0))
    later = [keeper._chains["w1"], keeper._chains["w2"]]
    await asyncio.sleep(0)  # the later ones are waiting for the batch now
    for task in later:
        task.cancel()
    await asyncio.wait(later)
    await asyncio.sleep(0)  # let the cancellations reach whatever the later ones awaited
    release.set()
    await asyncio.wait_for(asyncio.wait({first}), 5)
    assert (["batch"], [True, True]) == (finished, [task.cancelled() for task in later])


async def test_a_renewal_answered_late_keeps_the_leases(
    make_replica: MakeReplica, raw: redis.asyncio.Redis
) -> None:
    """A renewal answered after its usual bound (Redis paused here, a starved replica in life)
    that still finds the leases this replica's keeps them: the keeper waits for it while they
    may be valid, and drops nothing before they could have expired on the server."""
    a = await ticked_by_hand(make_replica, SystemClock(), IDS, lease_ms=3000)  # renewal bound 1 s
    await a.keeper.drain()
    await raw.execute_command("CLIENT", "PAUSE", "2500", "WRITE")  # scripts wait; reads do not
    await a.keeper.tick()  # its renewal answers after 2.5 s
    await a.keeper.tick()
    await a.keeper.drain()
    assert (set(IDS), set(IDS)) == (set(a.keeper.owned()), a.running)
