"""A watcher's quiet watch (``expectEventWithinMs``): a dead-man's switch for pushed and
subscribed watchers.

When no event arrived within the window since the last one (or since the start), the runner
fires the ``no_progress`` trigger (``WatcherRunner.fire_quiet``), once per quiet period: the
watch then waits for the next event, which ends the period. A fire that could not be made (the
lease not confirmed, the store away) is tried again a second later.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from sentinel_hooks.watchers.retries import Stopping

if TYPE_CHECKING:
    from sentinel_hooks.watchers.runner import WatcherRunner


class QuietWatch:
    """The quiet watch of one runner (created at its first start, kept across restarts)."""

    __slots__ = ("_runner", "_seen")

    def __init__(self, runner: WatcherRunner) -> None:
        self._runner = runner
        self._seen = asyncio.Event()  # set per observation; the watch waits on it

    def seen(self) -> None:
        """An event arrived (the runner calls it after each observation it stored)."""
        self._seen.set()

    async def run(self) -> None:
        """Watch until the runner stops (a task of the runner's)."""
        runner = self._runner
        window_s = (runner.spec.expect_event_within_ms or 0) / 1000
        started_at = runner.deps.clock.now()
        seen = self._seen
        while not runner.stopping:
            last = runner.state.last_event_at or started_at
            remaining = window_s - (runner.deps.clock.now() - last).total_seconds()
            seen.clear()
            if remaining > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(seen.wait(), timeout=remaining)
                continue
            if runner.state.quiet_fired:
                await seen.wait()
                continue
            if not await runner.fire_quiet():
                with contextlib.suppress(Stopping):
                    await runner.sleep(1.0)
