"""Every session queue keeps the ``SessionQueue`` contract: each callback queued runs once, in order
per session key, keys in parallel within the concurrency, a crash does not stop the queue, ``stop``
cancels and leaves the callback to the next start, and ``resume`` queues the open contracts.

Run against the ``local`` queue (over a memory store) and the ``redis-stream`` queue (over the
tests' own redis-server, a ``RedisStore`` and a key prefix of its own), both built through the
registry, with a recording runner (tests/session_runs.py) in place of the session runner.
What only the Redis queue does with several replicas is in tests/cluster/test_session_stream.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from sentinel_hooks.callbacks.queues.base import (
    MODULES,
    QueueContext,
    SessionQueue,
    create_session_queue,
)
from sentinel_hooks.callbacks.queues.stream import StreamSettings
from sentinel_hooks.callbacks.sessions.progress import progress_key
from sentinel_hooks.clock import SystemClock
from sentinel_hooks.store import Contract, Store
from sentinel_hooks.store.records import GroupInfo
from sentinel_hooks.store.redis import RedisStore
from sentinel_hooks.store.sqlite import SqliteStore
from tests.contract.conftest import RedisSpace
from tests.contract.stores import create
from tests.session_runs import Recorder, contract, envelope_for
from tests.support import wait_for

KINDS = ["local", pytest.param("redis-stream", marks=pytest.mark.redis)]
LEASE_MS = 1000
STOP_WITHIN_S = 5.0


@dataclass
class Queues:
    """Queues of one kind over one store; ``make(replica)`` builds one (stopped after the test)."""

    kind: str
    store: Store
    recorder: Recorder
    stream: Callable[[str], StreamSettings | None]
    made: list[SessionQueue] = field(default_factory=list)

    def make(self, replica: str = "a", *, concurrency: int = 4) -> SessionQueue:
        context = QueueContext(
            store=self.store,
            clock=SystemClock(),
            concurrency=concurrency,
            stream=self.stream(replica),
        )
        queue = create_session_queue(self.kind, self.recorder.runner(replica), context)
        self.made.append(queue)
        return queue

    async def started(self, replica: str = "a", *, concurrency: int = 4) -> SessionQueue:
        """A queue that ran ``resume`` (what a service does at start)."""
        queue = self.make(replica, concurrency=concurrency)
        await queue.resume()
        return queue

    async def accepted(self, callbacks: list[tuple[str, str]]) -> dict[str, Contract]:
        """Store a pending contract per (callback id, session key), in that order."""
        made: dict[str, Contract] = {}
        for n, (callback_id, key) in enumerate(callbacks):
            made[callback_id] = contract(callback_id, key, n)
            assert await create(self.store, made[callback_id])
        return made


@pytest.fixture(params=KINDS)
async def queues(request: pytest.FixtureRequest) -> AsyncIterator[Queues]:
    kind: str = request.param
    recorder = Recorder()
    if kind == "local":
        store: Store = SqliteStore.in_memory()
        await store.open()
        made = Queues(kind, store, recorder, lambda replica: None)
    else:
        space: RedisSpace = request.getfixturevalue("redis_space")
        store = RedisStore(space.url, key_prefix=space.prefix)
        await store.open()

        def stream(replica: str) -> StreamSettings:
            return StreamSettings(
                redis_url=space.url, key_prefix=space.prefix, replica_id=replica, lease_ms=LEASE_MS
            )

        made = Queues(kind, store, recorder, stream)
    yield made
    recorder.release.set()
    for queue in made.made:
        await queue.stop()
    await store.close()


def test_every_registered_kind_is_covered() -> None:
    """The registry's queue kinds are exactly the ones this suite runs."""
    assert {"local", "redis-stream"} == set(MODULES)


async def test_each_submitted_callback_runs_exactly_once(queues: Queues) -> None:
    """Callbacks submitted over three keys each run once and are recorded finished."""
    queue = await queues.started()
    contracts = await queues.accepted([(f"cb{i}", f"k{i % 3}") for i in range(6)])
    for c in contracts.values():
        await queue.submit(envelope_for(c), c)
    await wait_for(lambda: len(queues.recorder.ended()) == 6, what="the six sessions")
    assert [["a"]] * 6 == [queues.recorder.started(c) for c in contracts]
    assert dict.fromkeys(contracts, "done") == queue.finished


async def test_one_key_runs_one_at_a_time_in_order(queues: Queues) -> None:
    """Callbacks of one session key run one after another, in the order queued."""
    queues.recorder.work_s = 0.005
    queue = await queues.started()
    contracts = await queues.accepted([(f"cb{i:02d}", "k") for i in range(8)])
    for c in contracts.values():
        await queue.submit(envelope_for(c), c)
    await wait_for(lambda: len(queues.recorder.ended()) == 8, what="the eight sessions")
    assert (list(contracts), []) == (queues.recorder.order("k", contracts), queues.recorder.overlaps)


