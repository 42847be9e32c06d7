"""Recording attempt outcomes in the outbox in batches: one store write for many sends.

At hundreds of deliveries a second, one outcome write per send costs a store round trip
each (on SQLite a transaction on the single store thread). ``OutcomeWriter`` is a group commit:
outcomes that arrive while a write is in flight wait and go together in the next
``record_outcomes``. Each caller still awaits its own outcome's write and sees its error, so
a send is only reported recorded once it is. The contracts a batch moved (a notify's final
outcome) are handed to ``on_moved`` (the relay), before any waiter is released.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sentinel_hooks.store.base import OutboxStore
from sentinel_hooks.store.records import DeliveryOutcome, Recorded, check_outcome

log = logging.getLogger(__name__)

MAX_BATCH = 256


class OutcomeWriter:
    """Writes ``DeliveryOutcome``s to ``store``, batching those that arrive together."""

    def __init__(
        self,
        store: OutboxStore,
        *,
        max_batch: int = MAX_BATCH,
        on_moved: Callable[[Recorded], None] | None = None,
    ) -> None:
        self._store = store
        self._on_moved = on_moved
        self._max_batch = max_batch
        self._queue: list[tuple[DeliveryOutcome, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None

    async def record(self, outcome: DeliveryOutcome) -> None:
        """Return once ``outcome`` is stored; raise what the store raised for its batch.

        ``ValueError`` for an outcome no caller should pass, before it can spoil a batch.
        """
        check_outcome(outcome)
        loop = asyncio.get_running_loop()
        written: asyncio.Future[None] = loop.create_future()
        self._queue.append((outcome, written))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._drain())
        await written

    async def _drain(self) -> None:
        while self._queue:
            batch = self._queue[: self._max_batch]
            del self._queue[: self._max_batch]
            try:
                recorded = await self._store.record_outcomes([outcome for outcome, _ in batch])
            except Exception as exc:  # each waiter gets it (and decides whether to retry)
                for _, written in batch:
                    if not written.done():
                        written.set_exception(exc)
            else:
                if recorded.moved and self._on_moved is not None:
                    try:
                        self._on_moved(replace(recorded, watchers=_watchers(batch, recorded)))
                    except Exception:  # the outcomes are stored; a report must not undo that
                        log.exception("reporting moved contracts failed")
                for _, written in batch:
                    if not written.done():
                        written.set_result(None)


def _watchers(batch: Sequence[tuple[DeliveryOutcome, Any]], recorded: Recorded) -> dict[str, str]:
    """The watcher of each contract ``recorded`` moved, from the claimed deliveries' messages."""
    found: dict[str, str] = {}
    for outcome, _ in batch:
        claimed = outcome.claimed
        if claimed is not None and claimed.callback_id in recorded.moved:
            watcher_id = claimed.message.get("watcher_id")
            if isinstance(watcher_id, str) and watcher_id:
                found[claimed.callback_id] = watcher_id
    return found
