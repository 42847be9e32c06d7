"""Pushes to one webhook watcher that queue behind its lock, taken as one batch (issue 30).

A ``format: json`` webhook watcher judges its pushes one at a time under its runner's lock, and
each push's observation and state are a store write a client waits on for its 202. Pushes that
arrive while the lock is held would each take it in turn, a write apiece; instead they wait in
``PushBatches`` and whoever gets the lock next takes all of them: judged in order, stored in one
write (``WatcherRunner._judge_pushes``), each answered with its own outcome or error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from sentinel_hooks.errors import StoreError
from sentinel_hooks.watchers.pipeline import Outcome
from sentinel_hooks.watchers.strategy import Observed

Judge = Callable[[list[Observed]], Awaitable[list[Outcome | StoreError]]]
"""Judge and store a batch of pushes (the lock held); each one's outcome, or its store error."""


class PushBatches:
    """The pushes of one watcher waiting for its lock."""

    def __init__(self) -> None:
        self._waiting: list[tuple[Observed, asyncio.Future[Outcome]]] = []

    async def push(self, observed: Observed, lock: asyncio.Lock, judge: Judge) -> Outcome:
        """``observed``'s outcome once it and the pushes batched with it are stored (or its
        ``StoreError``)."""
        pushed: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting.append((observed, pushed))
        async with lock:
            if not pushed.done():
                await self._take(judge)
        return await pushed

    async def _take(self, judge: Judge) -> None:
        batch, self._waiting = self._waiting, []
        try:
            results = await judge([observed for observed, _ in batch])
            for (_, pushed), result in zip(batch, results, strict=True):
                if isinstance(result, StoreError):
                    pushed.set_exception(result)
                else:
                    pushed.set_result(result)
        finally:  # cancelled, or a bug: no caller waits for ever
            for _, pushed in batch:
                if not pushed.done():
                    pushed.cancel()
