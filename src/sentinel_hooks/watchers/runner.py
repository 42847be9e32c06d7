"""Runs one watcher: its schedule or subscription, retries with backoff, status, and firing.

The runner is the only writer of its watcher's state. Every observation and every manual
or pushed event goes through one lock, so state updates never interleave; a poll never
overlaps the previous poll of the same watcher.

Cluster mode (Redis store, several replicas): the manager marks polled and subscribed runners
``needs_lease`` and gives them a ``fence`` while this replica holds the watcher's lease. Such a
runner starts only with a fence, and checks it (``_fenced``) before the pipeline acts on an
observation: a replica that lost the lease (a long pause, a hand-off) drops what it saw. Every
drop is counted (``sentinel_observations_dropped_total{reason}``); one this replica could not
rule on (``lease_unknown``) is also a failed check in the watcher's status.

A poll costs as little as it can on the happy path (10,000 watchers share one event loop):
retries are a plain loop entered only after a failure; a failure is logged at WARNING and
written to the store on the ok → failing transition (and the recovery on failing → ok), while
the running failure count and last error, like the check instants, are persisted at most every
``STATE_FLUSH_S`` and when the runner stops. A poll that cannot start (the previous one still
runs, or no request slot frees up within one interval) is skipped and counted, not queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Protocol

from apscheduler.job import Job
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from sentinel_hooks.clock import Clock
from sentinel_hooks.config.loader import LoadedWatcher
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.watcher import (
    AnyWatcher,
    HttpLongPollWatcher,
    RetrySpec,
    Scheduled,
    WebhookWatcher,
)
from sentinel_hooks.core.paths import MISSING
from sentinel_hooks.core.retry import Backoff, retry_after_of, retrying
from sentinel_hooks.errors import SentinelError, StoreError, TransientError
from sentinel_hooks.metrics import Metrics, WatcherSeries
from sentinel_hooks.outages import Outage
from sentinel_hooks.store.base import ContractStore, WatcherStore
from sentinel_hooks.store.shortcuts import put_watcher_state
from sentinel_hooks.watchers.alerts import AlertStreams
from sentinel_hooks.watchers.pipeline import UNKNOWN, FiringPipeline, Outcome
from sentinel_hooks.watchers.schedule import add_poll_job, trigger_for
from sentinel_hooks.watchers.state import WatcherState
from sentinel_hooks.watchers.strategy import (
    NoObservation,
    Observed,
    ObserveError,
    PollSkipped,
    PollStrategy,
    StrategyContext,
    SubscribeStrategy,
    TransientObserveError,
    create_strategy,
)
from sentinel_hooks.watchers.writeback import WatcherWrites

log = logging.getLogger(__name__)

STATE_FLUSH_S = 30.0  # a 10 s watcher writes its state at most every third poll

Fence = Callable[[], Awaitable[bool]]
"""Cluster mode: True while this replica still holds the watcher's lease (raises when unsure)."""

LEASE_LOST = "lease_lost"  # dropped: another replica runs the watcher now (or will at its next tick)
LEASE_UNKNOWN = "lease_unknown"  # dropped: this replica could not confirm its lease in time
NOT_LEASED = "lease not held by this replica"  # Outcome.skipped of an observation dropped so


class _Stopping(Exception):
    """Raised inside a backoff sleep when the runner is being stopped."""


class RunnerRoles(WatcherStore, ContractStore, Protocol):
    """The store roles runners and their manager call: watchers' state and history, and the
    callbacks an alert stream looks up (``AlertStreams``, when the service gave none)."""


