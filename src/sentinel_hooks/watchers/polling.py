"""A polled watcher's driver: its runs on the scheduler (or its long-poll loop), each poll with
its retries.

An interval or cron watcher is a job of the service's scheduler (``schedule.add_poll_job``),
and each run is one poll with its retries (``retries``). Polls never overlap: a run due while
the previous poll still runs is skipped and counted (``busy``), as is a poll that cannot start
(``PollSkipped``: no request slot within one interval), never queued. A run's lag behind its
schedule goes to the lag histogram and the watcher's last-lag gauge. An ``http_longpoll``
watcher asks again as soon as an answer (or a quiet timeout) came back, and waits
``retry.maxMs`` after a poll that failed for good.

What a poll observed, and each failed attempt, go to the runner (``WatcherRunner.observed``,
``failed``), which owns the state; this driver owns the schedule and the strategy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from sentinel_hooks.config.watcher import Scheduled
from sentinel_hooks.metrics import WatcherSeries
from sentinel_hooks.watchers.retries import Stopping, retry_failed, watcher_backoff
from sentinel_hooks.watchers.schedule import add_poll_job, trigger_for
from sentinel_hooks.watchers.strategy import NoObservation, Observed, ObserveError, PollSkipped, PollStrategy

if TYPE_CHECKING:
    from apscheduler.job import Job

    from sentinel_hooks.watchers.runner import WatcherRunner

log = logging.getLogger(__name__)

LEASE_SKIP = "lease"  # ``sentinel_polls_skipped`` reason: this replica could not confirm its lease


class Polling:
    """The polls of one runner (created at its first start, kept across restarts)."""

    __slots__ = ("_busy", "_expected_at", "_inflight", "_job", "_runner", "_series", "strategy")

    def __init__(self, runner: WatcherRunner) -> None:
        self._runner = runner
        self.strategy: PollStrategy | None = None  # set by each start, cleared by the stop
        self._busy = False
        self._inflight: asyncio.Task[Any] | None = None
        self._expected_at: datetime | None = None
        self._job: Job | None = None  # the scheduler's job: its next_run_time is kept current there
        self._series: WatcherSeries | None = None  # polls and last lag: looked up once, when scheduled

    def schedule(self, spec: Scheduled, *, run_missed: bool, base: datetime) -> datetime | None:
        """Put the watcher on the scheduler, first at its phase after ``base``; its next run."""
        runner = self._runner
        trigger = trigger_for(spec, base)
        self._job = add_poll_job(runner.deps.scheduler, runner.id, self._scheduled_poll, trigger, base)
        self._poll_series()  # now, so a start's heap freeze (heap.freeze_heap) takes them in
        self._expected_at = self.next_run()
        if run_missed:
            runner.spawn(self._scheduled_poll(missed=True))
        return self._expected_at

    def next_run(self) -> datetime | None:
        """The next scheduled run (None when not scheduled, or the scheduler has not started)."""
        at: datetime | None = getattr(self._job, "next_run_time", None)
        return at

    async def halt(self, *, timeout_s: float) -> None:
        """Off the scheduler; let an in-flight poll finish (up to ``timeout_s``)."""
        self._job = None
        with contextlib.suppress(Exception):
            self._runner.deps.scheduler.remove_job(self._runner.id)
        inflight = self._inflight
        if inflight is not None and not inflight.done():
            await asyncio.wait({inflight}, timeout=timeout_s)

    def _poll_series(self) -> WatcherSeries:
        """This watcher's polls counter and last-lag gauge (a lookup is too dear per poll)."""
        if self._series is None:
            self._series = self._runner.deps.metrics.watcher_series(self._runner.id)
        return self._series

    async def _scheduled_poll(self, *, missed: bool = False) -> None:
        expected = self._expected_at
        if not missed:
            self._expected_at = self.next_run()
        runner = self._runner
        if not runner.running:
            return
        if self._busy:  # polls never overlap: this run is skipped, the next one is on schedule
            runner.deps.metrics.polls_skipped.labels("busy").inc()
            return
        self._busy = True
        self._inflight = asyncio.current_task()
        try:
            if expected is not None and not missed:
                lag = max(0.0, (runner.deps.clock.now() - expected).total_seconds())
                runner.deps.metrics.poll_lag.observe(lag)
                self._poll_series().last_lag = lag
            await self.poll()
        finally:
            self._busy = False
            self._inflight = None

    async def long_poll_loop(self) -> None:
        """``http_longpoll``: poll again as soon as one ends (``retry.maxMs`` after a failure)."""
        runner = self._runner
        while not runner.stopping:
            if not await self.poll():
                with contextlib.suppress(Stopping):
                    await runner.sleep(runner.spec.retry.max_ms / 1000)

    async def poll(self) -> bool:
        """One poll with its retries; True when an observation (or a quiet long-poll) came back.
        A skipped poll is counted only; a poll that failed for good is the watcher's failure."""
        strategy = self.strategy
        if strategy is None:
            return False
        runner = self._runner
        series = self._poll_series()
        try:
            series.polls += 1
            try:
                observed = await self._request(strategy)
            except ObserveError as exc:
                observed = await retry_failed(
                    partial(self._attempt, strategy, series),
                    exc,
                    watcher_backoff(runner.spec.retry),
                    rng=runner.deps.rng,
                    sleep=runner.sleep,
                    before_sleep=runner.before_retry,
                )
        except NoObservation:
            return True
        except PollSkipped as exc:
            runner.deps.metrics.polls_skipped.labels(exc.reason).inc()
            log.debug("watcher %s: poll skipped: %s", runner.id, exc, extra={"watcherId": runner.id})
            return True
        except Stopping:
            return False
        except ObserveError as exc:
            await runner.failed(exc, next_at=self.next_run())
            return False
        await runner.observed(observed)
        return True

    async def _attempt(self, strategy: PollStrategy, series: WatcherSeries) -> Observed:
        """One more try of a poll that failed, counted as a poll."""
        series.polls += 1
        return await self._request(strategy)

    async def _request(self, strategy: PollStrategy) -> Observed:
        """The poll's request, made in cluster mode only while the keeper vouches for the lease.

        The fence after the poll keeps a stale replica from acting on what it saw, but the
        request itself would already be a second poll of the watcher in one interval: a replica
        whose renewals came late (its event loop busy, short of CPU) may still run its runners
        after the lease expired on the server and another replica took it, until its next tick
        notices. Asking first (from the keeper's renewals, no round trip) skips that poll: a
        lease gone stops the runner, one the keeper cannot vouch for is a failed check on the
        status, as when the fence after a poll says so.
        """
        runner = self._runner
        if runner.needs_lease and not await runner.lease_confirmed():
            raise PollSkipped(f"watcher {runner.id}: lease not confirmed; not polling", reason=LEASE_SKIP)
        return await strategy.poll()
