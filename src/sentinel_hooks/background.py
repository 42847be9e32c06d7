"""The background loop of a long-running part (relay, outbox, approval sweep, pruner, cluster loops).

Each such part runs one loop task between its ``start`` and ``stop``. ``BackgroundTask`` holds
it: started at most once, and stopped by cancelling it and waiting until it has ended, so
nothing the loop does outlives ``stop``. ``cancel_and_wait`` does the stopping for a task a part
keeps on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel ``task`` (None: nothing to do) and wait until it has ended; its cancellation ends here."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class BackgroundTask:
    """At most one task running a part's loop."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self, loop: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``loop()`` in a task of the running event loop, unless one runs already."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(loop())

    async def stop(self) -> None:
        """Cancel the task and wait until it has ended; ``start`` may run a new one after."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
