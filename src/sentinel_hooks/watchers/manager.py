"""All watchers of a service: start, stop, reload, enable/disable, create/delete, fire.

Watchers come from files (reloaded on SIGHUP) and from the API (kept in the store, so they
survive restarts). The manager owns one runner per watcher id and applies a new set of
definitions as a diff: added ones start, changed ones restart, removed ones stop.

Cluster mode (an ``Ownership`` is given; the store is Redis): every replica keeps a runner for
every watcher, but a polled or subscribed watcher's runner runs only on the replica holding its
lease: the manager tracks it with the ownership, ``lease_acquired`` starts it (with the state the
previous owner stored) and ``lease_lost`` stops it. Webhook watchers need no lease: any replica
may ingest what is pushed to it. Without an ownership nothing changes (one process runs all).
An enable, disable or manual fire that reaches a replica not holding the lease is stored there
and ``announce``d; the holder applies it (``changed_elsewhere``) to the state it runs with.

Starting many watchers must not make a herd, and the first polls should not wait for the last
watcher to be scheduled: ``start`` (and the lease holder of many watchers, ``leases_acquired``)
takes one base time and schedules the runners in the order of their first runs
(``schedule.start_order``), a slice at a time with the scheduler paused, yielding to the event
loop between slices; each slice's runners are built and read their stored states and last
observations in one store call each, and the first slice is small, so the first polls go out
within milliseconds of the start. No store read covers every watcher before that: in cluster
mode the states of the watchers other replicas run are read after the first leases were taken
(``restore_idle_states``). Each watcher's first poll is at its own phase of its interval after
that base (``schedule.first_run``), so the polls of the first interval are spread as evenly as
all later ones, and those due first go out while later ones are still being scheduled; one
whose phase passed before its slice came runs at once.
``apply`` (a reload) handles the diff in slices that yield to the event loop, so running
watchers keep polling while thousands are replaced.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, Protocol, TypeVar

from apscheduler.schedulers.base import STATE_RUNNING

from sentinel_hooks.config.loaded import LoadedWatcher, WatcherSource
from sentinel_hooks.config.loader import API_SOURCE_PREFIX
from sentinel_hooks.config.watcher import AnyWatcher, HeartbeatWatcher, Scheduled, WebhookWatcher
from sentinel_hooks.core.paths import MISSING
from sentinel_hooks.errors import Conflict, NotFound, StoreError
from sentinel_hooks.heap import freeze_young
from sentinel_hooks.store.shortcuts import get_watcher_state, put_watcher_state
from sentinel_hooks.watchers.ping_keys import PingKeys
from sentinel_hooks.watchers.pipeline import UNKNOWN, Outcome
from sentinel_hooks.watchers.runner import WatcherRunner
from sentinel_hooks.watchers.schedule import missed_run, start_order
from sentinel_hooks.watchers.shared import RunnerDeps
from sentinel_hooks.watchers.state import WatcherState, status_json
from sentinel_hooks.watchers.strategies.heartbeat import beat_status
from sentinel_hooks.watchers.tally import StatusTally, lasting

log = logging.getLogger(__name__)

API_DEFINITION_PREFIX = "api-definition:"  # watcher ids cannot contain ':' so these never collide
APPLY_SLICE = 200  # watchers added/changed/removed by a reload between two yields to the event loop
START_SLICE = 250  # runners started between two yields to the event loop (a few ms of work)
FIRST_SLICE = 16  # the first slice: the polls due first go out after these few are started


class _Specced(Protocol):
    """What ``_launch`` orders by: a loaded watcher, or a runner."""

    @property
    def spec(self) -> AnyWatcher: ...


_S = TypeVar("_S", bound=_Specced)


class Ownership(Protocol):
    """Cluster mode: which polled/subscribed watchers this replica may run (``cluster.ClusterOwnership``).

    The service wires the ownership's lease callbacks to ``WatcherManager.lease_acquired`` and
    ``lease_lost``. ``holds`` raises ``StoreError`` when it cannot tell.
    """

    def track(self, watcher_id: str) -> int | None:
        """Consider the watcher for a lease; its fencing token when this replica holds it now."""
        ...

    async def untrack(self, watcher_id: str) -> None:
        """The watcher's runner is gone: stop considering it, release its lease if held."""
        ...

    async def holds(self, watcher_id: str, token: int) -> bool:
        """The fencing check: does this replica still hold the lease with ``token``?"""
        ...

    async def announce(self, watcher_id: str, change: dict[str, Any]) -> None:
        """Tell the lease holder about a change made here (its ``changed_elsewhere`` applies it)."""
        ...


