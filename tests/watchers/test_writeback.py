"""Batched watcher writes (watchers.writeback) on a real store: stored before the caller goes on,
batched under load, errors reach every caller, drain leaves nothing behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.errors import StoreError
from sentinel_hooks.store import Observation
from sentinel_hooks.store.shortcuts import get_watcher_state, last_observation
from sentinel_hooks.store.sqlite import SqliteStore
from sentinel_hooks.store.sqlite.worker import IN_MEMORY
from sentinel_hooks.watchers.writeback import WatcherWrites

AT = datetime(2026, 11, 22, tzinfo=UTC)


class CountingStore(SqliteStore):
    """A store (in memory unless given a path) that remembers the size of each batch it wrote."""

    def __init__(self, path: Path | str = IN_MEMORY) -> None:
        super().__init__(path)
        self.batches: list[int] = []

    async def write_watcher_batch(
        self,
        observations: Sequence[tuple[str, Observation]],
        states: Mapping[str, dict[str, Any] | None],
        *,
        keep: int = 500,
    ) -> None:
        self.batches.append(len(observations) + len(states))
        await super().write_watcher_batch(observations, states, keep=keep)


@pytest.fixture
async def store() -> AsyncIterator[CountingStore]:
    """An open CountingStore, closed after the test."""
    opened = CountingStore()
    await opened.open()
    yield opened
    await opened.close()


async def test_a_write_is_stored_when_it_returns(store: CountingStore) -> None:
    """An observation and a state, each readable from the store as soon as the call returns."""
    writes = WatcherWrites(store, keep=10)
    await writes.observation("w", Observation(at=AT, value=1))
    assert 1 == (await last_observation(store, "w")).value  # type: ignore[union-attr]
    await writes.state("w", {"fires": 3})
    assert {"fires": 3} == await get_watcher_state(store, "w")


async def test_writes_made_together_go_in_one_batch(store: CountingStore) -> None:
    """200 polls writing at the same time: every write stored, in far fewer batches; the last
    state of a watcher wins."""
    writes = WatcherWrites(store, keep=10)
    await asyncio.gather(
        *(writes.observation(f"w{i % 20}", Observation(at=AT, value=i)) for i in range(200)),
        *(writes.state("s", {"n": i}) for i in range(5)),
    )
    assert 205 == sum(store.batches) + 4  # the five states of "s" are one write
    assert len(store.batches) <= 2
    assert 10 == len(await store.observations("w3"))
    assert {"n": 4} == await get_watcher_state(store, "s")


async def test_a_store_error_reaches_every_writer_of_the_batch(store: CountingStore) -> None:
    """The store refuses the batch: each caller gets the StoreError; later writes work again."""
    writes = WatcherWrites(store, keep=10)
    results = await asyncio.gather(
        writes.state("a", {"bad": object()}),
        writes.observation("b", Observation(at=AT, value=1)),
        return_exceptions=True,
    )
    assert all(isinstance(r, StoreError) for r in results), results
    await writes.observation("b", Observation(at=AT, value=2))
    assert [2] == [o.value for o in await store.observations("b")]


async def test_drain_sends_what_is_pending(store: CountingStore) -> None:
    """Writes whose callers were cancelled are still sent by drain (before the store closes)."""
    writes = WatcherWrites(store, keep=10)
    task = asyncio.create_task(writes.state("w", {"fires": 1}))
    await asyncio.sleep(0)  # let the write be queued (not synchronisation: the task only enqueues)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await writes.drain()
    assert {"fires": 1} == await get_watcher_state(store, "w")


async def test_a_prompt_write_waits_for_no_window(store: CountingStore) -> None:
    """A push's write (prompt) goes out at once even while the writer is busy, and takes a poll's
    write that was gathering for the window along: with a 60 s window both return within seconds."""
    writes = WatcherWrites(store, keep=10, window_s=60.0)
    await writes.observation("poll", Observation(at=AT, value=0))  # idle: sent at once; now busy
    gathering = asyncio.create_task(writes.observation("poll", Observation(at=AT, value=1)))
    async with asyncio.timeout(10):
        for i in range(5):  # one after the other, as a watcher's pushes queue on its lock
            await writes.observation("push", Observation(at=AT, value=i), prompt=True)
            await writes.state("push", {"n": i}, prompt=True)
        await gathering
    assert [1, 0] == [o.value for o in await store.observations("poll")]  # newest first
    assert {"n": 4} == await get_watcher_state(store, "push")


async def test_a_poll_write_under_load_still_gathers(store: CountingStore) -> None:
    """Without a push, a write made while busy waits for the window, so polls share a batch."""
    writes = WatcherWrites(store, keep=10, window_s=60.0)
    await writes.observation("w0", Observation(at=AT, value=0))
    gathering = asyncio.create_task(writes.observation("w1", Observation(at=AT, value=1)))
    await asyncio.sleep(0.05)  # not synchronisation: the write must still be waiting after a while
    assert not gathering.done()
    await writes.drain()
    await gathering
    assert [1, 1] == store.batches
