"""Store calls made in one turn of the event loop, run as one batch (issue 30).

The alerts of one Alertmanager notification are judged together: their fires' store steps are all
made before any of them is awaited. ``TurnBatches`` gathers the calls of one kind made in that
turn and runs them as one batch — one SQLite transaction, one pipelined Redis round trip — and
answers each caller with its own result or error, as if it had run alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

I = TypeVar("I")  # noqa: E741  (an item, as in the typing docs' examples)
R = TypeVar("R")

RunBatch = Callable[[list[I]], Awaitable[Sequence[R | BaseException]]]
"""Run the items in order; each one's result or its error (an error raised fails them all)."""


class TurnBatches(Generic[I, R]):
    """Runs the items added in one turn of the event loop together with ``run``."""

    def __init__(self, run: RunBatch[I, R]) -> None:
        self._run = run
        self._waiting: list[tuple[I, asyncio.Future[R]]] = []
        self._running: set[asyncio.Task[None]] = set()  # batches on their way (kept from the GC)

    async def __call__(self, item: I) -> R:
        """``item``'s result once its batch ran (its error raised)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        if not self._waiting:
            loop.call_soon(self._start)
        self._waiting.append((item, future))
        return await future

    def _start(self) -> None:
        batch, self._waiting = self._waiting, []
        if batch:
            task = asyncio.ensure_future(self._answer(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _answer(self, batch: list[tuple[I, asyncio.Future[R]]]) -> None:
        try:
            results = await self._run([item for item, _ in batch])
        except asyncio.CancelledError:
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:  # the batch failed as a whole: every caller hears it
            results = [exc] * len(batch)
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():  # its caller gave up
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
