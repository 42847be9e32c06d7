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

Starting many watchers must not make a herd: ``start`` builds every runner first, then takes
one base time and schedules them all with the scheduler paused, so each watcher's first poll
is at its own phase of its interval after that base (``schedule.first_run``) and none is due
merely because adding the others took time. ``apply`` (a reload) handles the diff in slices
that yield to the event loop, so running watchers keep polling while thousands are replaced.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from apscheduler.schedulers.base import STATE_RUNNING

from sentinel_hooks.config.loader import LoadedWatcher, WatcherSource
from sentinel_hooks.config.watcher import Scheduled, WebhookWatcher
from sentinel_hooks.errors import Conflict, NotFound
from sentinel_hooks.store.shortcuts import put_watcher_state
from sentinel_hooks.watchers.pipeline import Outcome
from sentinel_hooks.watchers.runner import RunnerDeps, WatcherRunner
from sentinel_hooks.watchers.schedule import missed_run
from sentinel_hooks.watchers.state import StatusState, WatcherState, status_json, status_state

log = logging.getLogger(__name__)

API_DEFINITION_PREFIX = "api-definition:"  # watcher ids cannot contain ':' so these never collide
APPLY_SLICE = 200  # watchers added/changed/removed by a reload between two yields to the event loop


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
        self._api_defined: set[str] = set()
        self._states: dict[str, dict[str, Any]] = {}
        self._lock = asyncio.Lock()

    # -- start / stop / reload ---------------------------------------------------------------

    async def start(
        self, watchers: Sequence[LoadedWatcher], api_watchers: Sequence[LoadedWatcher] = ()
    ) -> None:
        """Start every watcher (file-defined and API-created), making up missed runs (misfire)."""
        self._states = await self._deps.store.list_watcher_states()
        self._api_defined = {w.spec.id for w in api_watchers}
        async with self._lock:
            ready = [
                await self._add(loaded, initial=True, start=False) for loaded in [*watchers, *api_watchers]
            ]
            scheduler = self._deps.scheduler
            paused = scheduler.state == STATE_RUNNING
            if paused:
                scheduler.pause()  # one wake-up after all adds, not one per add
            try:
                base = self._deps.clock.now()
                started = [runner for runner, _ in ready if runner is not None]
                for runner, run_missed in ready:
                    if runner is not None:
                        await runner.start(run_missed=run_missed, base=base)
                now = self._deps.clock.now()
                for runner in started:  # starting 10,000 takes seconds: no herd at resume
                    runner.defer_passed_first_run(now)
            finally:
                if paused:
                    scheduler.resume()
        log.info("started %d watcher(s)", len(self._runners))

    async def stop(self) -> None:
        """Stop every runner; in-flight polls finish first."""
        async with self._lock:
            await asyncio.gather(*(runner.stop() for runner in self._runners.values()))

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
                    await self._add(loaded, initial=False)
                    report.added.append(watcher_id)
                elif current.loaded.raw != loaded.raw:
                    await self._remove(watcher_id, forget=False)
                    await self._add(loaded, initial=False)
                    report.changed.append(watcher_id)
        return report

    async def _add(
        self, loaded: LoadedWatcher, *, initial: bool, start: bool = True
    ) -> tuple[WatcherRunner | None, bool]:
        """Create the runner; start it now (``start``) or return it with its ``run_missed`` for
        the caller to start (None when another replica holds its lease)."""
        watcher_id = loaded.spec.id
        stored = (
            self._states.pop(watcher_id, None)
            if initial
            else await self._deps.store.get_watcher_state(watcher_id)
        )
        state = WatcherState.from_json(stored)
        runner = WatcherRunner(loaded, state, self._deps)
        self._runners[watcher_id] = runner
        spec = loaded.spec
        if self._ownership is not None and not isinstance(spec, WebhookWatcher):
            runner.needs_lease = True
            token = self._ownership.track(watcher_id)
            if token is None:
                return None, False  # started by lease_acquired, on whichever replica gets the lease
            runner.fence = partial(self._ownership.holds, watcher_id, token)
        run_missed = initial and _missed(spec, state, self._deps)
        if not start:
            return runner, run_missed
        await runner.start(run_missed=run_missed)
        return runner, run_missed

    async def _remove(self, watcher_id: str, *, forget: bool = True) -> None:
        runner = self._runners.pop(watcher_id, None)
        if runner is not None:
            await runner.stop()
            if self._ownership is not None and runner.needs_lease:
                await self._ownership.untrack(watcher_id)  # a changed one is tracked again by _add
        if forget:
            self._deps.metrics.forget(watcher_id)

    # -- cluster mode: the ownership's lease callbacks ---------------------------------------------

    async def lease_acquired(self, watcher_id: str, token: int) -> None:
        """This replica now holds the watcher's lease: start its runner from the stored state."""
        if self._ownership is None:
            return
        async with self._lock:
            runner = self._runners.get(watcher_id)
            if runner is None or not runner.needs_lease:
                return
            runner.fence = partial(self._ownership.holds, watcher_id, token)
            if runner.running:
                return
            runner.state = WatcherState.from_json(await self._deps.store.get_watcher_state(watcher_id))
            await runner.start(run_missed=_missed(runner.spec, runner.state, self._deps))

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

    def get(self, watcher_id: str) -> WatcherRunner:
        runner = self._runners.get(watcher_id)
        if runner is None:
            raise NotFound(f"watcher {watcher_id!r} not found")
        return runner

    def status(self, runner: WatcherRunner) -> dict[str, Any]:
        return status_json(runner.state, declared_enabled=runner.spec.enabled, running=runner.running)

    def status_state(self, runner: WatcherRunner) -> StatusState:
        """Only the status's ``state`` (no instants formatted): what /metrics counts."""
        return status_state(runner.state, declared_enabled=runner.spec.enabled, running=runner.running)

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
        runner.state = WatcherState.from_json(await self._deps.store.get_watcher_state(runner.id))
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

    async def ingest_alerts(self, watcher_id: str, alerts: list[dict[str, Any]]) -> list[Outcome]:
        return await self.get(watcher_id).ingest_alerts(alerts)

    async def create(self, loaded: LoadedWatcher) -> WatcherRunner:
        """Add an API-created watcher and keep its definition in the store."""
        watcher_id = loaded.spec.id
        async with self._lock:
            if watcher_id in self._runners:
                raise Conflict(f"watcher {watcher_id!r} already exists")
            await put_watcher_state(
                self._deps.store, API_DEFINITION_PREFIX + watcher_id, {"definition": loaded.raw}
            )
            self._api_defined.add(watcher_id)
            await self._add(loaded, initial=False)
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


def _missed(spec: Any, state: WatcherState, deps: RunnerDeps) -> bool:
    return isinstance(spec, Scheduled) and missed_run(spec, state.next_check_at, deps.clock.now())


def api_source(watcher_id: str) -> WatcherSource:
    """Where an API-created watcher is said to come from."""
    return WatcherSource(f"api:{watcher_id}", None)
