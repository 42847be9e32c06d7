"""First-run phases of interval watchers (SPEC §3: first polls spread over one interval, no herd)."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta

from apscheduler.triggers.interval import IntervalTrigger
from hypothesis import given, settings
from hypothesis import strategies as st

from sentinel_hooks.config.watcher import WATCHER_ADAPTER, Scheduled
from sentinel_hooks.watchers.schedule import (
    LoopScheduler,
    PollJobStore,
    add_poll_job,
    first_run,
    phase,
    start_order,
    trigger_for,
)
from tests.support import wait_for

INTERVAL = timedelta(seconds=10)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
BASE = datetime(2026, 11, 22, 2, 30, 17, 123456, tzinfo=UTC)


def test_first_runs_of_many_watchers_spread_uniformly_over_one_interval() -> None:
    """10,000 ids from one base: every first run within [base, base + interval), each tenth of the
    interval holding close to a tenth of them (a herd or a skew would crowd one tenth)."""
    runs = [first_run(f"w{i:05d}", INTERVAL, BASE) for i in range(10_000)]
    assert all(BASE <= at < BASE + INTERVAL for at in runs)
    tenths = [0] * 10
    for at in runs:
        tenths[int((at - BASE) / INTERVAL * 10)] += 1
    assert all(850 <= count <= 1150 for count in tenths), tenths


def test_a_watcher_keeps_its_phase_whatever_the_base() -> None:
    """The phase is a function of the id: restarts (other bases) poll at the same offset of the interval."""
    for watcher_id in ("prices", "w00042", "déjà-vu"):
        offsets = {
            (first_run(watcher_id, INTERVAL, BASE + timedelta(seconds=s)) - EPOCH) % INTERVAL
            for s in (0, 3.3, 97, 86_400)
        }
        assert {phase(watcher_id, INTERVAL)} == offsets
        assert timedelta(0) <= phase(watcher_id, INTERVAL) < INTERVAL
    assert phase("a", INTERVAL) != phase("b", INTERVAL)


def test_first_run_is_never_before_the_base() -> None:
    """A base exactly on the phase runs at the base; just after it, one interval later."""
    on_phase = EPOCH + phase("x", INTERVAL) + 1000 * INTERVAL
    assert on_phase == first_run("x", INTERVAL, on_phase)
    late = on_phase + timedelta(microseconds=1)
    assert on_phase + INTERVAL == first_run("x", INTERVAL, late)


def test_interval_trigger_starts_at_the_first_run() -> None:
    """The APScheduler trigger of an interval watcher starts at its phase and repeats every interval."""
    spec = WATCHER_ADAPTER.validate_python(
        {"id": "prices", "strategy": "http-poll", "endpoint": "http://127.0.0.1/", "intervalMs": 10_000}
    )
    assert isinstance(spec, Scheduled)
    trigger = trigger_for(spec, BASE)
    assert isinstance(trigger, IntervalTrigger)
    assert first_run("prices", INTERVAL, BASE) == trigger.start_date
    assert INTERVAL == trigger.interval


async def test_loop_scheduler_runs_due_jobs_from_its_timer_and_honours_pause() -> None:
    """The scheduler's own timer runs jobs on the loop; adds while running, pause and resume
    behave as in AsyncIOScheduler."""
    scheduler = LoopScheduler(timezone=UTC)
    runs: dict[str, list[datetime]] = {"a": [], "b": []}

    async def job(name: str) -> None:
        runs[name].append(datetime.now(UTC))

    scheduler.start()
    try:
        scheduler.add_job(job, IntervalTrigger(seconds=0.05), args=["a"], id="a")
        await wait_for(lambda: len(runs["a"]) >= 3, what="three timer-driven runs")
        scheduler.add_job(job, IntervalTrigger(seconds=0.05), args=["b"], id="b")  # a wakeup
        await wait_for(lambda: len(runs["b"]) >= 2, what="the job added while running")
        scheduler.pause()
        await asyncio.sleep(0.01)  # a run started just before the pause may still finish
        paused_at = len(runs["a"])
        await asyncio.sleep(0.2)
        stayed = len(runs["a"])
        scheduler.resume()
        await wait_for(lambda: len(runs["a"]) >= stayed + 2, what="runs after resume")
    finally:
        scheduler.shutdown(wait=False)
    assert paused_at == stayed
    gaps = [later - earlier for earlier, later in itertools.pairwise(runs["a"][:3])]
    assert all(timedelta(milliseconds=30) < gap < timedelta(milliseconds=500) for gap in gaps)


async def test_halted_polls_stay_halted_through_a_resume_and_a_running_one_finishes() -> None:
    """A graceful stop's first step: after ``halt_polls`` no job starts, not even after a
    ``resume`` (a slice of runners starting meanwhile resumes what it paused), and a poll under
    way is not cancelled."""
    scheduler = LoopScheduler(timezone=UTC)
    runs: list[str] = []
    release = asyncio.Event()
    finished: list[str] = []

    async def job(name: str) -> None:
        runs.append(name)
        if name == "slow":
            await release.wait()
            finished.append(name)

    scheduler.start()
    try:
        scheduler.add_job(job, IntervalTrigger(seconds=0.05), args=["fast"], id="fast")
        scheduler.add_job(
            job, IntervalTrigger(seconds=3600), args=["slow"], id="slow", next_run_time=datetime.now(UTC)
        )
        await wait_for(lambda: runs.count("fast") >= 2 and "slow" in runs, what="both jobs running")
        scheduler.halt_polls()
        halted_at = len(runs)
        scheduler.resume()
        scheduler.add_job(job, IntervalTrigger(seconds=0.05), args=["added"], id="added")
        await asyncio.sleep(0.3)  # six periods of the fast job: none may start
        release.set()
        await wait_for(lambda: finished == ["slow"], what="the poll under way to finish")
    finally:
        scheduler.shutdown(wait=False)
    assert halted_at == len(runs)


async def test_add_poll_job_makes_the_job_add_job_makes() -> None:
    """The job added without APScheduler's validation equals one ``add_job`` would add."""
    scheduler = LoopScheduler(timezone=UTC)
    scheduler.start(paused=True)

    async def poll() -> None:
        return None

    try:
        trigger = IntervalTrigger(seconds=10, start_date=BASE, timezone="UTC")
        made = scheduler.add_job(
            poll, trigger=trigger, id="a", name="a", coalesce=True, max_instances=3, misfire_grace_time=None
        )
        fast = add_poll_job(scheduler, "b", poll, trigger, BASE)
        fields = ("func", "args", "kwargs", "trigger", "executor", "misfire_grace_time", "coalesce")
        assert [getattr(made, f) for f in fields] == [getattr(fast, f) for f in fields]
        assert (3, "b", BASE, fast) == (
            fast.max_instances,
            fast.name,
            fast.next_run_time,
            scheduler.get_job("b"),
        )
    finally:
        scheduler.shutdown(wait=False)


