"""Runs one watcher: its state, its lifecycle, and every observation, event and fire under one lock.

The runner is the only writer of its watcher's state: every observation, pushed event and manual
fire goes through one lock, so state updates never interleave. A driver makes the watcher observe
and hands the runner what it saw (``observed``) and each failed attempt (``failed``):
``polling.Polling`` (the scheduler's runs, or a long-poll loop) or ``subscription.Subscription``
(a stream, reconnected), both retrying through the loop of ``retries``; ``quiet.QuietWatch``
fires when expected events stay away. Webhook watchers are pushed to (``ingest``, ``ingest_alerts``);
a heartbeat watcher's pings and due-time watch are its ``heartbeat()`` (``watchers.beats``).

Cluster mode (Redis store, several replicas): the manager marks polled and subscribed runners
``needs_lease`` and gives them a ``fence`` while this replica holds the watcher's lease. Such a
runner starts only with a fence, and checks it (``fenced``) before the pipeline acts on an
observation: a replica that lost the lease (a long pause, a hand-off) drops what it saw. Every
drop is counted (``sentinel_observations_dropped_total{reason}``); one this replica could not
rule on (``lease_unknown``) is also a failed check in the watcher's status.

10,000 watchers share one event loop: a failure is logged at WARNING and stored on the ok →
failing transition (the recovery on failing → ok), while the running failure count and last
error, like the check instants, are stored at most every ``STATE_FLUSH_S`` and at the stop.

Past 500 lines because every path that changes a watcher's state (polls, streams, pushes, alert
batches, manual fires, enable and disable) takes the one lock and shares the store-failure,
fencing and write-back handling here; what is not that lives beside it (the drivers,
``quiet``, ``beats``, ``pushes``, ``alerts``; what every runner shares, ``shared``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sentinel_hooks.config.loaded import LoadedWatcher
from sentinel_hooks.config.watcher import (
    AnyWatcher,
    HeartbeatWatcher,
    HttpLongPollWatcher,
    Scheduled,
    WebhookWatcher,
)
from sentinel_hooks.core.paths import MISSING
from sentinel_hooks.errors import SentinelError, StoreError
from sentinel_hooks.store.shortcuts import get_watcher_state, put_watcher_state
from sentinel_hooks.watchers.alerts import AlertStreams
from sentinel_hooks.watchers.beats import BeatWatch
from sentinel_hooks.watchers.pipeline import UNKNOWN, Outcome
from sentinel_hooks.watchers.polling import Polling
from sentinel_hooks.watchers.pushes import PushBatches
from sentinel_hooks.watchers.quiet import QuietWatch
from sentinel_hooks.watchers.retries import Stopping
from sentinel_hooks.watchers.shared import LEASE_LOST, LEASE_UNKNOWN, NOT_LEASED, Fence, RunnerDeps
from sentinel_hooks.watchers.state import WatcherState
from sentinel_hooks.watchers.strategy import (
    Observed,
    ObserveError,
    PollStrategy,
    SubscribeStrategy,
    create_strategy,
    polls,
)
from sentinel_hooks.watchers.subscription import Subscription
from sentinel_hooks.watchers.tally import Status, StatusTally, classify

log = logging.getLogger(__name__)

STATE_FLUSH_S = 30.0  # a 10 s watcher writes its state at most every third poll


class WatcherRunner:
    """One watcher at run time.

    Slotted, and its lock and push batches made when first used: at 100,000 idle watchers
    every per-runner byte is about 100 KB of the service's memory (issue 34.5).
    """

    __slots__ = (
        "_beat",
        "_driver",
        "_lock",
        "_planned",
        "_previous",
        "_pushes",
        "_quiet",
        "_redis_trouble",
        "_running",
        "_saved",
        "_saved_at",
        "_state",
        "_status",
        "_stop_event",
        "_stopper",
        "_stopping",
        "_tasks",
        "deps",
        "fence",
        "loaded",
        "needs_lease",
        "tally",
    )

    def __init__(self, loaded: LoadedWatcher, state: WatcherState, deps: RunnerDeps) -> None:
        self.loaded = loaded
        self._state = state
        self._planned: datetime | None = None  # the first run planned at start, not yet in the state
        self._running = False
        # what the manager's tally counts this runner as (``tally.classify``), while registered
        self.tally: StatusTally | None = None
        self._status: Status | None = None
        self.deps = deps
        self._lock: asyncio.Lock | None = None  # made when first taken (``lock``)
        self._pushes: PushBatches | None = None  # json pushes waiting for the lock, from the first
        # the last failures were the store's or its lease checks' (logged once for every runner by
        # ``deps.unrecorded`` and ``deps.unfenced``, so its recovery is not a line of its own either)
        self._redis_trouble = False
        self._stopping = False
        # Created when first waited on, not per runner: an asyncio.Event holds a deque of waiters
        # (about 0.7 KiB), and most runners never wait (interval polls without a failure).
        self._stop_event: asyncio.Event | None = None  # set by stop(); waited on by backoff sleeps
        self._tasks: set[asyncio.Task[None]] | None = None  # loops and missed runs it spawned
        self._driver: Polling | Subscription | None = None  # what makes it observe, from its first start
        self._quiet: QuietWatch | None = None  # expectEventWithinMs, from its first start
        self._beat: BeatWatch | None = None  # a heartbeat's pings and due-time watch, from its first use
        self._previous: Any = UNKNOWN  # the last observation, once known (saves a store read per poll)
        self._saved: tuple[Any, ...] | None = None  # the durable fields last written
        self._saved_at = 0.0
        self._stopper: asyncio.Task[None] | None = None
        self.needs_lease = False  # cluster mode, set by the manager: start only with a fence
        self.fence: Fence | None = None  # set by the manager while this replica holds the lease

    @property
    def spec(self) -> AnyWatcher:
        return self.loaded.spec

    @property
    def state(self) -> WatcherState:
        """What the service remembers of the watcher, its next check included.

        A start plans the first run (``_planned``) without copying the state: the copy holding
        it is made when the state is first read (a poll, a status, a save). An idle watcher
        that started from no stored state keeps sharing the initial one (about 350 bytes a
        watcher; issue 34.5).
        """
        planned = self._planned
        if planned is not None:
            self._planned = None
            if planned != self._state.next_check_at:
                self._state = self._state.evolve(next_check_at=planned)
        return self._state

    @state.setter
    def state(self, state: WatcherState) -> None:
        self._state, self._planned = state, None
        self._report()

    @property
    def running(self) -> bool:
        return self._running

    @running.setter
    def running(self, running: bool) -> None:
        self._running = running
        self._report()

    def counted(self, tally: StatusTally | None) -> None:
        """Be counted in ``tally`` from now on (None: no longer counted where it was)."""
        if self.tally is not None:
            self.tally.move(self.id, self._status, None)
        self.tally, self._status = tally, None
        self._report()

    def _report(self) -> None:
        """Move this runner's count in its tally if its class changed (about 1 µs a set)."""
        tally = self.tally
        if tally is not None:
            status = classify(self.loaded.spec, self._state, self._running)
            if status is not self._status:
                tally.move(self.id, self._status, status)
                self._status = status

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
        if isinstance(spec, HeartbeatWatcher):
            self.spawn(self.heartbeat().run())
            return
        if isinstance(spec, WebhookWatcher):
            if spec.expect_event_within_ms:
                self.spawn(self._quiet_watch().run())
            return
        strategy = create_strategy(spec, self.deps.context)
        if isinstance(spec, Scheduled | HttpLongPollWatcher):
            polling = self._polling(strategy)
            if isinstance(spec, Scheduled):
                planned = polling.schedule(spec, run_missed=run_missed, base=base or self.deps.clock.now())
                self._planned = planned  # in the state when it is next read
            else:
                self.spawn(polling.long_poll_loop())
        else:
            self.spawn(self._subscription(strategy).run())
            if spec.expect_event_within_ms:
                self.spawn(self._quiet_watch().run())

    async def stop(self, *, timeout_s: float = 8.0) -> None:
        """Stop scheduling; let an in-flight poll finish (up to ``timeout_s``), then close."""
        if not self.running:
            return
        self.running = False
        self._stopping = True
        if self._stop_event is not None:
            self._stop_event.set()
        driver = self._driver
        if isinstance(driver, Polling):
            await driver.halt(timeout_s=timeout_s)
        tasks, self._tasks = self._tasks, None
        if tasks:
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if driver is not None and driver.strategy is not None:
            with contextlib.suppress(Exception):
                await driver.strategy.close()
            driver.strategy = None
        with contextlib.suppress(Exception):  # the latest check instants, which _save may have held back;
            # sent without waiting for the gathering window: a stop (a shutdown) is waited for
            if self._beat is not None:  # not over pings another replica took
                await self._beat.before_stop()
            await self._save(force=True, prompt=True)

    def _polling(self, strategy: PollStrategy | SubscribeStrategy) -> Polling:
        """The polls' driver (made once), polling with ``strategy`` from now on."""
        polling = self._driver if isinstance(self._driver, Polling) else Polling(self)
        polling.strategy = strategy if polls(strategy) else None
        self._driver = polling
        return polling

    def _subscription(self, strategy: PollStrategy | SubscribeStrategy) -> Subscription:
        """The stream's driver (made once), subscribing with ``strategy`` from now on."""
        subscription = self._driver if isinstance(self._driver, Subscription) else Subscription(self)
        subscription.strategy = strategy if isinstance(strategy, SubscribeStrategy) else None
        self._driver = subscription
        return subscription

    def _quiet_watch(self) -> QuietWatch:
        """The quiet watch (made once)."""
        if self._quiet is None:
            self._quiet = QuietWatch(self)
        return self._quiet

    def heartbeat(self) -> BeatWatch:
        """A heartbeat watcher's pings and due-time watch (made once; ``watchers.beats``)."""
        if self._beat is None:
            self._beat = BeatWatch(self)
        return self._beat

    # -- what its drivers call ---------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """``stop`` was called: the drivers' loops end."""
        return self._stopping

    def spawn(self, coro: Any) -> None:
        """Run ``coro`` as a task of this runner's (cancelled by ``stop``)."""
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        if self._tasks is None:
            self._tasks = set()
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def sleep(self, seconds: float) -> None:
        """A backoff sleep that ends early (raising ``Stopping``) when the runner stops."""
        if not self._stopping:
            if self._stop_event is None:
                self._stop_event = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop_event.wait(), timeout=seconds)
        if self._stopping:
            raise Stopping

    async def observed(self, observed: Observed) -> None:
        """``_handle`` for the watcher's own polls and streams: a store failure is on its status."""
        with contextlib.suppress(StoreError):
            await self._handle(observed)

    async def fire_quiet(self) -> bool:
        """The quiet watch's fire (``no_progress``); False when it was not made: the lease not
        confirmed, or the store did not take it (on the status)."""
        try:
            async with self.lock:
                if self.needs_lease and not await self.fenced():
                    return False
                await self._run(self.deps.pipeline.quiet(self.spec, self.state), self.state)
        except StoreError:
            return False
        return True

    @property
    def lock(self) -> asyncio.Lock:
        """The lock every change of the state is made under (``watchers.beats`` takes it too);
        made when first asked for, as most idle runners never take it."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def take(self, step: Awaitable[Outcome]) -> Outcome:
        """Await a pipeline step and adopt its outcome, stored at once (the caller holds the
        lock); a store that does not take it marks the watcher failing and raises ``StoreError``."""
        return await self._run(step, self.state, prompt=True)

    async def stored_state(self) -> WatcherState:
        """The state as stored (another replica's writes included)."""
        return WatcherState.from_json(await get_watcher_state(self.deps.store, self.id))

    async def before_retry(self, exc: ObserveError, delay_s: float) -> None:
        """A failed attempt that is tried again after ``delay_s``."""
        await self.failed(exc, next_at=self.deps.clock.now() + timedelta(seconds=delay_s))

    async def failed(self, exc: ObserveError, *, next_at: datetime | None) -> None:
        """Count a failed attempt; WARNING only on the ok → failing transition (DEBUG after)."""
        self.deps.metrics.poll_errors.labels(self.id).inc()
        message = self.deps.redactor.text(str(exc))
        level = logging.DEBUG if self.state.consecutive_failures else logging.WARNING
        log.log(level, "watcher %s: %s", self.id, message, extra={"watcherId": self.id})
        async with self.lock:
            self.state = self.state.failed(self.deps.clock.now(), message).evolve(next_check_at=next_at)
            await self._save()

    # -- events ------------------------------------------------------------------------------

    async def _handle(self, observed: Observed, *, prompt: bool = False) -> Outcome:
        """Run an observation through the pipeline; a store that does not take it raises
        ``StoreError`` after the watcher was marked failing (``_store_failed``). ``prompt``: a
        pushed event, whose writes wait for no gathering window (``watchers.writeback``)."""
        async with self.lock:
            if self.needs_lease and not await self.fenced():
                return Outcome(state=self.state, skipped=NOT_LEASED)
            before = self.state
            self.state = before.succeeded(observed.at)
            step = self.deps.pipeline.observe(
                self.spec, observed, self.state, previous=self._previous, prompt=prompt
            )
            outcome = await self._run(step, before, prompt=prompt)
            self._previous = observed.value  # only once stored: a change not stored is seen again
            self._recovered(before)
        if self._quiet is not None:
            self._quiet.seen()
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
        self.deps.unrecorded.succeeded()
        await self._apply(outcome, save=save, prompt=prompt)
        return outcome

    async def _store_failed(self, exc: StoreError, state: WatcherState, *, prompt: bool = False) -> None:
        """The store did not take an observation or a fire (caller holds the lock): the watcher
        shows ``failing`` with the store's error until an observation is stored again."""
        self.deps.metrics.poll_errors.labels(self.id).inc()
        message = self.deps.redactor.text(f"not recorded: {exc}")
        log.debug("watcher %s: %s", self.id, message, extra={"watcherId": self.id})
        self.deps.unrecorded.failed(exc)
        self._redis_trouble = True
        self.state = state.failed(self.deps.clock.now(), message)
        with contextlib.suppress(StoreError):  # most likely refused too; kept in memory meanwhile
            await self._save(prompt=prompt)

    async def lease_confirmed(self) -> bool:
        """Cluster mode, before a poll's request: the fencing check (``fenced``) made first, so
        a replica that cannot vouch for its lease does not even ask (see ``Polling._request``)."""
        async with self.lock:
            return await self.fenced()

    async def fenced(self) -> bool:
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
            self.deps.unfenced.failed(exc)
            self._redis_trouble = True
            self.state = self.state.failed(self.deps.clock.now(), message)
            with contextlib.suppress(SentinelError):  # Redis may be what failed; the drop is logged
                await self._save()
            return False
        if held:
            self.deps.unfenced.succeeded()
        else:
            self._dropped(LEASE_LOST, "this replica no longer holds its lease; stopping")
            if self.fence is not None:
                self.fence = None
                self._stopper = asyncio.get_running_loop().create_task(self.stop())
        return held

    def _dropped(self, reason: str, why: str, *, level: int = logging.WARNING) -> str:
        """Count and log an observation not acted on; the message, redacted."""
        self.deps.metrics.observations_dropped.labels(reason).inc()
        message = f"observation dropped: {self.deps.redactor.text(why)}"
        log.log(level, "watcher %s: %s", self.id, message, extra={"watcherId": self.id})
        return message

    # -- what the service asks ---------------------------------------------------------------

    @property
    def last_observed(self) -> Any:
        """The last observation this runner saw (MISSING when it has seen none yet)."""
        return MISSING if self._previous is UNKNOWN else self._previous

    async def ingest(self, value: Any) -> Outcome:
        """A pushed event (``format: json`` webhook watchers), taken with the others that queued
        for the lock meanwhile (``watchers.pushes``); its outcome once its batch is stored."""
        observed = Observed(value=value, at=self.deps.clock.now())
        if self._pushes is None:
            self._pushes = PushBatches()
        return await self._pushes.push(observed, self.lock, self._judge_pushes)

    async def _judge_pushes(self, batch: list[Observed]) -> list[Outcome | StoreError]:
        """Pushes that queued for the lock (the caller holds it): each judged in order, as
        ``_handle`` would, then their observations and the state they left stored in one write
        that waits for no gathering window. A push whose fire the store refused gets its
        ``StoreError``; a refused write, every push of the batch (none is answered 202)."""
        if self.needs_lease and not await self.fenced():
            return [Outcome(state=self.state, skipped=NOT_LEASED) for _ in batch]
        pipeline, before = self.deps.pipeline, self.state
        results: list[Outcome | StoreError] = []
        try:
            previous = await pipeline.previous(self.id, self._previous)
            for observed in batch:
                self.state = self.state.succeeded(observed.at)
                step = pipeline.observe(self.spec, observed, self.state, previous=previous, recorded=True)
                try:
                    results.append(await self._run(step, self.state, save=False, prompt=True))
                except StoreError as exc:
                    results.append(exc)
                    continue
                previous = observed.value
            durable, now = self.state.durable_key(), asyncio.get_running_loop().time()
            await pipeline.record_all(self.id, batch, MISSING, prompt=True, state=self.state.to_json())
            self._saved, self._saved_at, self._previous = durable, now, previous
        except StoreError as exc:
            await self._store_failed(exc, self.state, prompt=True)
            return [exc] * len(batch)
        self._recovered(before)
        if self._quiet is not None:
            self._quiet.seen()
        return results

    async def ingest_alerts(self, alerts: list[dict[str, Any]]) -> list[Outcome]:
        """The alerts of one pushed notification (``format: alertmanager``) as one batch: under
        one hold of the lock, the alerts run through their streams (``watchers.alerts``)
        together (their fires' writes in flight at once; the callbacks of those that did not
        join a group written out read at once) or, when one alert's judgement depends on
        another's, in order after their callbacks are read at once; then their observations and
        the state they left stored in one write that waits for no gathering window: in a storm
        whose groups are open, one round of fires and one write, and no read. Alerts after a
        fire that disabled the watcher (fireOnce) are recorded but left alone. A store that
        refuses the write raises ``StoreError`` (the 202 is not sent, so the source sends the
        notification again: fired alerts find their callbacks and are repeats).
        """
        async with self.lock:
            if self.needs_lease and not await self.fenced():
                return [Outcome(state=self.state, skipped=NOT_LEASED) for _ in alerts]
            at = self.deps.clock.now()
            observed = [Observed(value=alert, at=at) for alert in alerts]
            streams, before = self._alerts(), self.state
            self.state = before.succeeded(at)
            callback_ids = streams.callback_ids(self.id, observed)
            together = streams.independent(self.spec, callback_ids)
            try:  # judged together, the alerts read what they need themselves
                previous = await streams.previous(self.id, self._previous)
                known = None if together else await streams.callbacks(callback_ids)
            except StoreError as exc:
                await self._store_failed(exc, before, prompt=True)
                raise
            if observed:
                self._previous = observed[-1].value
            if together:
                outcomes, merged, error = await streams.judge_together(
                    self.spec, observed, self.state, previous=previous, callback_ids=callback_ids
                )
                self._count_all(outcomes[:-1])
                if outcomes:  # the last one counted and the state they left together adopted
                    await self._apply(replace(outcomes[-1], state=merged), save=False)
                if isinstance(error, StoreError):
                    await self._store_failed(error, self.state, prompt=True)
                if error is not None:
                    raise error
                self.deps.unrecorded.succeeded()
            else:
                outcomes = []
                for item, callback_id in zip(observed, callback_ids, strict=True):
                    if not self.enabled:
                        break
                    step = streams.judge(
                        self.spec, item, self.state, previous=previous, known=known, callback_id=callback_id
                    )
                    outcomes.append(await self._run(step, self.state, save=False, prompt=True))
                    previous = item.value
            try:
                durable, now = self.state.durable_key(), asyncio.get_running_loop().time()
                await streams.record(self.id, observed, self.state.to_json())
                self._saved, self._saved_at = durable, now
            except StoreError as exc:
                await self._store_failed(exc, self.state, prompt=True)
                raise
            self._recovered(before)
        if self._quiet is not None:
            self._quiet.seen()
        return outcomes

    def _alerts(self) -> AlertStreams:
        """The service's alert streams (built without a service, as in tests: one that logs)."""
        return self.deps.alerts or AlertStreams(store=self.deps.store, pipeline=self.deps.pipeline)

    async def fire_manual(self, payload: Any) -> Outcome:
        """A manual fire (API/CLI)."""
        async with self.lock:
            step = self.deps.pipeline.fire_manual(self.spec, payload, self.state)
            return await self._run(step, self.state, prompt=True)

    async def _apply(self, outcome: Outcome, *, save: bool = True, prompt: bool = False) -> None:
        """Adopt the pipeline's new state (caller holds the lock), persist it unless not ``save``
        (``prompt``: without waiting for the write-back's window), count the fire."""
        driver = self._driver
        next_run = driver.next_run() if isinstance(driver, Polling) and self.running else None
        self.state = outcome.state.evolve(next_check_at=next_run)
        self._count(outcome)
        try:
            if save:
                await self._save(prompt=prompt)
        except StoreError as exc:
            await self._store_failed(exc, self.state, prompt=prompt)
            raise
        if not self.state.is_enabled(self.spec.enabled) and self.running:
            asyncio.get_running_loop().create_task(self.stop())

    def _count_all(self, outcomes: Sequence[Outcome]) -> None:
        """``_count`` of each outcome, the fires written out (a storm's) counted in one step."""
        joined = 0
        for outcome in outcomes:
            if outcome.contract is None and outcome.joined is not None:
                joined += 1
            else:
                self._count(outcome)
        if joined:
            self.deps.metrics.grouped.labels(self.id).inc(joined)

    def _count(self, outcome: Outcome) -> None:
        """Count the outcome's fire in the metrics (accepted, silenced, grouped or deduped)."""
        metrics, contract = self.deps.metrics, outcome.contract
        if contract is None:
            if outcome.joined is not None:
                metrics.grouped.labels(self.id).inc()
        elif contract.state == "pending":
            metrics.fires.labels(self.id, contract.trigger.kind).inc()
        elif contract.state == "silenced":
            metrics.silenced.labels(self.id).inc()
        elif contract.state == "grouped":
            metrics.grouped.labels(self.id).inc()
        else:
            metrics.deduped.labels(self.id).inc()

    async def set_enabled(self, enabled: bool) -> None:
        """Enable or disable durably (the override survives restarts and reloads)."""
        await self.adopt(
            lambda state: state.evolve(enabled=enabled, disabled_reason=None if enabled else "api")
        )
        if enabled:
            await self.start()
        else:
            await self.stop()
            await self.adopt(lambda state: state.evolve(next_check_at=None))

    async def adopt(self, change: Callable[[WatcherState], WatcherState]) -> None:
        """Apply ``change`` to the state under the lock, and store it (another replica's API
        call, an enable or disable, a subscription's reconnect)."""
        async with self.lock:
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
        if self.deps.writes is not None:
            await self.deps.writes.state(self.id, data, prompt=prompt)
        else:
            await put_watcher_state(self.deps.store, self.id, data)
        self._saved, self._saved_at = durable, now
