"""A heartbeat watcher's runner part (SPEC.md §23): its pings and its due-time watch.

``BeatWatch`` takes the pings the API routes to the runner (``ping``), waits for the next due
time or the next ping, and fires each missed period once (``overdue``), all under the runner's
lock; what a ping or a missed period does to the state is ``watchers.strategies.heartbeat``'s.

Cluster mode: the replica holding the lease watches the due time; a ping that reaches another
replica is recorded in the stored state there, and the holder adopts it (``refresh``) before it
fires, while a fire is open, and before it stores its state at a stop.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from sentinel_hooks.config.watcher import HeartbeatWatcher
from sentinel_hooks.errors import StoreError
from sentinel_hooks.store.shortcuts import put_watcher_state
from sentinel_hooks.watchers.pipeline import Outcome
from sentinel_hooks.watchers.retries import Stopping
from sentinel_hooks.watchers.strategies.heartbeat import (
    Ping,
    missed,
    next_due,
    on_overdue,
    on_ping,
    recheck_s,
    with_stored_pings,
)

if TYPE_CHECKING:
    from sentinel_hooks.watchers.runner import WatcherRunner


class BeatWatch:
    """The pings and due-time watch of one heartbeat runner (made once, kept across restarts)."""

    __slots__ = ("_pinged", "_runner")

    def __init__(self, runner: WatcherRunner) -> None:
        self._runner = runner
        self._pinged = asyncio.Event()  # a ping changed the state: compute the due time again

    @property
    def _spec(self) -> HeartbeatWatcher:
        spec = self._runner.spec
        assert isinstance(spec, HeartbeatWatcher)
        return spec

    async def ping(self, ping: Ping) -> Outcome:
        """A ping (SPEC §23), stored before it is answered."""
        runner, spec = self._runner, self._spec
        async with runner.lock:
            now = runner.deps.clock.now()
            if runner.needs_lease and runner.fence is None:  # another replica watches it: its stored state
                stored = with_stored_pings(runner.state, await runner.stored_state())
                outcome = await on_ping(runner.deps.pipeline, spec, stored, ping, now)
                await put_watcher_state(runner.deps.store, runner.id, outcome.state.to_json())
                runner.state = outcome.state
                return outcome
            outcome = await runner.take(on_ping(runner.deps.pipeline, spec, runner.state, ping, now))
        self._pinged.set()
        return outcome

    async def overdue(self, *, latest: bool = False) -> bool:
        """A due time passed: the ``no_progress`` fire of the first period missed (``latest``: of
        the last, standing for all, at a start after a downtime); False when it was not made (the
        lease not confirmed, or the store did not take it: on the status)."""
        runner, spec = self._runner, self._spec
        try:
            async with runner.lock:
                now = runner.deps.clock.now()
                if runner.needs_lease:  # a ping another replica took moves the due time
                    runner.state = with_stored_pings(runner.state, await runner.stored_state())
                    if missed(spec, runner.state, now, latest=latest) is None:
                        return True
                    if not await runner.fenced():
                        return False
                due = missed(spec, runner.state, now, latest=latest)
                if due is not None:
                    await runner.take(on_overdue(runner.deps.pipeline, spec, runner.state, due, now))
        except StoreError:
            return False
        return True

    async def refresh(self) -> None:
        """Cluster mode: adopt the pings another replica recorded (open fires it resolved)."""
        runner = self._runner
        with contextlib.suppress(StoreError):
            async with runner.lock:
                runner.state = with_stored_pings(runner.state, await runner.stored_state())

    async def before_stop(self) -> None:
        """Cluster mode: adopt the pings another replica took before the stop stores the state
        (so it is not stored over them)."""
        runner = self._runner
        if runner.needs_lease:
            runner.state = with_stored_pings(runner.state, await runner.stored_state())

    async def run(self) -> None:
        """Wait for each due time (or a ping) until the runner stops; fire when one passes."""
        runner, pinged, spec = self._runner, self._pinged, self._spec
        if runner.state.beat_at is None:  # the first period counts from the first start, kept
            now = runner.deps.clock.now()
            await runner.adopt(lambda state: state.evolve(beat_at=state.beat_at or now))
        started = True  # due times that passed while the service was down: one fire, the latest
        while not runner.stopping:
            pinged.clear()
            now = runner.deps.clock.now()
            remaining = (next_due(spec, runner.state, now).at - now).total_seconds()
            if runner.needs_lease and runner.state.beat_fires:  # a ping another replica took
                remaining = min(remaining, recheck_s(spec))  # resolves them: looked for now and then
            if remaining > 0:
                started = False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(pinged.wait(), timeout=remaining)
                if runner.needs_lease and runner.state.beat_fires and not pinged.is_set():
                    await self.refresh()
                continue
            if await self.overdue(latest=started):
                started = False
            else:
                with contextlib.suppress(Stopping):
                    await runner.sleep(1.0)