async def test_a_first_run_already_passed_runs_at_once_and_keeps_its_phase() -> None:
    """A job whose first run passed while others were being scheduled runs at the next pass of
    the scheduler, and its later runs stay on the phase of that first run."""
    scheduler = LoopScheduler(timezone=UTC)
    scheduler.start()
    runs: list[datetime] = []

    async def poll() -> None:
        runs.append(datetime.now(UTC))

    try:
        now = datetime.now(UTC)
        passed = now - timedelta(seconds=2)
        trigger = IntervalTrigger(seconds=3600, start_date=passed, timezone="UTC")
        job = add_poll_job(scheduler, "late", poll, trigger, now)
        await wait_for(lambda: len(runs) == 1, what="the late first run")
        assert runs[0] - now < timedelta(seconds=1)
        assert passed + timedelta(seconds=3600) == job.next_run_time
    finally:
        scheduler.shutdown(wait=False)


def test_start_order_puts_interval_watchers_at_their_first_run_and_others_first() -> None:
    """Interval watchers start in the order of their first runs; cron and pushed ones at the base."""
    poll = WATCHER_ADAPTER.validate_python(
        {"id": "p", "strategy": "http-poll", "endpoint": "http://127.0.0.1/", "intervalMs": 10_000}
    )
    cron = WATCHER_ADAPTER.validate_python(
        {"id": "c", "strategy": "http-poll", "endpoint": "http://127.0.0.1/", "schedule": "* * * * *"}
    )
    hook = WATCHER_ADAPTER.validate_python({"id": "h", "strategy": "webhook"})
    wait_us = (first_run("p", INTERVAL, BASE) - BASE) // timedelta(microseconds=1)
    assert (wait_us, 0, 0) == tuple(map(start_order(BASE), (poll, cron, hook)))


@settings(max_examples=200, deadline=None)
@given(
    st.from_regex(r"[a-z][a-z0-9-]{0,11}", fullmatch=True), st.integers(1, 3_600_000), st.integers(0, 10**12)
)
def test_the_start_order_of_an_interval_watcher_is_the_wait_for_its_first_run(
    watcher_id: str, interval_ms: int, base_us: int
) -> None:
    """The key that works out the base once gives what ``first_run`` says, for any id and base."""
    spec = WATCHER_ADAPTER.validate_python(
        {
            "id": watcher_id,
            "strategy": "http-poll",
            "endpoint": "http://127.0.0.1/",
            "intervalMs": interval_ms,
        }
    )
    base = BASE + timedelta(microseconds=base_us)
    waited = first_run(watcher_id, timedelta(milliseconds=interval_ms), base) - base
    assert waited // timedelta(microseconds=1) == start_order(base)(spec)