@dataclass(frozen=True)
class ReloadReport:
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


class WatcherManager:
    """The set of running watchers."""

    def __init__(self, deps: RunnerDeps, ownership: Ownership | None = None) -> None:
        self._deps = deps
        self._ownership = ownership
        self._runners: dict[str, WatcherRunner] = {}
        self.tally = StatusTally()  # the runners by status state, kept as they change (/metrics)
        self._api_defined: set[str] = set()
        self._lock = asyncio.Lock()
        self._ping_keys = PingKeys()  # heartbeat watchers by ping key (SPEC §23)
        self._took_leases = False  # the first leases taken are this replica's start (frozen)

    # -- start / stop / reload ---------------------------------------------------------------

    async def start(
        self, watchers: Sequence[LoadedWatcher], api_watchers: Sequence[LoadedWatcher] = ()
    ) -> None:
        """Start every watcher (file-defined and API-created), making up missed runs (misfire).

        Each runner reads its stored state as its slice starts (``_launch``). In cluster mode no
        lease is held yet: a runner that needs one is built (and tracked, in the order of first
        polls) now and started, with the state read then, by ``leases_acquired``;
        ``restore_idle_states`` reads the others' states later.
        """
        self._api_defined = {w.spec.id for w in api_watchers}
        every = [*watchers, *api_watchers]
        async with self._lock:
            if self._ownership is None:
                await self._launch(every, self._runnable, initial=True, freeze=True)
            else:  # tracked in the order of their first polls: the lease keeper takes those first
                order = start_order(self._deps.clock.now())
                every.sort(key=lambda loaded: order(loaded.spec))
                runnable = [r for r in map(self._runnable, every) if r is not None]
                await self._launch(runnable, _same, initial=True, freeze=True)
        log.info("started %d watcher(s)", len(self._runners))

    async def start_streamed(
        self,
        chunks: Iterable[Sequence[LoadedWatcher]],
        then: Callable[[list[LoadedWatcher]], Sequence[LoadedWatcher]],
    ) -> None:
        """``start`` of file-defined watchers that come a chunk at a time, soonest to poll first
        (``config.loader.load_streamed``), without an ownership: each chunk is started before the
        next is read, all from one base time, so one whose phase passed while earlier chunks
        were started runs at once. ``then`` is given every watcher once all were read and
        answers the API-created ones, started last."""
        base = self._deps.clock.now()
        loaded: list[LoadedWatcher] = []
        async with self._lock:
            for chunk in chunks:
                loaded.extend(chunk)
                await self._launch(chunk, self._runnable, initial=True, freeze=True, base=base)
            api_watchers = then(loaded)
            self._api_defined = {w.spec.id for w in api_watchers}
            await self._launch(api_watchers, self._runnable, initial=True, freeze=True, base=base)
        log.info("started %d watcher(s)", len(self._runners))

    def _runnable(self, loaded: LoadedWatcher) -> WatcherRunner | None:
        """The registered runner of ``loaded``, if it may start here (its state is read by ``_launch``)."""
        runner = self._build(loaded, None)
        return runner if self._may_run(runner) else None

    async def restore_idle_states(self) -> None:
        """Cluster mode, after the first leases were taken: the runners another replica runs take
        their stored states, a slice at a time, for their status (docs/scaling.md: such a watcher
        shows the state this replica last read). One that took its lease meanwhile read its own.
        A slice that cannot be read (Redis slow, or this replica short of CPU) is logged, once for
        all, and skipped: statuses are not worth failing a start for."""
        leased = [r for r in self._runners.values() if r.needs_lease]
        await asyncio.sleep(0)  # the keeper's callback for the leases just taken fences their runners first
        unread: list[str] = []
        failure: StoreError | None = None
        for begin in range(0, len(leased), START_SLICE):
            part = [r for r in leased[begin : begin + START_SLICE] if r.fence is None]
            if not part:
                continue
            try:
                stored = await self._deps.store.get_watcher_states([r.id for r in part])
            except StoreError as exc:  # only statuses: the start goes on (a lease taken reads its own)
                unread += [r.id for r in part]
                failure = exc
                continue
            for runner in part:
                if runner.fence is None and not runner.running:
                    runner.state = WatcherState.from_json(stored.get(runner.id))
        if failure is not None:
            log.warning(
                "could not read the stored states of %d watcher(s) other replicas run (%s); their "
                "status here shows no state until this replica takes their lease: %s",
                len(unread),
                ", ".join(sorted(unread)[:10]) + (", …" if len(unread) > 10 else ""),
                failure,
            )

    async def stop(self) -> None:
        """Stop every runner; in-flight polls finish first. (A replica's runners stopped already
        as its leases were given back: a task each for tens of thousands that return at once
        was a tenth of such a stop.)"""
        async with self._lock:
            await asyncio.gather(*(runner.stop() for runner in self._runners.values() if runner.running))

    async def apply(self, watchers: Sequence[LoadedWatcher]) -> ReloadReport:
        """Make the file-defined watchers match ``watchers`` (API-created ones are kept)."""
        report = ReloadReport()
        wanted = {w.spec.id: w for w in watchers}
        async with self._lock:
            removed = [i for i in self._runners if i not in wanted and i not in self._api_defined]
            for done, watcher_id in enumerate(removed, 1):
                await self._remove(watcher_id)
                report.removed.append(watcher_id)
                await _yield_every(done)
            for done, (watcher_id, loaded) in enumerate(wanted.items(), 1):
                await _yield_every(done)
                current = self._runners.get(watcher_id)
                if current is None:
                    await self._add(loaded)
                    report.added.append(watcher_id)
                elif not current.loaded.same_data(loaded):
                    await self._remove(watcher_id, forget=False)
                    await self._add(loaded)
                    report.changed.append(watcher_id)
        return report

    async def _add(self, loaded: LoadedWatcher) -> None:
        """Create the runner of a new or changed watcher from its stored state and start it
        (unless another replica holds its lease)."""
        runner = self._build(loaded, await get_watcher_state(self._deps.store, loaded.spec.id))
        if self._may_run(runner):
            await runner.start()

    def _build(self, loaded: LoadedWatcher, stored: dict[str, Any] | None) -> WatcherRunner:
        """The runner of ``loaded`` with its ``stored`` state, registered (and, in cluster mode,
        tracked for a lease, fenced when this replica holds it already); not started."""
        watcher_id = loaded.spec.id
        runner = WatcherRunner(loaded, WatcherState.from_json(stored), self._deps)
        replaced = self._runners.get(watcher_id)
        if replaced is not None:
            replaced.counted(None)
        self._runners[watcher_id] = runner
        runner.counted(self.tally)
        if isinstance(loaded.spec, HeartbeatWatcher):
            self._ping_keys.add(watcher_id, loaded.spec.ping_key.get_secret_value())
        if self._ownership is not None and not isinstance(loaded.spec, WebhookWatcher):
            runner.needs_lease = True
            token = self._ownership.track(watcher_id)
            if token is not None:
                runner.fence = partial(self._ownership.holds, watcher_id, token)
        return runner

    @staticmethod
    def _may_run(runner: WatcherRunner) -> bool:
        """False while another replica holds the lease (``lease_acquired`` starts it here later)."""
        return not runner.needs_lease or runner.fence is not None

    async def _launch(
        self,
        items: Sequence[_S],
        runner_of: Callable[[_S], WatcherRunner | None],
        *,
        initial: bool,
        freeze: bool,
        base: datetime | None = None,
    ) -> None:
        """Start the runner ``runner_of`` gives for each item (None: none to start here), in the
        order of their first runs from one ``base`` (default: now), a slice at a time, yielding
        between slices (see the module docstring); ``initial``: at the service's start, so a run
        missed while it was down is made up (misfire); ``freeze``: at a start, each slice's
        survivors frozen (``heap.freeze_young``).

        Runners are built, and take their stored states and the last observations of the polled
        and subscribed ones (one store call each), a slice at a time: the first slice is small,
        so the polls due first go out before thousands of runners have been built or states read
        (each runner is its watcher's only writer; a lease just taken was read after it was
        taken, so what the previous holder wrote is in; a webhook watcher's first event reads its
        last observation instead, as replicas may share one). ``start`` takes the manager's lock
        first, so no reload or API change sees a half-started set.
        """
        base = base or self._deps.clock.now()
        order = start_order(base)
        ordered = sorted(items, key=lambda item: order(item.spec))
        scheduler = self._deps.scheduler
        begin, size = 0, FIRST_SLICE
        while begin < len(ordered):
            runners = [r for r in map(runner_of, ordered[begin : begin + size]) if r is not None]
            begin, size = begin + size, START_SLICE
            if runners:
                stored = await self._deps.store.get_watcher_states([r.id for r in runners])
                for runner in runners:
                    runner.state = WatcherState.from_json(stored.get(runner.id))
            observing = [r.id for r in runners if not isinstance(r.spec, WebhookWatcher)]
            last = await self._deps.store.last_observations(observing) if observing else {}
            paused = scheduler.state == STATE_RUNNING
            if paused:
                scheduler.pause()  # one wake-up per slice, not one per job
            try:
                for runner in runners:
                    spec = runner.spec
                    observed = last.get(runner.id)
                    previous = observed.value if observed is not None else MISSING
                    await runner.start(
                        run_missed=initial and _missed(spec, runner.state, self._deps),
                        base=base,
                        previous=UNKNOWN if isinstance(spec, WebhookWatcher) else previous,
                    )
            finally:
                if paused:
                    scheduler.resume()
            if freeze:
                freeze_young()  # the slice's runners out of later collections' way (heap.freeze_young)
            await asyncio.sleep(0)  # let the polls now due go out

    async def _remove(self, watcher_id: str, *, forget: bool = True) -> None:
        runner = self._runners.pop(watcher_id, None)
        self._ping_keys.remove(watcher_id)
        if runner is not None:
            runner.counted(None)
            await runner.stop()
            if self._ownership is not None and runner.needs_lease:
                await self._ownership.untrack(watcher_id)  # a changed one is tracked again by _add
        if forget:
            self._deps.metrics.forget(watcher_id)

    # -- cluster mode: the ownership's lease callbacks ---------------------------------------------

    async def lease_acquired(self, watcher_id: str, token: int) -> None:
        """This replica now holds the watcher's lease: start its runner from the stored state."""
        await self.leases_acquired({watcher_id: token})

    async def leases_acquired(self, tokens: Mapping[str, int]) -> None:
        """This replica now holds these leases (watcher id → fencing token): start their runners
        from the stored states (the previous holder may have written since this replica read
        them), read a slice at a time as ``start`` reads last observations."""
        if self._ownership is None:
            return
        async with self._lock:
            starting: list[WatcherRunner] = []
            for watcher_id, token in tokens.items():
                runner = self._runners.get(watcher_id)
                if runner is None or not runner.needs_lease:
                    continue
                runner.fence = partial(self._ownership.holds, watcher_id, token)
                if not runner.running:
                    starting.append(runner)
            if starting:
                # Only the first take is a start: a freeze later would keep every object alive
                # then (a request's, a cycle about to be garbage) for good, lease after lease.
                freeze, self._took_leases = not self._took_leases, True
                await self._launch(starting, _same, initial=True, freeze=freeze)

    async def lease_lost(self, watcher_id: str) -> None:
        """The lease is gone or going (handed off, expired, taken, a graceful stop): stop the runner.

        The fence stays until the runner stopped, so an in-flight poll is judged by it: during a
        hand-off or a graceful stop the lease is released only after this returns, so that poll
        is acted on; a lease really lost fails the check and its observation is dropped.
        """
        runner = self._runners.get(watcher_id)
        if runner is not None and runner.needs_lease:
            await runner.stop()
            runner.fence = None

    # -- queries -----------------------------------------------------------------------------

    def runners(self) -> Iterable[WatcherRunner]:
        return self._runners.values()

    def count(self) -> int:
        """How many runners there are (file-defined and API-created watchers)."""
        return len(self._runners)

    def get(self, watcher_id: str) -> WatcherRunner:
        runner = self._runners.get(watcher_id)
        if runner is None:
            raise NotFound(f"watcher {watcher_id!r} not found")
        return runner

    def status(self, runner: WatcherRunner) -> dict[str, Any]:
        spec = runner.spec
        status = status_json(
            runner.state, declared_enabled=spec.enabled, running=runner.running, lasting=lasting(spec)
        )
        if isinstance(spec, HeartbeatWatcher):
            status.update(beat_status(spec, runner.state, self._deps.clock.now()))
        return status

    def status_counts(self, *, trouble: bool) -> tuple[dict[str, int], list[str] | None]:
        """The runners by status state and, with ``trouble``, the ids of those failing or
        firing (what /metrics exports per watcher above its limit), sorted; read from the tally
        the runners keep (``watchers.tally``), not by walking them."""
        return self.tally.snapshot(), sorted(self.tally.trouble) if trouble else None

    def api_watchers(self) -> list[LoadedWatcher]:
        """The watchers created through the API, as loaded."""
        return [self._runners[i].loaded for i in sorted(self._api_defined) if i in self._runners]

    def is_api_defined(self, watcher_id: str) -> bool:
        return watcher_id in self._api_defined

    # -- changes through the API -------------------------------------------------------------

    async def set_enabled(self, watcher_id: str, enabled: bool) -> WatcherRunner:
        runner = self.get(watcher_id)
        elsewhere = await self._refresh_if_elsewhere(runner)
        await runner.set_enabled(enabled)  # stores it; starts or stops nothing without the lease
        if elsewhere and self._ownership is not None:
            await self._ownership.announce(watcher_id, {"enabled": enabled})
        return runner

    async def fire(self, watcher_id: str, payload: Any) -> Outcome:
        runner = self.get(watcher_id)
        elsewhere = await self._refresh_if_elsewhere(runner)
        outcome = await runner.fire_manual(payload)
        accepted = outcome.contract is not None and outcome.contract.state == "pending"
        if elsewhere and accepted and self._ownership is not None:
            await self._ownership.announce(watcher_id, {"fired": True})
        return outcome

    async def _refresh_if_elsewhere(self, runner: WatcherRunner) -> bool:
        """Cluster mode, lease not held here: load the stored state to change (True), as ours is stale."""
        if self._ownership is None or not runner.needs_lease or runner.fence is not None:
            return False
        runner.state = WatcherState.from_json(await get_watcher_state(self._deps.store, runner.id))
        return True

    async def changed_elsewhere(self, watcher_id: str, change: dict[str, Any]) -> None:
        """Another replica's API changed a watcher whose lease this replica holds: apply it."""
        runner = self._runners.get(watcher_id)
        if runner is None or not runner.needs_lease or runner.fence is None:
            return  # not held here: whoever acquires the lease reads the stored state
        if isinstance(change.get("enabled"), bool):
            await runner.set_enabled(change["enabled"])
        if change.get("fired") is True:
            at = self._deps.clock.now()
            await runner.adopt(lambda state: state.evolve(fires=state.fires + 1, last_fire_at=at))

    async def ingest(self, watcher_id: str, value: Any) -> Outcome:
        return await self.get(watcher_id).ingest(value)

    def by_ping_key(self, key: str) -> WatcherRunner | None:
        """The heartbeat watcher pinged with ``key`` (the same work for an unknown key)."""
        watcher_id = self._ping_keys.find(key)
        return self._runners.get(watcher_id) if watcher_id is not None else None

    async def ingest_alerts(self, watcher_id: str, alerts: list[dict[str, Any]]) -> list[Outcome]:
        return await self.get(watcher_id).ingest_alerts(alerts)

    async def create(self, loaded: LoadedWatcher) -> WatcherRunner:
        """Add an API-created watcher and keep its definition in the store."""
        watcher_id = loaded.spec.id
        async with self._lock:
            if watcher_id in self._runners:
                raise Conflict(f"watcher {watcher_id!r} already exists")
            spec = loaded.spec
            taken = (
                self._ping_keys.find(spec.ping_key.get_secret_value())
                if isinstance(spec, HeartbeatWatcher)
                else None
            )
            if taken is not None:
                raise Conflict(
                    f"heartbeat watcher {watcher_id!r} has the same pingKey as watcher {taken!r}; "
                    "give each its own (a ping could not tell them apart)"
                )
            await put_watcher_state(
                self._deps.store, API_DEFINITION_PREFIX + watcher_id, {"definition": loaded.raw}
            )
            self._api_defined.add(watcher_id)
            await self._add(loaded)
            return self._runners[watcher_id]

    async def delete(self, watcher_id: str) -> None:
        """Remove an API-created watcher; file-defined ones are removed by editing their file."""
        runner = self.get(watcher_id)
        if watcher_id not in self._api_defined:
            raise Conflict(
                f"watcher {watcher_id!r} is defined in {runner.loaded.source.file}; "
                "remove it there and reload (SIGHUP), or disable it"
            )
        async with self._lock:
            await self._remove(watcher_id)
            self._api_defined.discard(watcher_id)
            forget = {API_DEFINITION_PREFIX + watcher_id: None, watcher_id: None}
            await self._deps.store.write_watcher_batch([], forget)


async def _yield_every(done: int) -> None:
    """Let the event loop run (polls, the API) after every APPLY_SLICE items of a long loop."""
    if done % APPLY_SLICE == 0:
        await asyncio.sleep(0)


def _same(runner: WatcherRunner) -> WatcherRunner:
    return runner


def _missed(spec: Any, state: WatcherState, deps: RunnerDeps) -> bool:
    return isinstance(spec, Scheduled) and missed_run(spec, state.next_check_at, deps.clock.now())


def api_source(watcher_id: str) -> WatcherSource:
    """Where an API-created watcher is said to come from."""
    return WatcherSource(f"{API_SOURCE_PREFIX}{watcher_id}", None)
