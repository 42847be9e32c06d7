"""The ``local`` hook-session queue: in this process's memory, one worker task per busy session key.

Callbacks of one session key run one at a time in arrival order; different keys run in
parallel up to ``hookConcurrency`` (a group's session waits out its ``waitMs`` before it takes
a slot). A submitted callback waits with the envelope it was handed,
so its session does not read it back from the store. Nothing here survives a restart, and
nothing needs to: ``resume`` finds the open contracts in the store and queues them again
(``SessionQueue``); their sessions read their envelopes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from datetime import timedelta

from sentinel_hooks.callbacks.queues.base import (
    QueueContext,
    QueueRoles,
    Runs,
    run_counted,
    sessions_to_resume,
)
from sentinel_hooks.clock import Clock
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.events import Events
from sentinel_hooks.store.records import Contract


class LocalSessionQueue:
    """The hook-session queue of one process: ordered per session key, parallel across keys."""

    def __init__(
        self,
        runner: Runs,
        *,
        store: QueueRoles,
        concurrency: int,
        events: Events | None = None,
        clock: Clock | None = None,
        resume_window_ms: int = 0,
    ) -> None:
        """``clock`` and ``resume_window_ms``: a restart also resumes sessions still investigating
        after their page, of contracts created that long ago at most (none without a clock)."""
        self._clock = clock
        self._resume_window = timedelta(milliseconds=resume_window_ms)
        self._events = events
        self._runner = runner
        self._store = store
        self._limit = asyncio.Semaphore(concurrency)
        self._queues: dict[str, deque[tuple[Contract, Envelope | None]]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self.finished: dict[str, str] = {}

    async def submit(self, envelope: Envelope, contract: Contract) -> None:
        self.enqueue(contract, envelope)

    async def requeue(self, contract: Contract) -> None:
        """Queue ``contract``'s session again (an approval was decided)."""
        self.enqueue(contract)

    def enqueue(self, contract: Contract, envelope: Envelope | None = None) -> None:
        """Queue ``contract``'s session, with its ``envelope`` when the caller holds it."""
        queue = self._queues.setdefault(contract.session_key, deque())
        queue.append((contract, envelope))
        if contract.session_key not in self._workers:
            task = asyncio.get_running_loop().create_task(self._work(contract.session_key))
            self._workers[contract.session_key] = task

    async def _work(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:
                contract, envelope = queue.popleft()
                await self._runner.wait_to_start(contract, envelope)  # holding no slot
                async with self._limit:
                    status = await run_counted(self._runner, contract, self._events, envelope=envelope)
                    self.finished[contract.callback_id] = status
        finally:
            self._workers.pop(key, None)
            if not queue:
                self._queues.pop(key, None)

    async def resume(self) -> int:
        """After a restart: queue every callback whose session had not finished (``sessions_to_resume``)."""
        since = None if self._clock is None else self._clock.now() - self._resume_window
        contracts = await sessions_to_resume(self._store, settled_since=since)
        for contract in contracts:
            self.enqueue(contract)
        return len(contracts)

    async def stop(self) -> None:
        for task in list(self._workers.values()):
            task.cancel()
        for task in list(self._workers.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._workers.clear()


def create(runner: Runs, context: QueueContext) -> LocalSessionQueue:
    """The ``local`` queue (``context.stream`` is not used)."""
    return LocalSessionQueue(
        runner,
        store=context.store,
        concurrency=context.concurrency,
        events=context.events,
        clock=context.clock,
        resume_window_ms=context.resume_window_ms,
    )
