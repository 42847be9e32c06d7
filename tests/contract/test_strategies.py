"""Every watcher strategy keeps the Protocol of ``watchers/strategy.py``: it is one kind (poll or
subscribe), observes what its source offers at the clock's time and in order, fails with a
retryable ``ObserveError`` (never a quiet one) when the source is not there, lets go of the source
when a wait is cancelled or it is closed, and, subscribing, ends its stream with a retryable
``ObserveError`` when the source goes away and can be opened again.

Run against every registered strategy, each watching a real local source (tests/contract/
strategy_sources.py), and the scripted fakes. What one strategy does beyond this (parsing, hints,
limits, probe rules) is tested in tests/watchers/strategies/.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.service import LimitsSpec
from sentinel_hooks.net.client import SafeHttp
from sentinel_hooks.watchers.strategy import (
    MODULES,
    NoObservation,
    Observed,
    ObserveError,
    PollStrategy,
    StrategyContext,
    SubscribeStrategy,
)
from tests.contract.conftest import RedisSpace, Serve
from tests.contract.strategy_sources import HttpRig, ProbeRig, PushRig, RedisRig, Rig, ScriptedRig, first
from tests.support import wait_for

WAIT_S = 15.0  # a deadline, not a pause: a resubscribe after a dropped source has taken up to 7 s under load
REDIS = pytest.mark.redis
POLLING = ["http-poll", "http-long-poll", "evm-call", "command", "scripted-poll"]
SUBSCRIBING = [
    "sse",
    "websocket",
    pytest.param("redis-pubsub", marks=REDIS),
    pytest.param("redis-stream", marks=REDIS),
    "scripted-subscription",
]
REGISTERED = {
    "http-poll",
    "http-long-poll",
    "evm-call",
    "command",
    "sse",
    "websocket",
    "redis-pubsub",
    "redis-stream",
}


async def started(request: pytest.FixtureRequest, serve: Serve, safe_http: SafeHttp, tmp_path: Path) -> Rig:
    """The rig of the strategy ``request.param`` names, its source started."""
    kind: str = request.param
    context = StrategyContext(http=safe_http, clock=FakeClock(), limits=LimitsSpec(), base_dir=tmp_path)
    if kind in ("http-poll", "http-long-poll", "evm-call"):
        return await HttpRig.start(serve, context, kind)
    if kind in ("sse", "websocket"):
        return await PushRig.start(serve, context, kind)
    if kind == "command":
        return ProbeRig.start(context)
    if kind.startswith("scripted-"):
        return ScriptedRig.start(context, subscription=kind == "scripted-subscription")
    space: RedisSpace = request.getfixturevalue("redis_space")
    return await RedisRig.start(space.url, context, kind, space.prefix)


@pytest.fixture(params=[*POLLING, *SUBSCRIBING])
async def rig(
    request: pytest.FixtureRequest, serve: Serve, safe_http: SafeHttp, tmp_path: Path
) -> AsyncIterator[Rig]:
    """Any strategy, watching its source."""
    made = await started(request, serve, safe_http, tmp_path)
    yield made
    await made.close()


@pytest.fixture(params=SUBSCRIBING)
async def subscription(
    request: pytest.FixtureRequest, serve: Serve, safe_http: SafeHttp, tmp_path: Path
) -> AsyncIterator[Rig]:
    """A subscribing strategy, watching its source."""
    made = await started(request, serve, safe_http, tmp_path)
    yield made
    await made.close()


async def taken(observed: Observed) -> Any:
    """What the runner does with an observation once stored: ack it (redis-stream); its value."""
    if observed.ack is not None:
        await observed.ack()
    return observed.value


def test_every_registered_strategy_is_covered() -> None:
    """The registry's strategies are exactly the real ones this suite runs."""
    assert REGISTERED == set(MODULES)


async def test_a_strategy_is_exactly_one_kind(rig: Rig) -> None:
    """A strategy polls or subscribes, never both and never neither (the runner picks its loop by it)."""
    kinds = (isinstance(rig.strategy, PollStrategy), isinstance(rig.strategy, SubscribeStrategy))
    assert (rig.kind is PollStrategy, rig.kind is SubscribeStrategy) == kinds