@dataclass(frozen=True)
class RunnerDeps:
    """What every runner shares with the others."""

    store: RunnerRoles
    clock: Clock
    pipeline: FiringPipeline
    context: StrategyContext
    metrics: Metrics
    scheduler: AsyncIOScheduler
    redactor: Redactor
    rng: random.Random
    writes: WatcherWrites | None = None  # batches state writes (None: one store call each)
    alerts: AlertStreams | None = None  # format: alertmanager (None: alerts resolve in the log only)

    @cached_property
    def unrecorded(self) -> Outage:
        """The runners' store failures, logged as one run (``outages``), not a line per watcher:
        each watcher's own is on its status (``lastError``) and at DEBUG."""
        return Outage(log, "recording what watchers observe", clock=self.clock)

    @cached_property
    def unfenced(self) -> Outage:
        """The runners' lease checks that could not tell (Redis away), logged as one run."""
        return Outage(log, "checking watcher leases", clock=self.clock)


def _retried(exc: BaseException) -> bool:
    """A failed observation worth another try (a quiet long-poll is asked again at once instead)."""
    return isinstance(exc, TransientObserveError) and not isinstance(exc, NoObservation)


def watcher_backoff(retry: RetrySpec) -> Backoff:
    """The watcher's ``retry`` as a policy: full jitter under min(maxMs, baseMs * 2^(n-1)),
    ``maxRetries`` retries after the first try, a Retry-After hint honoured up to ten times maxMs."""
    cap_s = retry.max_ms / 1000
    return Backoff(
        base_s=retry.base_ms / 1000,
        cap_s=cap_s,
        jitter="full",
        max_attempts=retry.max_retries + 1,
        retry_after_cap_s=cap_s * 10,
    )


