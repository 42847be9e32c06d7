"""A subscribed watcher's driver: its stream, reconnected for as long as the runner runs.

The stream is opened with retries (``retries``, never giving up) until its first observation
arrives; every observation then goes to the runner (``WatcherRunner.observed``), which owns the
state. A stream that ends or fails is closed and recorded as a failed attempt, and opened again
at once, or after ``retry.maxMs`` when the failure is not transient. Each reconnect is counted
(``sentinel_subscription_reconnects_total``) and written to the state with the gap it left.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from sentinel_hooks.errors import TransientError
from sentinel_hooks.watchers.retries import Stopping, retry_failed, watcher_backoff
from sentinel_hooks.watchers.strategy import Observed, ObserveError, SubscribeStrategy, TransientObserveError

if TYPE_CHECKING:
    from sentinel_hooks.watchers.runner import WatcherRunner


class Subscription:
    """The stream of one runner (created at its first start, kept across restarts)."""

    __slots__ = ("_runner", "strategy")

    def __init__(self, runner: WatcherRunner) -> None:
        self._runner = runner
        self.strategy: SubscribeStrategy | None = None  # set by each start, cleared by the stop

    async def run(self) -> None:
        """Observe the stream until the runner stops (a task of the runner's)."""
        strategy = self.strategy
        if strategy is None:
            return
        runner = self._runner
        disconnected_at: datetime | None = None
        while not runner.stopping:
            opened: list[AsyncIterator[Observed]] = []
            try:
                first = await self._connect(strategy, opened)
                if disconnected_at is not None:
                    await self._reconnected(disconnected_at)
                await runner.observed(first)
                async for observed in opened[-1]:
                    await runner.observed(observed)
                error: ObserveError = TransientObserveError("the stream ended")
            except Stopping:
                return
            except ObserveError as exc:
                error = exc
            finally:
                for stream in opened:
                    closer = getattr(stream, "aclose", None)
                    if closer is not None:
                        with contextlib.suppress(Exception):
                            await closer()
            disconnected_at = runner.deps.clock.now()
            await runner.failed(error, next_at=None)
            if not isinstance(error, TransientError):
                with contextlib.suppress(Stopping):
                    await runner.sleep(runner.spec.retry.max_ms / 1000)

    async def _connect(self, strategy: SubscribeStrategy, opened: list[AsyncIterator[Observed]]) -> Observed:
        """Open the stream (retrying with backoff) until its first observation arrives."""

        async def attempt() -> Observed:
            stream = strategy.stream().__aiter__()
            opened.append(stream)
            return await _first(stream)

        try:
            return await attempt()
        except Exception as exc:
            runner = self._runner
            return await retry_failed(
                attempt,
                exc,
                replace(watcher_backoff(runner.spec.retry), max_attempts=None),
                rng=runner.deps.rng,
                sleep=runner.sleep,
                before_sleep=runner.before_retry,
            )

    async def _reconnected(self, since: datetime) -> None:
        runner = self._runner
        gap_ms = int((runner.deps.clock.now() - since).total_seconds() * 1000)
        runner.deps.metrics.reconnects.labels(runner.id).inc()
        await runner.adopt(lambda state: state.evolve(reconnects=state.reconnects + 1, last_gap_ms=gap_ms))


async def _first(stream: AsyncIterator[Observed]) -> Observed:
    """The first observation of a fresh stream; an empty stream is a failed connection."""
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        raise TransientObserveError("the stream ended before any event") from None
