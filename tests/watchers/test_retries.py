"""The one retry loop of a watcher's polls and connects (``watchers.retries.retry_failed``)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import pytest

from sentinel_hooks.core.retry import Backoff
from sentinel_hooks.watchers.retries import retry_failed
from sentinel_hooks.watchers.strategy import NoObservation, ObserveError, TransientObserveError

POLICY = Backoff(base_s=1.0, cap_s=8.0, jitter="full", max_attempts=3)


class Waits:
    """The loop's sleeps and the failures announced before them, in order."""

    def __init__(self) -> None:
        self.slept: list[float] = []
        self.announced: list[tuple[str, float]] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    async def before_sleep(self, failure: ObserveError, delay_s: float) -> None:
        self.announced.append((str(failure), delay_s))


def attempts(*outcomes: object) -> Callable[[], Awaitable[object]]:
    """An attempt that raises or returns ``outcomes`` in turn."""
    queue = list(outcomes)

    async def attempt() -> object:
        outcome = queue.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return attempt


async def run(attempt: Callable[[], Awaitable[object]], failure: Exception, waits: Waits) -> object:
    return await retry_failed(
        attempt, failure, POLICY, rng=random.Random(7), sleep=waits.sleep, before_sleep=waits.before_sleep
    )


async def test_a_transient_failure_is_tried_again_until_an_attempt_succeeds() -> None:
    """Two failures, then an answer: two announced waits, each the one slept."""
    waits = Waits()
    answer = await run(attempts(TransientObserveError("second"), "ok"), TransientObserveError("first"), waits)
    assert ("ok", ["first", "second"], waits.slept) == (
        answer,
        [failure for failure, _ in waits.announced],
        [delay for _, delay in waits.announced],
    )


async def test_the_waits_are_the_policys_jittered_delays() -> None:
    """Each wait is the policy's draw for its attempt, from the caller's random source."""
    waits = Waits()
    await run(attempts(TransientObserveError("second"), "ok"), TransientObserveError("first"), waits)
    rng = random.Random(7)
    assert [POLICY.delay_s(1, rng), POLICY.delay_s(2, rng)] == waits.slept


async def test_the_last_failure_the_policy_allows_is_raised() -> None:
    """Three attempts allowed: the third failure is raised after two waits."""
    waits = Waits()
    with pytest.raises(TransientObserveError, match="third"):
        await run(
            attempts(TransientObserveError("second"), TransientObserveError("third")),
            TransientObserveError("first"),
            waits,
        )
    assert 2 == len(waits.slept)


@pytest.mark.parametrize(
    "failure",
    [ObserveError("refused"), NoObservation(), ValueError("a bug")],
    ids=["permanent", "quiet", "other"],
)
async def test_a_failure_not_worth_another_try_is_raised_at_once(failure: Exception) -> None:
    """A permanent error, a quiet long-poll and anything but an ObserveError are not retried."""
    waits = Waits()
    with pytest.raises(type(failure)):
        await run(attempts(), failure, waits)
    assert [] == waits.slept


async def test_a_retry_after_hint_is_waited_for() -> None:
    """A source that asks for 5 s is given at least 5 s (the cap allows up to 80)."""
    waits = Waits()
    await run(attempts("ok"), TransientObserveError("busy", retry_after_s=5.0), waits)
    assert waits.slept[0] >= 5.0
