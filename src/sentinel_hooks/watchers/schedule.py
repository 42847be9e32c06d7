"""When polled watchers run: interval or cron triggers for APScheduler 3, and misfire handling.

Cron expressions are evaluated with croniter (the same library that validated them at
load), wrapped as an APScheduler trigger, so 5-field crontab semantics (0 = Sunday) and the
6-field seconds-first form behave exactly as documented.

An interval watcher runs at a fixed phase of its interval (a 10 ms step), derived from its id: the first
run is the first instant at or after a base time where the time since the epoch, modulo the
interval, equals that phase. So the first polls of many watchers spread uniformly over one
interval (no thundering herd at start or after a reload), and a watcher keeps its phase
across restarts, reloads and replicas. ``add_poll_job`` schedules a watcher at that first run
even when it has passed already (it then runs at once, and at its phase after that), and skips
APScheduler's per-job validation, which costs more than the rest of starting a watcher.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.events import EVENT_JOB_ADDED, JobEvent
from apscheduler.job import Job
from apscheduler.jobstores.base import BaseJobStore, ConflictingIdError, JobLookupError
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.schedulers.base import STATE_PAUSED, STATE_RUNNING, STATE_STOPPED, TIMEOUT_MAX, BaseScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.interval import IntervalTrigger
from croniter import croniter

from sentinel_hooks.config.watcher import Scheduled
from sentinel_hooks.core.phase import PHASE_STEP_US, phase_us

MIN_MISFIRE_GRACE = timedelta(minutes=1)


class CronTrigger(BaseTrigger):  # type: ignore[misc]  # APScheduler 3 ships no type hints
    """Fires on a croniter expression in a timezone (seconds first when there are 6 fields)."""

    __slots__ = ("expression", "jitter_s", "timezone")

    def __init__(self, expression: str, timezone: str = "UTC", jitter_s: float = 0.0) -> None:
        self.expression = expression
        self.timezone = ZoneInfo(timezone)
        self.jitter_s = jitter_s

    def next_after(self, at: datetime) -> datetime:
        """The first fire time strictly after ``at``."""
        seconds_first = len(self.expression.split()) == 6
        it = croniter(self.expression, at.astimezone(self.timezone), second_at_beginning=seconds_first)
        result: datetime = it.get_next(datetime)
        return result

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        base = previous_fire_time if previous_fire_time is not None else now - timedelta(microseconds=1)
        upcoming = self.next_after(base)
        jittered: datetime | None = self._apply_jitter(upcoming, self.jitter_s, now)
        return jittered

    def __str__(self) -> str:
        return f"cron[{self.expression} {self.timezone.key}]"


class PollJobStore(BaseJobStore):  # type: ignore[misc]  # APScheduler 3 ships no type hints
    """The jobs of one scheduler in memory, ordered by next run in a heap.

    ``MemoryJobStore`` keeps a sorted list: moving a job that just ran to its next run deletes
    it near the front and shifts every other entry (~30 µs per run with 100,000 jobs). Here a
    run pushes one heap entry (O(log n)); the entry a job leaves behind is recognised as stale
    (its sequence number is not the job's current one) and dropped when it reaches the top.
    """

    def __init__(self) -> None:
        super().__init__()
        self._jobs: dict[str, Job] = {}
        self._heap: list[tuple[float, int, str]] = []  # (next run as a timestamp, seq, job id)
        self._live: dict[str, int] = {}  # job id -> seq of its current heap entry (none when paused)
        self._seq = itertools.count()

    def lookup_job(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def get_due_jobs(self, now: datetime) -> list[Job]:
        at = now.timestamp()
        jobs = self.get_all_jobs()
        return [job for job in jobs if job.next_run_time is not None and job.next_run_time.timestamp() <= at]

    def pop_due(self, at: float, limit: int | None = None) -> list[Job]:
        """The jobs due at ``at`` (a timestamp), at most ``limit`` of them, taken off the heap in
        run order (the longest overdue first): the caller puts each back with ``update_job`` or
        removes it; the others due stay in the heap."""
        heap, live = self._heap, self._live
        due: list[Job] = []
        while heap and heap[0][0] <= at and (limit is None or len(due) < limit):
            _, seq, job_id = heapq.heappop(heap)
            if live.get(job_id) == seq:
                del live[job_id]
                due.append(self._jobs[job_id])
        return due

    def get_next_run_time(self) -> datetime | None:
        heap, live = self._heap, self._live
        while heap:
            _, seq, job_id = heap[0]
            if live.get(job_id) == seq:
                at: datetime = self._jobs[job_id].next_run_time
                return at
            heapq.heappop(heap)
        return None

    def get_all_jobs(self) -> list[Job]:
        def order(job: Job) -> float:
            return float("inf") if job.next_run_time is None else float(job.next_run_time.timestamp())

        return sorted(self._jobs.values(), key=order)

    def add_job(self, job: Job) -> None:
        if job.id in self._jobs:
            raise ConflictingIdError(job.id)
        self._jobs[job.id] = job
        self._push(job)

    def update_job(self, job: Job) -> None:
        if job.id not in self._jobs:
            raise JobLookupError(job.id)
        self._jobs[job.id] = job
        self._push(job)

    def remove_job(self, job_id: str) -> None:
        if self._jobs.pop(job_id, None) is None:
            raise JobLookupError(job_id)
        self._live.pop(job_id, None)

    def remove_all_jobs(self) -> None:
        self._jobs.clear()
        self._heap.clear()
        self._live.clear()

    def shutdown(self) -> None:
        self.remove_all_jobs()

    def _push(self, job: Job) -> None:
        if job.next_run_time is None:  # paused: not in the heap
            self._live.pop(job.id, None)
            return
        seq = next(self._seq)
        self._live[job.id] = seq
        heapq.heappush(self._heap, (job.next_run_time.timestamp(), seq, job.id))
        if len(self._heap) > 2 * len(self._live) + 1024:  # mostly stale entries: rebuild
            self._heap = [entry for entry in self._heap if self._live.get(entry[2]) == entry[1]]
            heapq.heapify(self._heap)


class LoopScheduler(AsyncIOScheduler):  # type: ignore[misc]  # APScheduler 3 ships no type hints
    """``AsyncIOScheduler`` that runs due poll jobs itself, on the loop, at a fraction of the cost.

    APScheduler's timer calls ``wakeup``, which may be called from any thread and so hands the
    work to the loop with ``call_soon_threadsafe``: a write to the loop's self-pipe, an extra
    turn of the loop and a read, for every job run. The timer already fires on the loop, so
    this scheduler processes the jobs there at once; ``wakeup`` (adds, changes, resume) is
    unchanged.

    Processing a due job is also cheaper than ``BaseScheduler._process_jobs`` (~40 µs of CPU
    per run, as much as a third of a poll's): the jobs sit in a ``PollJobStore`` heap, the job's
    coroutine becomes a task at once (no executor bookkeeping, no submission and execution
    events: nothing listens to them), and an interval trigger's next run is the last one plus
    the interval. Every job here is ``add_poll_job``'s (``coalesce``, no misfire grace time):
    runs missed meanwhile are coalesced into one, as APScheduler would. ``max_instances`` is not
    enforced: a poll due while the previous one of its watcher runs returns at once (counted as
    ``busy``), so instances never pile up. A job that raises is logged as APScheduler would.

    **Admission.** At most ``STARTS_PER_TURN`` polls start per turn of the event loop, and none
    while ``MAX_RUNNING`` are running; the jobs left due stay in the heap, longest overdue first,
    and start at the next turn (or as running polls end). A process offered more polls than its
    CPU can make so polls as many as it can, late, instead of turning every due job into a task
    at once: tens of thousands of tasks in one turn of the loop stall it for seconds, and
    whatever else the loop runs (a cluster replica's lease renewals, the API, store writes)
    waits behind them; in a replica capped at 0.5 CPU that lost every lease in a loop and polled
    nothing (docs/scaling.md). Under the caps nothing changes: due jobs start when due.

    **Halting.** A graceful stop first ``halt_polls``: no poll starts after it (a ``resume``, as
    a slice of runners starting meanwhile makes, does not undo it), so the stop's own work (tens
    of thousands of runners stopped, their states written, their leases released) does not queue
    behind polls the process will not act on: a replica offered more polls than its CPU makes
    took longer than ``sentinel run``'s time limit to stop 60,000 runners.
    """

    STARTS_PER_TURN = 32  # a few tens of ms of polls' CPU per turn on a replica capped at 0.5 CPU
    MAX_RUNNING = 256  # the HTTP client's request slots (``SafeHttp.pool_size``): more would queue there

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._running_polls: dict[asyncio.Task[Any], Job] = {}
        self._held_back = False  # due jobs wait for running polls to end (``MAX_RUNNING``)
        self._halted = False  # ``halt_polls``: paused for good

    def halt_polls(self) -> None:
        """Start no poll from now on (polls running finish): the first step of a graceful stop."""
        self._halted = True
        if self.state == STATE_RUNNING:
            self.pause()

    def resume(self) -> None:
        if not self._halted:
            super().resume()

    def start(self, paused: bool = False) -> None:
        self._halted = False  # a scheduler shut down and started again polls again
        super().start(paused=paused)

    def _create_default_jobstore(self) -> PollJobStore:
        return PollJobStore()

    def _start_timer(self, wait_seconds: float | None) -> None:
        self._stop_timer()
        if wait_seconds is not None:
            self._timeout = self._eventloop.call_later(wait_seconds, self._on_timer)

    def _on_timer(self) -> None:
        self._timeout = None
        self._start_timer(self._process_jobs())

    def _process_jobs(self) -> float | None:
        store = self._jobstores.get("default")
        if self.state == STATE_PAUSED or len(self._jobstores) != 1 or not isinstance(store, PollJobStore):
            wait: float | None = super()._process_jobs()
            return wait
        now = datetime.now(self.timezone)
        room = min(self.STARTS_PER_TURN, self.MAX_RUNNING - len(self._running_polls))
        with self._jobstores_lock:
            for job in store.pop_due(now.timestamp(), max(room, 0)):
                self._run_due(job, now, store)
            next_at = store.get_next_run_time()
        if next_at is None:
            return None
        wait_s = float(min(max(next_at.timestamp() - time.time(), 0), TIMEOUT_MAX))
        if wait_s == 0 and len(self._running_polls) >= self.MAX_RUNNING:
            self._held_back = True  # ``_poll_done`` processes the jobs again
            return None
        return wait_s  # 0 with jobs left due: the next turn starts the next ones

    def _run_due(self, job: Job, now: datetime, store: PollJobStore) -> None:
        """Start ``job`` once (missed runs coalesced) and put it back at its next run."""
        trigger = job.trigger
        if type(trigger) is IntervalTrigger and trigger.jitter is None and trigger.end_date is None:
            upcoming: datetime | None = job.next_run_time + trigger.interval
            while upcoming is not None and upcoming <= now:
                upcoming += trigger.interval
        else:
            run_times = job._get_run_times(now) or [job.next_run_time]
            upcoming = trigger.get_next_fire_time(run_times[-1], now)
        self._start(job)
        if upcoming is None:
            store.remove_job(job.id)
        else:
            job.next_run_time = upcoming
            store.update_job(job)

    def _start(self, job: Job) -> None:
        try:
            result = job.func(*job.args, **job.kwargs)
            if not asyncio.iscoroutine(result):
                return
            task = self._eventloop.create_task(result)
        except Exception:
            self._logger.exception('Job "%s" raised an exception', job)
            return
        self._running_polls[task] = job
        task.add_done_callback(self._poll_done)

    def _poll_done(self, task: asyncio.Task[Any]) -> None:
        job = self._running_polls.pop(task, None)
        if not task.cancelled() and task.exception() is not None:
            self._logger.error('Job "%s" raised an exception', job, exc_info=task.exception())
        if self._held_back and self.state == STATE_RUNNING:
            self._held_back = False
            self._start_timer(0)

    def shutdown(self, wait: bool = True) -> None:
        super().shutdown(wait=wait)
        for task in list(self._running_polls):  # as the executor cancels its pending jobs
            task.cancel()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_NO_KWARGS: Mapping[str, Any] = MappingProxyType({})  # every poll job's (an empty dict each: 64 bytes)


PHASE_STEP = timedelta(microseconds=PHASE_STEP_US)


def phase(watcher_id: str, interval: timedelta) -> timedelta:
    """The watcher's stable offset within ``interval``: a hash of its id, uniform over the
    interval's 10 ms steps (``PHASE_STEP``).

    Watchers on the same step start in one pass of the scheduler. Each distinct instant costs a
    wake-up of the process and a scheduler pass (measured: ~120 µs of CPU, as much as running
    the job); with 10,000 watchers at 10 s, steps put ~10 polls in each instead of one.
    """
    return phase_us(watcher_id, interval // _US) * _US


def first_run(watcher_id: str, interval: timedelta, base: datetime) -> datetime:
    """The first instant at or after ``base`` that falls on the watcher's phase of ``interval``."""
    return base + _wait_us(watcher_id, interval // _US, base) * _US


def _wait_us(watcher_id: str, interval_us: int, base: datetime) -> int:
    """Microseconds from ``base`` to ``first_run`` (integers: start sorts thousands by it)."""
    since_epoch = (base - _EPOCH) // _US
    return (phase_us(watcher_id, interval_us) - since_epoch) % max(1, interval_us)


def trigger_for(watcher: Scheduled, base: datetime) -> BaseTrigger:
    """The trigger of a polled watcher; an interval watcher first runs at ``first_run`` after ``base``."""
    if watcher.schedule is not None:
        return CronTrigger(watcher.schedule, watcher.timezone, jitter_s=0.25)
    interval = timedelta(milliseconds=watcher.interval_ms or 1000)
    return interval_trigger(interval, first_run(watcher.id, interval, base))


def interval_trigger(interval: timedelta, start: datetime) -> IntervalTrigger:
    """``IntervalTrigger(seconds=interval.total_seconds(), start_date=start, timezone="UTC")``,
    with the same state, built without its constructor.

    The constructor resolves the timezone by name and converts the start date through
    APScheduler's helpers on every call (about 25 µs, a tenth of starting a watcher); here
    the UTC zone is resolved once (``_UTC``) and the start date is only moved into it.
    """
    trigger: IntervalTrigger = IntervalTrigger.__new__(IntervalTrigger)
    shared = shared_interval(interval if interval else timedelta(seconds=1))
    trigger.interval, trigger.interval_length = shared
    trigger.timezone = _UTC
    trigger.start_date = start.astimezone(_UTC)
    trigger.end_date = None
    trigger.jitter = None
    return trigger


_UTC = IntervalTrigger(seconds=1, start_date=datetime(2000, 1, 1, tzinfo=UTC), timezone="UTC").timezone


@functools.lru_cache(maxsize=4096)  # intervals are few; a bound all the same
def shared_interval(interval: timedelta) -> tuple[timedelta, float]:
    """One ``interval`` object and its length in seconds for every trigger (and poll strategy)
    of that interval: both immutable, and at a million watchers 64 bytes a watcher (issue 34.5)."""
    return interval, interval.total_seconds()


def start_order(base: datetime) -> Callable[[Any], int]:
    """The key that orders watchers started at ``base`` by when each first does something: the
    microseconds to an interval watcher's ``first_run``, 0 for any other (cron, streams,
    webhooks). Starting many in this order lets the first polls begin while the rest are still
    being scheduled; the key works out ``base``'s offset once, as it orders thousands."""
    since_epoch = (base - _EPOCH) // _US

    def key(watcher: Any) -> int:
        if isinstance(watcher, Scheduled) and watcher.schedule is None:
            interval_us = (watcher.interval_ms or 1000) * 1000
            return (phase_us(watcher.id, interval_us) - since_epoch) % max(1, interval_us)
        return 0

    return key


def add_poll_job(
    scheduler: BaseScheduler, job_id: str, func: Callable[[], Any], trigger: BaseTrigger, now: datetime
) -> Job:
    """Schedule ``func`` under ``job_id`` (replacing a job of that id), as ``add_job`` would with
    ``coalesce=True, max_instances=3, misfire_grace_time=None``, minus its validation.

    ``Job.__init__`` checks the callable's signature against its arguments (``inspect.signature``,
    about 100 µs: half of starting a watcher); ``func`` takes none, so that check is skipped. An
    interval trigger's first run is its ``start_date`` even when that has passed: the job then
    runs at the scheduler's next pass, and on the trigger's phase after that (APScheduler counts
    the next run from the previous one), instead of waiting for the next phase.
    """
    job = Job.__new__(Job)
    job._scheduler = scheduler
    job._jobstore_alias = None
    job.id = job.name = job_id
    job.func, job.func_ref, job.args, job.kwargs = func, None, (), _NO_KWARGS
    job.trigger, job.executor = trigger, "default"
    job.misfire_grace_time, job.coalesce, job.max_instances = None, True, 3
    if isinstance(trigger, IntervalTrigger):
        job.next_run_time = trigger.start_date
    else:
        job.next_run_time = trigger.get_next_fire_time(None, now)
    with scheduler._jobstores_lock:
        if scheduler.state == STATE_STOPPED:
            scheduler._pending_jobs.append((job, "default", True))
        else:
            _store_job(scheduler, job)
    return job


def _store_job(scheduler: BaseScheduler, job: Job) -> None:
    """``scheduler._real_add_job(job, "default", True)`` for a job with every field set.

    APScheduler fills in defaults (none are missing here), builds and dispatches a job-added
    event and logs a line per job: a tenth of starting a watcher, for an event nobody listens
    to. It does so only when a listener or the log would see it.
    """
    store = scheduler._jobstores["default"]
    try:
        store.add_job(job)
    except ConflictingIdError:
        store.update_job(job)
    job._jobstore_alias = "default"
    if scheduler._listeners:
        scheduler._dispatch_event(JobEvent(EVENT_JOB_ADDED, job.id, "default"))
    if scheduler._logger.isEnabledFor(logging.INFO):
        scheduler._logger.info('Added job "%s" to job store "%s"', job.name, "default")
    if scheduler.state == STATE_RUNNING:
        scheduler.wakeup()


def period(watcher: Scheduled, now: datetime) -> timedelta:
    """The time between two runs (for cron: between the next two fire times)."""
    if watcher.interval_ms is not None:
        return timedelta(milliseconds=watcher.interval_ms)
    trigger = CronTrigger(watcher.schedule or "* * * * *", watcher.timezone)
    first = trigger.next_after(now)
    return trigger.next_after(first) - first


def missed_run(watcher: Scheduled, next_check_at: datetime | None, now: datetime) -> bool:
    """Whether ``misfire: runOnce`` should run the watcher once at start.

    True when the run planned before the service stopped (``next_check_at``) has passed by
    less than one period (at least a minute): a run missed during a short downtime is made
    up once; a long outage does not replay a stale check.
    """
    if watcher.misfire != "runOnce" or next_check_at is None or next_check_at > now:
        return False
    grace = max(period(watcher, now), MIN_MISFIRE_GRACE)
    return now - next_check_at <= grace
