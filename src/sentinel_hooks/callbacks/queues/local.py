"""The ``local`` hook-session queue: in this process's memory, one worker task per busy session key.

Callbacks of one session key run one at a time in arrival order; different keys run in
parallel up to ``hookConcurrency``. A submitted callback waits with the envelope it was handed,
so its session does not read it back from the store. Nothing here survives a restart, and
nothing needs to: ``resume`` finds the open contracts in the store and queues them again
(``SessionQueue``); their sessions read their envelopes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

from sentinel_hooks.callbacks.queues.base import QueueContext, QueueRoles, Runs, open_contracts, run_counted
from sentinel_hooks.callbacks.sessions.progress import FINAL, progress_key
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.events import Events
from sentinel_hooks.store.records import Contract
from sentinel_hooks.store.shortcuts import get_checkpoint


class LocalSessionQueue:
    """The hook-session queue of one process: ordered per session key, parallel across keys."""

    def __init__(
        self, runner: Runs, *, store: QueueRoles, concurrency: int, events: Events | None = None
    ) -> None:
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
                async with self._limit:
                    status = await run_counted(self._runner, contract, self._events, envelope=envelope)
                    self.finished[contract.callback_id] = status
        finally:
            self._workers.pop(key, None)
            if not queue:
                self._queues.pop(key, None)

    async def resume(self) -> int:
        """After a restart: queue every pending callback whose session had not finished."""
        contracts = await open_contracts(self._store)
        resumed = 0
        for contract in sorted(contracts, key=lambda c: (c.created_at, c.callback_id)):
            progress = await get_checkpoint(self._store, progress_key(contract.callback_id)) or {}
            if progress.get("status") not in FINAL:
                self.enqueue(contract)
                resumed += 1
        return resumed

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
        runner, store=context.store, concurrency=context.concurrency, events=context.events
    )
