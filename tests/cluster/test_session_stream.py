"""The Redis session queue with several replicas on one Redis: order per key, parallel keys, one
runner per key, and a dead replica's work reclaimed by another.

The queues are real (``StreamSessionQueue`` on a real Redis and a real ``RedisStore``); the session
runner is a recorder implementing the queue's ``Runs`` protocol (tests/session_runs.py), so the
tests can see when each session starts and ends and hold one open. What every session queue does,
on one replica, is in tests/contract/test_session_queues.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio

from sentinel_hooks.callbacks.queues.stream import StreamSessionQueue, StreamSettings
from sentinel_hooks.callbacks.queues.stream_scripts import SOURCES
from sentinel_hooks.clock import SystemClock
from sentinel_hooks.store import Contract
from sentinel_hooks.store.redis import RedisStore
from sentinel_hooks.store.redis.keys import RedisKeys
from tests.cluster.conftest import LEASE_MS, PREFIX
from tests.contract.stores import create
from tests.session_runs import Recorder, contract, envelope_for
from tests.support import wait_for

pytestmark = pytest.mark.redis

Make = Callable[..., StreamSessionQueue]


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[RedisStore]:
    opened = RedisStore(redis_url, key_prefix=PREFIX)
    await opened.open()
    yield opened
    await opened.close()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def make(redis_url: str, store: RedisStore, recorder: Recorder) -> AsyncIterator[Make]:
    """``make(name, concurrency=4)`` → a started replica's queue (stopped after the test)."""
    made: list[StreamSessionQueue] = []

    def build(name: str, *, concurrency: int = 4) -> StreamSessionQueue:
        settings = StreamSettings(redis_url=redis_url, key_prefix=PREFIX, replica_id=name, lease_ms=LEASE_MS)
        queue = StreamSessionQueue(
            recorder.runner(name),
            store=store,
            clock=SystemClock(),
            settings=settings,
            concurrency=concurrency,
        )
        made.append(queue)
        return queue

    yield build
    recorder.release.set()
    for queue in made:
        await queue.stop()


async def accepted(store: RedisStore, callbacks: list[tuple[str, str]]) -> dict[str, Contract]:
    """Store a pending contract per (callback id, session key), in that order."""
    made: dict[str, Contract] = {}
    for n, (callback_id, key) in enumerate(callbacks):
        made[callback_id] = contract(callback_id, key, n)
        assert await create(store, made[callback_id])
    return made


async def test_one_key_runs_in_arrival_order_across_two_replicas(
    make: Make, store: RedisStore, recorder: Recorder
) -> None:
    """Callbacks of one key, queued alternately through two replicas, run one at a time in order."""
    recorder.work_s = 0.01
    a, b = make("a"), make("b")
    await a.resume()
    await b.resume()
    contracts = await accepted(store, [(f"cb{i:02d}", "k") for i in range(12)])
    for i, c in enumerate(contracts.values()):
        await (a if i % 2 else b).requeue(c)
    await wait_for(lambda: len(recorder.order("k", contracts)) == 12, timeout_s=20, what="all sessions")
    assert list(contracts) == recorder.order("k", contracts)
    assert [] == recorder.overlaps


async def test_different_keys_run_in_parallel(make: Make, store: RedisStore, recorder: Recorder) -> None:
    """Sessions of different keys run at the same time, on one replica or several."""
    a, b = make("a", concurrency=2), make("b", concurrency=2)
    await a.resume()
    await b.resume()
    contracts = await accepted(store, [("x", "k1"), ("y", "k2"), ("z", "k3")])
    recorder.hold.update(contracts)
    for c in contracts.values():
        await a.requeue(c)
    await wait_for(
        lambda: sum(bool(r) for r in recorder.active.values()) == 3, what="three keys running at once"
    )
    recorder.release.set()
    await wait_for(lambda: len([e for e in recorder.log if e[0] == "end"]) == 3, what="the three sessions")


async def test_lock_contention_never_lets_two_replicas_run_one_key(
    make: Make, store: RedisStore, recorder: Recorder
) -> None:
    """Three replicas racing over three keys: never two runs of one key at once, and order kept."""
    recorder.work_s = 0.005
    queues = [make(name, concurrency=3) for name in ("a", "b", "c")]
    for queue in queues:
        await queue.resume()
    contracts = await accepted(store, [(f"{k}-{i:02d}", k) for i in range(10) for k in ("k1", "k2", "k3")])
    for n, c in enumerate(contracts.values()):  # in order: each replica queues every third one
        await queues[n % 3].requeue(c)
    await wait_for(lambda: len([e for e in recorder.log if e[0] == "end"]) == 30, timeout_s=30, what="all 30")
    assert [] == recorder.overlaps
    for key in ("k1", "k2", "k3"):
        assert [c for c in contracts if c.startswith(key)] == recorder.order(key, contracts)
    assert {"a", "b", "c"} >= {replica for _, replica, _ in recorder.log}