async def test_keys_run_in_parallel_up_to_the_concurrency(queues: Queues) -> None:
    """Sessions of different keys run at once, never more than ``concurrency`` of them."""
    queue = await queues.started(concurrency=2)
    contracts = await queues.accepted([("x", "k1"), ("y", "k2"), ("z", "k3")])
    queues.recorder.hold.update(contracts)
    for c in contracts.values():
        await queue.submit(envelope_for(c), c)
    await wait_for(lambda: queues.recorder.running() == 2, what="two sessions running at once")
    queues.recorder.release.set()
    await wait_for(lambda: len(queues.recorder.ended()) == 3, what="the three sessions")
    assert 2 == queues.recorder.peak


async def test_a_session_waiting_to_start_holds_no_slot(queues: Queues) -> None:
    """With one slot, groups' sessions waiting out their waitMs leave it to another key's
    session, which runs at once; they run, one at a time, once their wait ends."""
    queue = await queues.started(concurrency=1)
    contracts = await queues.accepted([("g1", "group:a"), ("g2", "group:b"), ("x", "k")])
    for group_id in ("g1", "g2"):
        info = GroupInfo(key=group_id, members=[group_id])
        contracts[group_id] = contracts[group_id].model_copy(update={"group": info})
        queues.recorder.waiting.add(group_id)
    for c in contracts.values():
        await queue.submit(envelope_for(c), c)
    await wait_for(lambda: queues.recorder.ended() == ["x"], what="x's session, the groups waiting")
    queues.recorder.start.set()
    await wait_for(lambda: len(queues.recorder.ended()) == 3, what="the groups' sessions")
    assert 1 == queues.recorder.peak


async def test_a_session_that_raises_is_crashed_and_the_key_goes_on(queues: Queues) -> None:
    """A runner that raises is reported ``crashed``; the next callback of its key still runs."""
    queue = await queues.started()
    contracts = await queues.accepted([("broken", "k"), ("next", "k")])
    queues.recorder.crashes.add("broken")
    for c in contracts.values():
        await queue.submit(envelope_for(c), c)
    await wait_for(lambda: len(queue.finished) == 2, what="both sessions")
    assert {"broken": "crashed", "next": "done"} == queue.finished


async def test_requeue_runs_the_session_again(queues: Queues) -> None:
    """A callback requeued (its approval was decided) runs once more."""
    queue = await queues.started()
    contracts = await queues.accepted([("paused", "k")])
    await queue.submit(envelope_for(contracts["paused"]), contracts["paused"])
    await wait_for(lambda: queue.finished.get("paused"), what="the first run")
    await queue.requeue(contracts["paused"])
    await wait_for(lambda: len(queues.recorder.ended()) == 2, what="the second run")
    assert ["a", "a"] == queues.recorder.started("paused")


async def test_a_submitted_callback_runs_with_the_envelope_it_was_handed(queues: Queues) -> None:
    """The envelope travels in memory: submitted and run here, the session is handed it; requeued
    (an approval decided), it is run without one and the runner reads it from the store."""
    queue = await queues.started()
    contracts = await queues.accepted([("cb", "k")])
    handed = envelope_for(contracts["cb"])
    await queue.submit(handed, contracts["cb"])
    await wait_for(lambda: queue.finished.get("cb"), what="the first run")
    await queue.requeue(contracts["cb"])
    await wait_for(lambda: len(queues.recorder.ended()) == 2, what="the second run")
    assert [("cb", handed), ("cb", None)] == queues.recorder.envelopes


async def test_resume_queues_open_contracts_whose_session_had_not_finished(queues: Queues) -> None:
    """At start, a pending callback is queued and run once; one whose session finished is not."""
    await queues.accepted([("open", "k1"), ("finished", "k2")])
    await queues.store.put_checkpoint(progress_key("finished"), {"status": "done"})
    queue = queues.make()
    assert 1 == await queue.resume()
    await wait_for(lambda: queue.finished.get("open"), what="the resumed session")
    assert (["a"], [], [("open", None)]) == (
        queues.recorder.started("open"),
        queues.recorder.started("finished"),
        queues.recorder.envelopes,
    )


async def test_stop_cancels_the_running_session_and_leaves_no_task(queues: Queues) -> None:
    """stop cancels a running session promptly and returns with none of the queue's tasks left."""
    before = asyncio.all_tasks()
    queue = await queues.started()
    contracts = await queues.accepted([("long", "k")])
    queues.recorder.hold.add("long")
    await queue.submit(envelope_for(contracts["long"]), contracts["long"])
    await wait_for(lambda: queues.recorder.started("long"), what="the session to start")
    async with asyncio.timeout(STOP_WITHIN_S):
        await queue.stop()
    left = [task for task in asyncio.all_tasks() - before if not task.done()]
    assert (["a"], [], {}) == (queues.recorder.cancelled("long"), left, queue.finished)


async def test_a_stopped_session_runs_again_at_the_next_start(queues: Queues) -> None:
    """The callback a stop cut off stays open: a queue started later over the store runs it to its end."""
    first = await queues.started("a")
    contracts = await queues.accepted([("long", "k")])
    queues.recorder.hold.add("long")
    await first.submit(envelope_for(contracts["long"]), contracts["long"])
    await wait_for(lambda: queues.recorder.started("long"), what="the session to start")
    await first.stop()
    second = await queues.started("b")
    queues.recorder.release.set()  # once started: a session that ended before resume looked is queued again
    await wait_for(lambda: second.finished.get("long"), what="the session on the next queue")
    assert ["a", "b"] == queues.recorder.started("long")