def test_the_poll_job_store_keeps_jobs_in_run_order_through_updates_and_removals() -> None:
    """``PollJobStore`` (a heap with stale entries) answers as ``MemoryJobStore`` would: the due
    jobs in run order, each once, none that was removed, the next run after a move."""
    store = PollJobStore()
    scheduler = LoopScheduler(timezone=UTC)

    async def poll() -> None:
        return None

    jobs = {}
    for i in range(50):
        trigger = IntervalTrigger(seconds=10, start_date=BASE + timedelta(seconds=i), timezone="UTC")
        jobs[i] = add_poll_job(scheduler, f"j{i}", poll, trigger, BASE)
        store.add_job(jobs[i])
    for i in range(0, 50, 5):  # moved later, several times: each leaves stale heap entries
        for step in range(3):
            jobs[i].next_run_time = BASE + timedelta(seconds=100 + i + step)
            store.update_job(jobs[i])
    store.remove_job("j1")
    assert [j.id for j in store.get_all_jobs()][:3] == ["j2", "j3", "j4"]
    assert BASE + timedelta(seconds=2) == store.get_next_run_time()
    due = store.pop_due((BASE + timedelta(seconds=20)).timestamp())
    expected = [f"j{i}" for i in range(2, 21) if i % 5]
    assert expected == [j.id for j in due]
    assert [] == store.pop_due((BASE + timedelta(seconds=20)).timestamp())  # taken: put back by the caller
    assert BASE + timedelta(seconds=21) == store.get_next_run_time()
    assert 49 == len(store.get_all_jobs())
    assert store.lookup_job("j1") is None
    assert store.lookup_job("j0") is jobs[0]


async def test_missed_runs_of_an_interval_job_are_coalesced_into_one_on_its_phase() -> None:
    """A job whose runs fell due several times while the loop was held runs once, and its next
    run is the first instant of its phase after now (as APScheduler's coalescing would)."""
    scheduler = LoopScheduler(timezone=UTC)
    runs: list[datetime] = []

    async def poll() -> None:
        runs.append(datetime.now(UTC))

    start = datetime.now(UTC) - timedelta(seconds=0.35)
    trigger = IntervalTrigger(seconds=0.1, start_date=start, timezone="UTC")
    job = add_poll_job(scheduler, "late", poll, trigger, start)
    scheduler.start()
    try:
        await wait_for(lambda: len(runs) == 1, what="one run for the missed ones")
        assert job.next_run_time > runs[0] - timedelta(milliseconds=100)
        assert (job.next_run_time - start) % timedelta(seconds=0.1) == timedelta(0)
    finally:
        scheduler.shutdown(wait=False)


async def test_a_backlog_of_due_jobs_starts_a_few_per_turn_and_within_the_running_cap() -> None:
    """Admission: 300 jobs due at once start at most ``STARTS_PER_TURN`` per turn of the loop
    and never more than ``MAX_RUNNING`` at a time; the others wait in the heap (not as tasks),
    each starts once, and a callback queued meanwhile is never held up by more than one turn."""
    scheduler = LoopScheduler(timezone=UTC)
    scheduler.STARTS_PER_TURN, scheduler.MAX_RUNNING = 10, 40
    loop = asyncio.get_running_loop()
    turn = 0
    started: list[int] = []  # the turn each job's body first ran in
    running = most_running = 0
    release = asyncio.Event()

    def count_turns() -> None:
        nonlocal turn
        turn += 1
        loop.call_soon(count_turns)

    async def poll() -> None:
        nonlocal running, most_running
        started.append(turn)
        running += 1
        most_running = max(most_running, running)
        await release.wait()
        running -= 1

    now = datetime.now(UTC)
    for i in range(300):
        trigger = IntervalTrigger(seconds=3600, start_date=now - timedelta(seconds=1), timezone="UTC")
        add_poll_job(scheduler, f"j{i}", poll, trigger, now)
    count_turns()
    scheduler.start()
    try:
        await wait_for(lambda: len(started) == 40, what="the first 40 polls")
        before = turn
        await asyncio.sleep(0.05)  # polls end only on release: nothing more may start meanwhile
        assert 40 == len(started) == most_running
        assert turn > before + 10  # the loop kept turning
        release.set()
        await wait_for(lambda: len(started) == 300, what="every due poll")
        await wait_for(lambda: running == 0, what="the polls to end")
    finally:
        scheduler.shutdown(wait=False)
    per_turn = max(started.count(t) for t in set(started))
    assert per_turn <= 10
    assert most_running <= 40