async def test_a_callback_queued_behind_a_busy_key_adds_no_stream_entry(
    redis_url: str, make: Make, store: RedisStore, recorder: Recorder
) -> None:
    """Only the callback that makes its key's list non-empty announces the key: the holder drains
    those queued behind it, in order, with no stream read or lock attempt for each."""
    a = make("a")
    await a.resume()
    contracts = await accepted(store, [(f"cb{i}", "k") for i in range(4)])
    recorder.hold.add("cb0")
    await a.requeue(contracts["cb0"])
    await wait_for(lambda: recorder.started("cb0") == ["a"], what="the first session")
    for c in list(contracts.values())[1:]:
        await a.requeue(c)
    client = redis.asyncio.from_url(redis_url)
    try:
        added = (await client.xinfo_stream(RedisKeys(PREFIX).session_work))["entries-added"]
    finally:
        await client.aclose()
    recorder.release.set()
    await wait_for(lambda: len(recorder.order("k", contracts)) == 4, what="the four sessions")
    assert (1, list(contracts)) == (added, recorder.order("k", contracts))


async def test_a_callback_drained_by_another_replica_is_run_without_its_envelope(
    make: Make, store: RedisStore, recorder: Recorder
) -> None:
    """Submitted on replica a while b drains its key: b runs it, reading the envelope from the
    store (the runner is handed none); one submitted and drained on a is handed its envelope."""
    a, b = make("a"), make("b")
    await b.resume()
    contracts = await accepted(store, [("first", "k")])
    recorder.hold.add("first")
    await b.requeue(contracts["first"])
    await wait_for(lambda: recorder.started("first") == ["b"], what="b to run the first session")
    await a.resume()
    contracts.update(await accepted(store, [("second", "k"), ("own", "other")]))
    await a.submit(envelope_for(contracts["second"]), contracts["second"])
    recorder.release.set()
    await wait_for(lambda: recorder.started("second") == ["b"], what="b to run the second session")
    await b.stop()
    own = envelope_for(contracts["own"])
    await a.submit(own, contracts["own"])
    await wait_for(lambda: recorder.started("own") == ["a"], what="a to run its own callback")
    assert [("first", None), ("second", None), ("own", own)] == recorder.envelopes


async def test_a_dead_replicas_session_is_reclaimed_by_another(
    make: Make, store: RedisStore, recorder: Recorder
) -> None:
    """A replica that stops without acknowledging (a crash) has its session taken over and finished."""
    a = make("a")
    await a.resume()
    contracts = await accepted(store, [("first", "k"), ("second", "k")])
    recorder.hold.add("first")
    for c in contracts.values():
        await a.requeue(c)
    await wait_for(lambda: recorder.started("first") == ["a"], what="replica a to run the first session")
    await a.halt()
    recorder.hold.clear()
    recorder.release.set()
    b = make("b")
    await b.resume()
    await wait_for(
        lambda: recorder.order("k", contracts) == ["first", "second"],
        timeout_s=4 * LEASE_MS / 1000 + 5,
        what="replica b to finish both sessions",
    )
    assert ["a", "b"] == recorder.started("first")
    assert ["b"] == recorder.started("second")


async def test_a_replica_that_stops_gracefully_hands_its_key_over_at_once(
    make: Make, store: RedisStore, recorder: Recorder
) -> None:
    """A graceful stop cancels the running session and re-announces the key: no reclaim wait."""
    a, b = make("a"), make("b")
    await a.resume()
    contracts = await accepted(store, [("first", "k")])
    recorder.hold.add("first")
    recorder.hold_on = {"a"}
    await a.requeue(contracts["first"])
    await wait_for(lambda: recorder.started("first") == ["a"], what="replica a to run the session")
    await b.resume()
    await a.stop()
    await wait_for(lambda: recorder.order("k", contracts) == ["first"], timeout_s=LEASE_MS / 1000, what="b")
    assert ["a", "b"] == recorder.started("first")


