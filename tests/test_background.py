"""``BackgroundTask``: a part's loop runs once between start and stop, and ends within stop."""

from __future__ import annotations

import asyncio

from sentinel_hooks.background import BackgroundTask, cancel_and_wait
from tests.support import wait_for


class Loop:
    """A loop that counts its starts and says when it was cancelled."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = False

    async def run(self) -> None:
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def test_a_second_start_runs_no_second_loop() -> None:
    """start while the loop runs leaves it alone."""
    loop, task = Loop(), BackgroundTask()
    task.start(loop.run)
    task.start(loop.run)
    await wait_for(lambda: loop.started > 0, what="the loop to start")
    await task.stop()
    assert (1, True) == (loop.started, loop.cancelled)


async def test_stop_returns_once_the_loop_has_ended() -> None:
    """After stop the loop has seen its cancellation and nothing runs; start may run it again."""
    loop, task = Loop(), BackgroundTask()
    task.start(loop.run)
    await wait_for(lambda: loop.started > 0, what="the loop to start")
    await task.stop()
    assert (True, False) == (loop.cancelled, task.running)
    task.start(loop.run)
    assert task.running
    await task.stop()


async def test_stop_without_start_and_a_missing_task_are_fine() -> None:
    """Nothing started: stop and cancel_and_wait(None) do nothing."""
    task = BackgroundTask()
    await task.stop()
    await cancel_and_wait(None)
    assert not task.running
