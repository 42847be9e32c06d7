"""Batched store writes of the watchers: one round trip for the observations and states of many polls.

Every poll stores its observation (history for ``changed`` and ``sentinel_history``) and, now
and then, its watcher's state. With 10,000 watchers that is 1,000 or more small writes a
second, each a round trip to the store (a hop to the SQLite thread and a transaction, or a
Redis command). ``WatcherWrites`` gathers them and sends each batch with one
``Store.write_watcher_batch``. Each caller still awaits its own write: it returns once
the batch holding it is stored (or raises the batch's ``StoreError``), so the order "stored,
then acknowledged" of SPEC §3 holds and a stop that awaited its final state write is durable.

A write made for a push (``prompt=True``: a webhook's events, an Alertmanager notification)
never waits for the gathering window. Its caller holds its watcher's lock while a client waits
for the 202, and the watcher's next pushes queue behind that lock: they cannot join the window,
so waiting it out only delays them (one watcher absorbed 17 alerts a second, idle, with two
25 ms windows per alert). Such a write goes out at the next turn of the event loop, or as soon
as the batch in flight is stored, with whatever the polls wrote meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sentinel_hooks.store.base import WatcherStore
from sentinel_hooks.store.records import Observation

BUSY_WINDOW_S = 0.025  # under load, a batch gathers this long before it goes out


class WatcherWrites:
    """Observation and state writes of every runner of one service, sent in batches.

    Group commit: one batch is in flight at a time. Idle, a write is sent at the next turn of
    the event loop (with whatever else that turn wrote), so it costs one round trip as before.
    Under load (the previous batch went out less than ``BUSY_WINDOW_S`` ago, or is still in
    flight), the next batch gathers for ``BUSY_WINDOW_S`` first, so one round trip serves every
    poll that finished meanwhile (handing work to the SQLite thread costs more than the SQL) —
    unless a prompt write (a push's) joins it: then it goes at the next turn of the loop, or as
    soon as the batch in flight is stored.
    """

    def __init__(self, store: WatcherStore, *, keep: int, window_s: float | None = None) -> None:
        """``window_s``: how long a batch gathers under load (default ``BUSY_WINDOW_S``)."""
        self._store = store
        self._keep = keep
        self._window_s = BUSY_WINDOW_S if window_s is None else window_s
        self._observations: list[tuple[str, Observation]] = []
        self._states: dict[str, dict[str, Any]] = {}
        self._waiters: list[asyncio.Future[None]] | None = None  # the pending batch's callers
        self._prompt = False  # the pending batch holds a prompt write: it does not wait for a window
        self._send: asyncio.Handle | None = None  # the pending batch's scheduled _flush
        self._writing = False
        self._sent_at = float("-inf")  # loop time the latest batch went out
        self._flushes: set[asyncio.Task[None]] = set()

    async def observation(self, watcher_id: str, observation: Observation, *, prompt: bool = False) -> None:
        """Append ``observation`` to the watcher's history; returns once it is stored."""
        self._observations.append((watcher_id, observation))
        await self._stored(prompt)

    async def observations(
        self,
        watcher_id: str,
        observations: list[Observation],
        *,
        prompt: bool = False,
        state: dict[str, Any] | None = None,
    ) -> None:
        """Append ``observations`` (in order) to the watcher's history in one batch, with its
        ``state`` when given (as ``state`` puts it); returns once they are stored."""
        self._observations.extend((watcher_id, observation) for observation in observations)
        if state is not None:
            self._states[watcher_id] = state
        await self._stored(prompt)

    async def state(self, watcher_id: str, state: dict[str, Any], *, prompt: bool = False) -> None:
        """Put the watcher's state (a later one in the same batch wins); returns once stored."""
        self._states[watcher_id] = state
        await self._stored(prompt)

    async def _stored(self, prompt: bool) -> None:
        """Wait for the pending batch. Each caller has a future of its own (a cancelled caller
        cancels only its own; ``asyncio.shield`` of one shared future did the same for two more
        callbacks per write)."""
        loop = asyncio.get_running_loop()
        waiters = self._waiters
        if waiters is None:
            waiters = self._waiters = []
            self._prompt = prompt
            if not self._writing:
                busy = loop.time() - self._sent_at < self._window_s
                self._schedule(loop, window=busy and not prompt)
        elif prompt and not self._prompt:  # the window need not be sat out any more
            self._prompt = True
            if self._send is not None:
                self._send.cancel()
                self._send = loop.call_soon(self._flush)
        waiter: asyncio.Future[None] = loop.create_future()
        waiters.append(waiter)
        await waiter

    def _schedule(self, loop: asyncio.AbstractEventLoop, *, window: bool) -> None:
        """Send the pending batch after the gathering window, or at the next turn of the loop."""
        self._send = loop.call_later(self._window_s, self._flush) if window else loop.call_soon(self._flush)

    def _flush(self) -> None:
        """Send the pending batch, unless one is in flight (it sends this one when done)."""
        if self._writing or self._waiters is None:
            return
        if self._send is not None:
            self._send.cancel()  # when drain sends it first
            self._send = None
        observations, states, waiters = self._observations, self._states, self._waiters
        self._observations, self._states, self._waiters = [], {}, None
        self._writing = True
        loop = asyncio.get_running_loop()
        self._sent_at = loop.time()
        task = loop.create_task(self._write(observations, states, waiters))
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _write(
        self,
        observations: list[tuple[str, Observation]],
        states: dict[str, dict[str, Any]],
        waiters: list[asyncio.Future[None]],
    ) -> None:
        try:
            await self._store.write_watcher_batch(observations, states, keep=self._keep)
        except asyncio.CancelledError:
            for waiter in waiters:
                waiter.cancel()
            raise
        except Exception as exc:  # every caller of the batch gets the store's error
            for waiter in waiters:
                if not waiter.done():  # a cancelled caller's is done
                    waiter.set_exception(exc)
        else:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
        finally:
            self._writing = False
            if self._waiters is not None:  # written while this batch was in flight: busy
                self._schedule(asyncio.get_running_loop(), window=not self._prompt)

    async def drain(self) -> None:
        """Send what is pending and wait until nothing is in flight (before the store closes)."""
        while self._waiters is not None or self._flushes:
            self._flush()
            await asyncio.gather(*self._flushes, return_exceptions=True)