class WatcherRunner:
    """One watcher at run time."""

    def __init__(self, loaded: LoadedWatcher, state: WatcherState, deps: RunnerDeps) -> None:
        self.loaded = loaded
        self.state = state
        self._deps = deps
        self._lock = asyncio.Lock()
        # the last failures were the store's or its lease checks' (logged once for every runner by
        # ``deps.unrecorded`` and ``deps.unfenced``, so its recovery is not a line of its own either)
        self._redis_trouble = False
        # Created when first waited on, not per runner: an asyncio.Event holds a deque of waiters
        # (about 0.7 KiB), and most runners never wait (interval polls without a failure).
        self._stopping = False
        self._stop_event: asyncio.Event | None = None  # set by stop(); waited on by backoff sleeps
        self._event_seen: asyncio.Event | None = None  # set per observation; the quiet loop waits on it
        self._tasks: set[asyncio.Task[None]] | None = None  # loops and missed runs it spawned
        self._strategy: PollStrategy | SubscribeStrategy | None = None
        self._poller: PollStrategy | None = None  # the strategy when it polls (checked once at start)
        self._busy = False
        self._inflight: asyncio.Task[Any] | None = None
        self._expected_at: datetime | None = None
        self._job: Job | None = None  # the scheduler's job: its next_run_time is kept current there
        self._series: WatcherSeries | None = None  # polls and last lag: looked up once, when scheduled
        self._previous: Any = UNKNOWN  # the last observation, once known (saves a store read per poll)
        self._saved: tuple[Any, ...] | None = None  # the durable fields last written
        self._saved_at = 0.0
        self._stopper: asyncio.Task[None] | None = None
        self.running = False
        self.needs_lease = False  # cluster mode, set by the manager: start only with a fence
        self.fence: Fence | None = None  # set by the manager while this replica holds the lease

    @property
    def spec(self) -> AnyWatcher:
        return self.loaded.spec

    @property
    def id(self) -> str:
        return self.loaded.spec.id

    @property
    def enabled(self) -> bool:
        return self.state.is_enabled(self.spec.enabled)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(
        self, *, run_missed: bool = False, base: datetime | None = None, previous: Any = UNKNOWN
    ) -> None:
        """Start polling or subscribing (nothing for webhook watchers, which are pushed to).

        An interval watcher first polls at its phase after ``base`` (default: now); see
        ``schedule.first_run``. ``previous`` is the last stored observation when the caller read
        it (``MISSING``: none), else the first poll reads it. A runner that ``needs_lease`` does
        not start without a ``fence`` (another replica runs it).
        """
        if self.running or not self.enabled or (self.needs_lease and self.fence is None):
            return
        self._previous = previous  # UNKNOWN: another replica may have observed it since
        self._stopping, self._stop_event = False, None
        self.running = True
        spec = self.spec
        if isinstance(spec, WebhookWatcher):
            if spec.expect_event_within_ms:
                self._spawn(self._quiet_loop())
            return
        self._strategy = create_strategy(spec, self._deps.context)
        self._poller = self._strategy if isinstance(self._strategy, PollStrategy) else None
        if isinstance(spec, Scheduled):
            self._schedule(spec, run_missed=run_missed, base=base or self._deps.clock.now())
        elif isinstance(spec, HttpLongPollWatcher):
            self._spawn(self._long_poll_loop())
        else:
            self._spawn(self._subscription_loop())
            if spec.expect_event_within_ms:
                self._spawn(self._quiet_loop())

    async def stop(self, *, timeout_s: float = 8.0) -> None:
        """Stop scheduling; let an in-flight poll finish (up to ``timeout_s``), then close."""
        if not self.running:
            return
        self.running = False
        self._stopping = True
        if self._stop_event is not None:
            self._stop_event.set()
        self._job = None
        with contextlib.suppress(Exception):
            self._deps.scheduler.remove_job(self.id)
        if self._inflight is not None and not self._inflight.done():
            await asyncio.wait({self._inflight}, timeout=timeout_s)
        tasks, self._tasks = self._tasks, None
        if tasks:
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._strategy is not None:
            with contextlib.suppress(Exception):
                await self._strategy.close()
            self._strategy = self._poller = None
        with contextlib.suppress(Exception):  # the latest check instants, which _save may have held back;
            # sent without waiting for the gathering window: a stop (a shutdown) is waited for
            await self._save(force=True, prompt=True)

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        if self._tasks is None:
            self._tasks = set()
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- polled watchers ---------------------------------------------------------------------

    def _schedule(self, spec: Scheduled, *, run_missed: bool, base: datetime) -> None:
        trigger = trigger_for(spec, base)
        self._job = add_poll_job(self._deps.scheduler, self.id, self._scheduled_poll, trigger, base)
        self._poll_series()  # now, so a start's heap freeze (service.freeze_heap) takes them in
        self._expected_at = self._next_run()
        self.state = self.state.evolve(next_check_at=self._expected_at)
        if run_missed:
            self._spawn(self._scheduled_poll(missed=True))

    def _next_run(self) -> datetime | None:
        """The next scheduled run (None when not scheduled, or the scheduler has not started)."""
        at: datetime | None = getattr(self._job, "next_run_time", None)
        return at

    def _poll_series(self) -> WatcherSeries:
        """This watcher's polls counter and last-lag gauge (a lookup is too dear per poll)."""
        if self._series is None:
            self._series = self._deps.metrics.watcher_series(self.id)
        return self._series

    async def _scheduled_poll(self, *, missed: bool = False) -> None:
        expected = self._expected_at
        if not missed:
            self._expected_at = self._next_run()
        if not self.running:
            return
        if self._busy:  # polls never overlap: this run is skipped, the next one is on schedule
            self._deps.metrics.polls_skipped.labels("busy").inc()
            return
        self._busy = True
        self._inflight = asyncio.current_task()
        try:
            if expected is not None and not missed:
                lag = max(0.0, (self._deps.clock.now() - expected).total_seconds())
                self._deps.metrics.poll_lag.observe(lag)
                self._poll_series().last_lag = lag
            await self._poll_with_retries()
        finally:
            self._busy = False
            self._inflight = None

    async def _long_poll_loop(self) -> None:
        retry = self.spec.retry
        while not self._stopping:
            failed = not await self._poll_with_retries()
            if failed:
                with contextlib.suppress(_Stopping):
                    await self._sleep(retry.max_ms / 1000)

    async def _poll_with_retries(self) -> bool:
        """One poll with retries; True when an observation (or a quiet long-poll) came back.

        Retries (up to ``retry.maxRetries``, for transient errors) wait as ``watcher_backoff``
        says; each failed attempt is recorded, a stop ends the wait at once. A skipped poll is
        counted only.
        """
        strategy = self._poller
        if strategy is None:
            return False
        series = self._poll_series()
        attempt = 1
        try:
            while True:
                series.polls += 1
                try:
                    observed = await strategy.poll()
                    break
                except PollSkipped:
                    raise
                except ObserveError as exc:
                    backoff = watcher_backoff(self.spec.retry)
                    if not _retried(exc) or backoff.exhausted(attempt):
                        raise
                    delay = backoff.delay_s(attempt, self._deps.rng, retry_after_of(exc))
                    await self._record_failure(exc, next_at=self._deps.clock.now() + timedelta(seconds=delay))
                    await self._sleep(delay)
                    attempt += 1
        except NoObservation:
            return True
        except PollSkipped as exc:
            self._deps.metrics.polls_skipped.labels(exc.reason).inc()
            log.debug("watcher %s: poll skipped: %s", self.id, exc, extra={"watcherId": self.id})
            return True
        except _Stopping:
            return False
        except ObserveError as exc:
            await self._record_failure(exc, next_at=self._next_run())
            return False
        await self._observed(observed)
        return True

    async def _before_retry(self, exc: BaseException, delay_s: float) -> None:
        if isinstance(exc, ObserveError):
            await self._record_failure(exc, next_at=self._deps.clock.now() + timedelta(seconds=delay_s))

    async def _sleep(self, seconds: float) -> None:
        """A backoff sleep that ends early (raising _Stopping) when the runner stops."""
        if not self._stopping:
            if self._stop_event is None:
                self._stop_event = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop_event.wait(), timeout=seconds)
        if self._stopping:
            raise _Stopping

    # -- subscriptions -----------------------------------------------------------------------

    async def _subscription_loop(self) -> None:
        strategy = self._strategy
        if not isinstance(strategy, SubscribeStrategy):
            return
        retry = self.spec.retry
        disconnected_at: datetime | None = None
        while not self._stopping:
            opened: list[AsyncIterator[Observed]] = []
            try:
                first = await self._connect(strategy, opened)
                if disconnected_at is not None:
                    await self._record_reconnect(disconnected_at)
                await self._observed(first)
                async for observed in opened[-1]:
                    await self._observed(observed)
                error: ObserveError = TransientObserveError("the stream ended")
            except _Stopping:
                return
            except ObserveError as exc:
                error = exc
            finally:
                for stream in opened:
                    closer = getattr(stream, "aclose", None)
                    if closer is not None:
                        with contextlib.suppress(Exception):
                            await closer()
            disconnected_at = self._deps.clock.now()
            await self._record_failure(error, next_at=None)
            if not isinstance(error, TransientError):
                with contextlib.suppress(_Stopping):
                    await self._sleep(retry.max_ms / 1000)

    async def _connect(self, strategy: SubscribeStrategy, opened: list[AsyncIterator[Observed]]) -> Observed:
        """Open the stream (retrying with backoff) until its first observation arrives."""
        until_connected = replace(watcher_backoff(self.spec.retry), max_attempts=None)
        async for attempt in retrying(
            until_connected,
            retry_if=_retried,
            rng=self._deps.rng,
            sleep=self._sleep,
            before_sleep=self._before_retry,
        ):
            with attempt:
                stream = strategy.stream().__aiter__()
                opened.append(stream)
                return await _first(stream)
        raise ObserveError("could not connect")  # pragma: no cover - it never gives up

    async def _record_reconnect(self, since: datetime) -> None:
        gap_ms = int((self._deps.clock.now() - since).total_seconds() * 1000)
        self._deps.metrics.reconnects.labels(self.id).inc()
        async with self._lock:
            self.state = self.state.evolve(reconnects=self.state.reconnects + 1, last_gap_ms=gap_ms)
            await self._save()

    async def _quiet_loop(self) -> None:
        """expectEventWithinMs: fire ``no_progress`` once per quiet period (a dead-man's switch)."""
        window_s = (self.spec.expect_event_within_ms or 0) / 1000
        started_at = self._deps.clock.now()
        if self._event_seen is None:
            self._event_seen = asyncio.Event()
        event_seen = self._event_seen
        while not self._stopping:
            last = self.state.last_event_at or started_at
            remaining = window_s - (self._deps.clock.now() - last).total_seconds()
            event_seen.clear()
            if remaining > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event_seen.wait(), timeout=remaining)
                continue
            if self.state.quiet_fired:
                await event_seen.wait()
                continue
            try:
                async with self._lock:
                    fenced = not self.needs_lease or await self._fenced()
                    if fenced:
                        await self._run(self._deps.pipeline.quiet(self.spec, self.state), self.state)
            except StoreError:  # on the status; tried again a second later
                fenced = False
            if not fenced:
                with contextlib.suppress(_Stopping):
                    await self._sleep(1.0)

    # -- events ------------------------------------------------------------------------------

    async def _handle(self, observed: Observed, *, prompt: bool = False) -> Outcome:
        """Run an observation through the pipeline; a store that does not take it raises
        ``StoreError`` after the watcher was marked failing (``_store_failed``). ``prompt``: a
        pushed event, whose writes wait for no gathering window (``watchers.writeback``)."""
        async with self._lock:
            if self.needs_lease and not await self._fenced():
                return Outcome(state=self.state, skipped=NOT_LEASED)
            before = self.state
            self.state = before.succeeded(observed.at)
            step = self._deps.pipeline.observe(
                self.spec, observed, self.state, previous=self._previous, prompt=prompt
            )
            outcome = await self._run(step, before, prompt=prompt)
            self._previous = observed.value  # only once stored: a change not stored is seen again
            self._recovered(before)
        if self._event_seen is not None:
            self._event_seen.set()
        return outcome

    def _recovered(self, before: WatcherState) -> None:
        """An observation was stored again after failures: one INFO line, or DEBUG when the failures
        were the store's (its recovery is one line of ``deps.unrecorded``, not one per watcher)."""
        if before.consecutive_failures:
            log.log(
                logging.DEBUG if self._redis_trouble else logging.INFO,
                "watcher %s: recovered after %d failed attempt(s)",
                self.id,
                before.consecutive_failures,
                extra={"watcherId": self.id},
            )
        self._redis_trouble = False

    async def _observed(self, observed: Observed) -> None:
        """``_handle`` for the watcher's own polls and streams: a store failure is on its status."""
        with contextlib.suppress(StoreError):
            await self._handle(observed)

    async def _run(
        self, step: Awaitable[Outcome], before: WatcherState, *, save: bool = True, prompt: bool = False
    ) -> Outcome:
        """Await a pipeline step and adopt its outcome (caller holds the lock), stored unless not
        ``save``. A store that does not take it marks the watcher failing from ``before`` and
        raises its ``StoreError``."""
        try:
            outcome = await step
        except StoreError as exc:
            await self._store_failed(exc, before, prompt=prompt)
            raise
        self._deps.unrecorded.succeeded()
        await self._apply(outcome, save=save, prompt=prompt)
        return outcome

    async def _store_failed(self, exc: StoreError, state: WatcherState, *, prompt: bool = False) -> None:
        """The store did not take an observation or a fire (caller holds the lock): the watcher
        shows ``failing`` with the store's error until an observation is stored again."""
        self._deps.metrics.poll_errors.labels(self.id).inc()
        message = self._deps.redactor.text(f"not recorded: {exc}")
        log.debug("watcher %s: %s", self.id, message, extra={"watcherId": self.id})
        self._deps.unrecorded.failed(exc)
        self._redis_trouble = True
        self.state = state.failed(self._deps.clock.now(), message)
        with contextlib.suppress(StoreError):  # most likely refused too; kept in memory meanwhile
            await self._save(prompt=prompt)

    async def _fenced(self) -> bool:
        """Cluster mode: may this replica act on what it observed? (the fencing check; the caller
        holds the lock)

        Not held any more: drop it and stop; the replica holding the lease now observes the
        watcher, and its status is the watcher's (the keeper here notices at its next tick).
        Cannot tell: drop it, record a failed check (``lastError``, ``failing``) and keep
        running; the keeper decides ownership at its next tick.
        """
        fence = self.fence
        try:
            held = fence is not None and await fence()
        except SentinelError as exc:
            message = self._dropped(LEASE_UNKNOWN, str(exc), level=logging.DEBUG)
            self._deps.unfenced.failed(exc)
            self._redis_trouble = True
            self.state = self.state.failed(self._deps.clock.now(), message)
            with contextlib.suppress(SentinelError):  # Redis may be what failed; the drop is logged
                await self._save()
            return False
        if held:
            self._deps.unfenced.succeeded()
        else:
            self._dropped(LEASE_LOST, "this replica no longer holds its lease; stopping")
            if self.fence is not None:
                self.fence = None
                self._stopper = asyncio.get_running_loop().create_task(self.stop())
        return held

    def _dropped(self, reason: str, why: str, *, level: int = logging.WARNING) -> str:
        """Count and log an observation not acted on; the message, redacted."""
        self._deps.metrics.observations_dropped.labels(reason).inc()
        message = f"observation dropped: {self._deps.redactor.text(why)}"
        log.log(level, "watcher %s: %s", self.id, message, extra={"watcherId": self.id})
        return message

    @property
    def last_observed(self) -> Any:
        """The last observation this runner saw (MISSING when it has seen none yet)."""
        return MISSING if self._previous is UNKNOWN else self._previous

    async def ingest(self, value: Any) -> Outcome:
        """A pushed event (webhook watchers)."""
        return await self._handle(Observed(value=value, at=self._deps.clock.now()), prompt=True)

    async def ingest_alerts(self, alerts: list[dict[str, Any]]) -> list[Outcome]:
        """The alerts of one pushed notification (``format: alertmanager``) as one batch: under
        one hold of the lock, their observations stored in one write while their streams'
        callbacks are read, each alert then run through its stream (``watchers.alerts``) in
        order, and the state stored once at the end.

        No write waits for the write-back's gathering window: a notification of many alerts
        costs a few round trips, not two windows per alert. Alerts after a fire that disabled
        the watcher (fireOnce) are recorded but left alone; the state is stored at once then.
        A store that refuses a write raises ``StoreError`` (the 202 is not sent, so the source
        sends the notification again: fired alerts find their callbacks and are repeats).
        """
        async with self._lock:
            if self.needs_lease and not await self._fenced():
                return [Outcome(state=self.state, skipped=NOT_LEASED) for _ in alerts]
            at = self._deps.clock.now()
            observed = [Observed(value=alert, at=at) for alert in alerts]
            streams, before = self._alerts(), self.state
            self.state = before.succeeded(at)
            try:
                previous, known = await asyncio.gather(
                    streams.record(self.id, observed, self._previous), streams.callbacks(self.id, observed)
                )
            except StoreError as exc:
                await self._store_failed(exc, before, prompt=True)
                raise
            if observed:
                self._previous = observed[-1].value
            outcomes = []
            for item in observed:
                if not self.enabled:
                    break
                step = streams.judge(self.spec, item, self.state, previous=previous, known=known)
                outcomes.append(await self._run(step, self.state, save=False, prompt=True))
                previous = item.value
            try:
                await self._save(prompt=True)
            except StoreError as exc:
                await self._store_failed(exc, self.state, prompt=True)
                raise
            self._recovered(before)
        if self._event_seen is not None:
            self._event_seen.set()
        return outcomes

    def _alerts(self) -> AlertStreams:
        """The service's alert streams (built without a service, as in tests: one that logs)."""
        return self._deps.alerts or AlertStreams(store=self._deps.store, pipeline=self._deps.pipeline)

    async def fire_manual(self, payload: Any) -> Outcome:
        """A manual fire (API/CLI)."""
        async with self._lock:
            step = self._deps.pipeline.fire_manual(self.spec, payload, self.state)
            return await self._run(step, self.state, prompt=True)

    async def _apply(self, outcome: Outcome, *, save: bool = True, prompt: bool = False) -> None:
        """Adopt the pipeline's new state (caller holds the lock), persist it unless not ``save``
        (``prompt``: without waiting for the write-back's window), count the fire."""
        self.state = outcome.state.evolve(next_check_at=self._next_run() if self.running else None)
        if outcome.contract is not None:
            if outcome.contract.state == "pending":
                self._deps.metrics.fires.labels(self.id, outcome.contract.trigger.kind).inc()
            elif outcome.contract.state == "silenced":
                self._deps.metrics.silenced.labels(self.id).inc()
            else:
                self._deps.metrics.deduped.labels(self.id).inc()
        try:
            if save:
                await self._save(prompt=prompt)
        except StoreError as exc:
            await self._store_failed(exc, self.state, prompt=prompt)
            raise
        if not self.state.is_enabled(self.spec.enabled) and self.running:
            asyncio.get_running_loop().create_task(self.stop())

    async def _record_failure(self, exc: ObserveError, *, next_at: datetime | None) -> None:
        """Count a failed attempt; WARNING only on the ok → failing transition (DEBUG after)."""
        self._deps.metrics.poll_errors.labels(self.id).inc()
        message = self._deps.redactor.text(str(exc))
        level = logging.DEBUG if self.state.consecutive_failures else logging.WARNING
        log.log(level, "watcher %s: %s", self.id, message, extra={"watcherId": self.id})
        async with self._lock:
            self.state = self.state.failed(self._deps.clock.now(), message).evolve(next_check_at=next_at)
            await self._save()

    async def set_enabled(self, enabled: bool) -> None:
        """Enable or disable durably (the override survives restarts and reloads)."""
        async with self._lock:
            self.state = self.state.evolve(enabled=enabled, disabled_reason=None if enabled else "api")
            await self._save()
        if enabled:
            await self.start()
        else:
            await self.stop()
            async with self._lock:
                self.state = self.state.evolve(next_check_at=None)
                await self._save()

    async def adopt(self, change: Callable[[WatcherState], WatcherState]) -> None:
        """Apply a change made elsewhere (another replica's API call) to the state, and store it."""
        async with self._lock:
            self.state = change(self.state)
            await self._save()

    async def _save(self, *, force: bool = False, prompt: bool = False) -> None:
        """Persist the state when a durable field changed, else at most every STATE_FLUSH_S.

        The check and event instants change on every poll, the failure count and last error on
        every failed attempt; writing them each time would add a store write per attempt for
        fields nothing depends on after a crash. Whether the watcher is failing is durable.
        """
        durable = self.state.durable_key()
        now = asyncio.get_running_loop().time()
        if not force and durable == self._saved and now - self._saved_at < STATE_FLUSH_S:
            return
        data = self.state.to_json()
        if self._deps.writes is not None:
            await self._deps.writes.state(self.id, data, prompt=prompt)
        else:
            await put_watcher_state(self._deps.store, self.id, data)
        self._saved, self._saved_at = durable, now


async def _first(stream: AsyncIterator[Observed]) -> Observed:
    """The first observation of a fresh stream; an empty stream is a failed connection."""
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        raise TransientObserveError("the stream ended before any event") from None