async def test_an_observation_arrives_at_clock_time(rig: Rig) -> None:
    """What the source offers is observed, stamped with the injected clock."""
    receiving = asyncio.ensure_future(first(rig.strategy))
    await rig.offer(1)
    observed = await asyncio.wait_for(receiving, WAIT_S)
    assert (rig.observed(1), rig.context.clock.now()) == (await taken(observed), observed.at)


async def test_observations_arrive_in_order(rig: Rig) -> None:
    """Two levels offered one after the other are observed in that order."""
    values: list[Any] = []
    if isinstance(rig.strategy, PollStrategy):
        for n in (1, 2):
            receiving = asyncio.ensure_future(rig.strategy.poll())
            await rig.offer(n)
            values.append(await taken(await asyncio.wait_for(receiving, WAIT_S)))
    else:
        stream = cast(SubscribeStrategy, rig.strategy).stream()
        try:
            for n in (1, 2):
                next_one = asyncio.ensure_future(anext(stream))
                await rig.offer(n)
                values.append(await taken(await asyncio.wait_for(next_one, WAIT_S)))
        finally:
            await cast(Any, stream).aclose()
    assert [rig.observed(1), rig.observed(2)] == values


async def test_an_unreachable_source_is_a_retryable_failure(rig: Rig) -> None:
    """Nothing at the source's address: a retryable ObserveError, never a quiet NoObservation."""
    strategy = rig.unreachable()
    try:
        with pytest.raises(ObserveError) as caught:
            await asyncio.wait_for(first(strategy), WAIT_S)
    finally:
        await strategy.close()
    assert (True, False) == (caught.value.retryable, isinstance(caught.value, NoObservation))


async def test_a_cancelled_wait_lets_go_of_the_source(rig: Rig) -> None:
    """Cancelled while it waits at its source, the call ends at once and the source sees nothing
    of the strategy left open (connection, subscription, probe process) once it is closed."""
    waiting = asyncio.ensure_future(first(rig.strategy))
    await wait_for(rig.waiting, timeout_s=WAIT_S, what="the strategy to wait at its source")
    waiting.cancel()
    done, _ = await asyncio.wait({waiting}, timeout=WAIT_S)
    await rig.strategy.close()
    await wait_for(lambda: _released(rig), timeout_s=WAIT_S, what="the source to be let go")
    assert (True, True) == (waiting in done, waiting.cancelled())


async def _released(rig: Rig) -> bool:
    return await rig.held() == 0


async def test_close_is_safe_before_use_and_twice(rig: Rig) -> None:
    """close() may come before any observation, and again; nothing is left open."""
    await rig.strategy.close()
    await rig.strategy.close()
    assert 0 == await rig.held()


async def ended_stream(rig: Rig) -> ObserveError:
    """Open a stream, observe level 1, let the source go away while it waits; what it raised."""
    stream = cast(SubscribeStrategy, rig.strategy).stream()
    try:
        receiving = asyncio.ensure_future(anext(stream))
        await rig.offer(1)
        await taken(await asyncio.wait_for(receiving, WAIT_S))
        next_one = asyncio.ensure_future(anext(stream))
        await wait_for(rig.waiting, timeout_s=WAIT_S, what="the stream to wait for more")
        await rig.drop()
        with pytest.raises(ObserveError) as caught:
            await asyncio.wait_for(next_one, WAIT_S)
    finally:
        await cast(Any, stream).aclose()
    return caught.value


async def test_a_source_that_goes_away_ends_the_stream_retryably(subscription: Rig) -> None:
    """When the source ends the connection the stream raises a retryable ObserveError (the runner
    reconnects), never just stops."""
    assert (await ended_stream(subscription)).retryable


async def test_a_new_stream_after_an_ended_one_observes_again(subscription: Rig) -> None:
    """After the source went away, the next stream() (the runner's reconnect) observes what follows."""
    await ended_stream(subscription)
    receiving = asyncio.ensure_future(first(subscription.strategy))
    await subscription.offer(2)
    assert subscription.observed(2) == await taken(await asyncio.wait_for(receiving, WAIT_S))