async def test_resume_queues_only_sessions_that_are_in_no_queue(
    make: Make, store: RedisStore, recorder: Recorder
) -> None:
    """A pending callback that never reached the queue is picked up at start, exactly once."""
    contracts = await accepted(store, [("lost", "k")])
    recorder.hold.add("lost")
    a, b = make("a"), make("b")
    assert 1 == await a.resume()
    assert 0 == await b.resume()
    recorder.release.set()
    await wait_for(lambda: recorder.order("k", contracts) == ["lost"], what="the lost session")
    assert ["lost"] == [c for event, _, c in recorder.log if event == "start"]


async def test_a_replica_that_loses_its_lock_stops_its_session(
    make: Make, store: RedisStore, recorder: Recorder, raw: redis.asyncio.Redis
) -> None:
    """When a's lock is gone (expired while paused) and b took the key, a cancels its run within a tick."""
    a, b = make("a"), make("b")
    await a.resume()
    await b.resume()
    contracts = await accepted(store, [("first", "k"), ("second", "k")])
    recorder.hold.add("first")
    recorder.hold_on = {"a"}
    await a.requeue(contracts["first"])
    await wait_for(lambda: recorder.started("first") == ["a"], what="replica a to run the first session")
    await raw.delete(f"{PREFIX}session-lock:k")  # as if it expired while a was paused
    await b.requeue(contracts["second"])
    await wait_for(
        lambda: recorder.order("k", contracts) == ["first", "second"], timeout_s=5, what="b to drain the key"
    )
    await wait_for(lambda: not recorder.active["k"], timeout_s=LEASE_MS / 1000, what="a to stop its run")
    assert ["a", "b"] == recorder.started("first")
    assert [("end", "b", "first"), ("end", "b", "second")] == [e for e in recorder.log if e[0] == "end"]


async def test_a_session_that_hits_a_store_error_is_tried_again(
    make: Make, store: RedisStore, recorder: Recorder
) -> None:
    """A store failure is not a final status: the callback stays queued and runs again later."""
    a = make("a")
    await a.resume()
    contracts = await accepted(store, [("flaky", "k")])
    recorder.store_errors.add("flaky")
    await a.requeue(contracts["flaky"])
    await wait_for(
        lambda: recorder.order("k", contracts) == ["flaky"],
        timeout_s=4 * LEASE_MS / 1000 + 5,
        what="the retry",
    )
    assert ["a", "a"] == recorder.started("flaky")


@pytest.mark.slow
async def test_an_entry_whose_read_came_too_late_is_taken_back_at_once(
    redis_url: str, store: RedisStore, recorder: Recorder
) -> None:
    """A blocking read whose reply arrives after its bound (the event loop stalled: an
    overloaded process) is given up, but Redis delivered its entry to this replica all the same.
    The replica takes it back from its pending list at once instead of leaving it for the
    abandoned-entry reclaim (``2 * lease_ms``: 12 s here) while the session's deadline runs."""
    lease_ms = 6000  # a read is bounded by 1 s + 2 s; reclaimed as abandoned after 12 s
    settings = StreamSettings(redis_url=redis_url, key_prefix=PREFIX, replica_id="a", lease_ms=lease_ms)
    queue = StreamSessionQueue(
        recorder.runner("a"), store=store, clock=SystemClock(), settings=settings, concurrency=2
    )
    watcher = redis.asyncio.from_url(redis_url)
    keys = RedisKeys(PREFIX)

    def enqueue_from_outside() -> None:
        """Queue the callback as another replica would, while this process's loop is stalled."""
        time.sleep(0.3)
        with redis.Redis.from_url(redis_url) as other:
            other.register_script(SOURCES["enqueue"])(
                keys=[keys.session_queue("k"), keys.session_work], args=["late", "k", "0"]
            )

    try:
        await queue.resume()
        await accepted(store, [("late", "k")])

        async def read_blocked() -> bool:
            return int((await watcher.info("clients"))["blocked_clients"]) >= 1

        await wait_for(read_blocked, what="the queue's blocking read")
        outside = threading.Thread(target=enqueue_from_outside)
        outside.start()
        started = time.monotonic()
        # fault injection: the loop stalls past the read's bound (1 s + 2 s) while the entry is
        # delivered to that read, so its reply comes in after the bound
        time.sleep(3.5)  # noqa: ASYNC251
        outside.join()
        await wait_for(
            lambda: recorder.started("late") == ["a"],
            timeout_s=lease_ms / 1000,  # before the reclaim at 2 * lease_ms could run it
            what="the late entry's session",
        )
        assert time.monotonic() - started < 2 * lease_ms / 1000
    finally:
        recorder.release.set()
        await queue.stop()
        await watcher.aclose()
