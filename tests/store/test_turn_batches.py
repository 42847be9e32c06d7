"""``store.turns.TurnBatches``: the calls made in one turn of the event loop run as one batch, and
each caller gets its own result or error."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from sentinel_hooks.store.turns import TurnBatches


class Doubler:
    """A batch runner that doubles numbers, refuses negative ones, and records its batches."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    async def __call__(self, items: list[int]) -> Sequence[int | BaseException]:
        self.batches.append(items)
        if 13 in items:
            raise RuntimeError("unlucky batch")
        return [ValueError(f"{n} < 0") if n < 0 else 2 * n for n in items]


async def test_calls_of_one_turn_run_as_one_batch_in_order() -> None:
    """Five calls made before any is awaited: one batch, in order, each answered with its result."""
    runner = Doubler()
    batches = TurnBatches(runner)
    assert [0, 2, 4, 6, 8] == await asyncio.gather(*(batches(n) for n in range(5)))
    assert [[0, 1, 2, 3, 4]] == runner.batches


async def test_calls_of_later_turns_run_as_later_batches() -> None:
    """A call made after the first batch was answered is a batch of its own."""
    runner = Doubler()
    batches = TurnBatches(runner)
    assert (2, 4) == (await batches(1), await batches(2))
    assert [[1], [2]] == runner.batches


async def test_an_item_error_reaches_its_caller_alone() -> None:
    """An item the batch answers with an error raises it in its caller; the others get results."""
    batches = TurnBatches(Doubler())
    results = await asyncio.gather(batches(1), batches(-1), batches(3), return_exceptions=True)
    assert (2, "-1 < 0", 6) == (results[0], str(results[1]), results[2])


async def test_a_failed_batch_fails_every_caller() -> None:
    """When the batch itself fails, every caller in it gets the error."""
    batches = TurnBatches(Doubler())
    results = await asyncio.gather(batches(1), batches(13), return_exceptions=True)
    assert ["unlucky batch", "unlucky batch"] == [str(result) for result in results]


async def test_a_caller_that_gives_up_leaves_the_others_answered() -> None:
    """A caller cancelled while its batch runs is skipped; the batch's other callers get results."""
    started = asyncio.Event()
    release = asyncio.Event()

    async def slow(items: list[int]) -> list[int]:
        started.set()
        await release.wait()
        return items

    batches = TurnBatches(slow)
    first, second = asyncio.ensure_future(batches(1)), asyncio.ensure_future(batches(2))
    await asyncio.wait_for(started.wait(), 5)
    first.cancel()
    release.set()
    assert 2 == await second
    with pytest.raises(asyncio.CancelledError):
        await first
