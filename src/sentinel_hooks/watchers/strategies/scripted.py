"""Scripted strategies: a source that tests feed, one of each kind (STYLE habit 2).

``ScriptedPoll`` is a ``PollStrategy`` and ``ScriptedSubscription`` a ``SubscribeStrategy``; a
test feeds either with values (each observed at the clock's time, in order) and ``ObserveError``s
(raised where the source would fail). With nothing fed, a call waits for the next step, as a
long-poll or an idle subscription does; ``waiting`` counts such calls. An error fed to a
subscription ends its ``stream()``, and the next ``stream()`` goes on with the steps after it,
as a reconnect would. They are not a watcher ``strategy:``: tests build them directly, to drive
the runner without a server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from sentinel_hooks.clock import Clock, SystemClock
from sentinel_hooks.watchers.strategy import Observed, ObserveError


class _Scripted:
    """The steps fed so far and not yet taken, and how many calls wait for one."""

    def __init__(self, *steps: Any, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._steps: asyncio.Queue[Any] = asyncio.Queue()
        self.waiting = 0  # calls waiting for a step now
        self.closed = False
        self.feed(*steps)

    def feed(self, *steps: Any) -> None:
        """Add values to observe, or ``ObserveError``s to raise, in order."""
        for step in steps:
            self._steps.put_nowait(step)

    async def close(self) -> None:
        self.closed = True

    async def _next(self) -> Observed:
        """The next step as an observation; an ``ObserveError`` step is raised."""
        self.waiting += 1
        try:
            step = await self._steps.get()
        finally:
            self.waiting -= 1
        if isinstance(step, ObserveError):
            raise step
        return Observed(value=step, at=self._clock.now())


class ScriptedPoll(_Scripted):
    """``poll()`` takes the next step fed (waiting for one when there is none)."""

    async def poll(self) -> Observed:
        return await self._next()


class ScriptedSubscription(_Scripted):
    """``stream()`` yields the steps fed, until an ``ObserveError`` step ends it."""

    async def stream(self) -> AsyncIterator[Observed]:
        while True:
            yield await self._next()
