"""Tests for the backoff policy: delays, caps, jitter bounds, Retry-After, and the retry loop."""

from __future__ import annotations

import asyncio
import random

import pytest
from tenacity import RetryCallState, Retrying, wait_exponential

from sentinel_hooks.core.retry import (
    Backoff,
    BeforeSleep,
    Jitter,
    RetryIf,
    call_with_retries,
    retry_after_failure,
    retry_after_of,
)
from sentinel_hooks.errors import SentinelError, TransientError

DRAWS = 2000


class Busy(TransientError):
    """A transient failure with an optional hint, as an adapter would raise."""

    def __init__(self, retry_after_s: float | None = None) -> None:
        super().__init__("busy")
        self.retry_after_s = retry_after_s


class Refused(SentinelError):
    """A failure that will not pass."""


def test_ceiling_doubles_from_the_base_up_to_the_cap() -> None:
    """Attempt n may wait up to base * 2^(n-1), never past the cap."""
    policy = Backoff(base_s=0.5, cap_s=8)
    assert [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0] == [policy.ceiling_s(n) for n in range(1, 8)]


def test_factor_sets_the_growth() -> None:
    """factor=3 triples the ceiling from one attempt to the next."""
    policy = Backoff(base_s=1, cap_s=100, factor=3)
    assert [1, 3, 9, 27, 81, 100] == [policy.ceiling_s(n) for n in range(1, 7)]


def test_a_huge_attempt_number_stays_at_the_cap() -> None:
    """Thousands of failed attempts neither overflow nor pass the cap."""
    assert 30.0 == Backoff(base_s=0.5, cap_s=30).ceiling_s(100_000)


def test_full_jitter_draws_between_zero_and_the_ceiling() -> None:
    """Full jitter spreads the waits over [0, ceiling], reaching near both ends."""
    policy, rng = Backoff(base_s=1, cap_s=60, jitter="full"), random.Random(1)
    delays = [policy.delay_s(3, rng) for _ in range(DRAWS)]
    assert (True, True, True) == (all(0 <= d <= 4 for d in delays), min(delays) < 0.1, max(delays) > 3.9)


def test_equal_jitter_draws_between_half_and_the_whole_ceiling() -> None:
    """Equal jitter waits at least half the ceiling."""
    policy, rng = Backoff(base_s=1, cap_s=60, jitter="equal"), random.Random(2)
    delays = [policy.delay_s(3, rng) for _ in range(DRAWS)]
    assert (True, True, True) == (all(2 <= d <= 4 for d in delays), min(delays) < 2.1, max(delays) > 3.9)


@pytest.mark.parametrize(("jitter", "low"), [("full", 0.0), ("equal", 0.5)])
def test_the_draw_is_one_uniform_under_the_ceiling(jitter: Jitter, low: float) -> None:
    """The wait is exactly ``rng.uniform(low * ceiling, ceiling)``: one draw from the caller's source."""
    policy = Backoff(base_s=0.25, cap_s=30, jitter=jitter)
    expected_rng, rng = random.Random(5), random.Random(5)
    expected = [expected_rng.uniform(low * policy.ceiling_s(n), policy.ceiling_s(n)) for n in range(1, 12)]
    assert expected == [policy.delay_s(n, rng) for n in range(1, 12)]


def test_the_model_policy_has_tenacitys_exponential_ceiling() -> None:
    """Base 0.5 s, cap 8 s is tenacity's wait_random_exponential(multiplier=0.5, max=8) ceiling."""
    tenacity_ceiling = wait_exponential(multiplier=0.5, max=8)
    states = [RetryCallState(Retrying(), None, (), {}) for _ in range(9)]
    for number, state in enumerate(states, start=1):
        state.attempt_number = number
    policy = Backoff(base_s=0.5, cap_s=8)
    assert [tenacity_ceiling(s) for s in states] == [policy.ceiling_s(n) for n in range(1, 10)]


def test_a_longer_retry_after_wins() -> None:
    """A server that asks for 7 s gets 7 s, however short the jittered wait."""
    assert 7.0 == Backoff(base_s=0.1, cap_s=1).delay_s(1, random.Random(0), retry_after_s=7)


def test_a_shorter_retry_after_does_not_shorten_the_wait() -> None:
    """A hint below the jittered wait changes nothing."""
    policy = Backoff(base_s=10, cap_s=10, jitter="equal")
    assert policy.delay_s(1, random.Random(3)) == policy.delay_s(1, random.Random(3), retry_after_s=0.5)


def test_retry_after_is_bounded_by_its_cap() -> None:
    """retry_after_cap_s bounds what a hint can ask for."""
    policy = Backoff(base_s=0.1, cap_s=30, retry_after_cap_s=300)
    assert 300.0 == policy.delay_s(1, random.Random(0), retry_after_s=86_400)


def test_retry_after_without_a_cap_is_honoured_in_full() -> None:
    """With no retry_after_cap_s the wait is as long as the hint asks."""
    assert 86_400.0 == Backoff(base_s=0.1, cap_s=30).delay_s(1, random.Random(0), retry_after_s=86_400)


@pytest.mark.parametrize("hint", [None, 0.0, -5.0])
def test_no_positive_retry_after_means_the_plain_draw(hint: float | None) -> None:
    """A missing, zero or negative hint leaves the jittered wait as it is."""
    policy = Backoff(base_s=1, cap_s=10)
    assert policy.delay_s(2, random.Random(9)) == policy.delay_s(2, random.Random(9), retry_after_s=hint)


def test_max_attempts_counts_the_first_try() -> None:
    """With three attempts, the third failure is the last."""
    policy = Backoff(base_s=1, cap_s=2, max_attempts=3)
    assert [False, False, True, True] == [policy.exhausted(n) for n in range(1, 5)]


def test_no_max_attempts_never_gives_up() -> None:
    """max_attempts None keeps trying."""
    assert Backoff(base_s=1, cap_s=2).exhausted(1_000_000) is False


@pytest.mark.parametrize(
    ("base_s", "cap_s", "factor", "max_attempts"),
    [(-1, 1, 2, None), (1, -1, 2, None), (1, 1, 0.5, None), (1, 1, 2, 0)],
)
def test_a_policy_that_makes_no_sense_is_refused(
    base_s: float, cap_s: float, factor: float, max_attempts: int | None
) -> None:
    """Negative waits, a shrinking factor or zero attempts raise ValueError."""
    with pytest.raises(ValueError, match=r"backoff|max_attempts"):
        Backoff(base_s=base_s, cap_s=cap_s, factor=factor, max_attempts=max_attempts)


def test_retry_after_of_reads_transient_errors_only() -> None:
    """The hint of a transient failure; None for other failures and for none at all."""
    assert (4.0, None, None, None) == (
        retry_after_of(Busy(4.0)),
        retry_after_of(Busy()),
        retry_after_of(Refused("no")),
        retry_after_of(None),
    )


class Flaky:
    """Fails with the given exceptions in turn, then answers "ok"; counts its calls."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


class Sleeps:
    """A sleep that returns at once and remembers how long it was asked to wait."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)


async def run(
    policy: Backoff,
    call: Flaky,
    sleeps: Sleeps,
    *,
    retry_if: RetryIf = TransientError,
    rng: random.Random | None = None,
    before_sleep: BeforeSleep | None = None,
) -> str:
    """``call()`` in ``call_with_retries``, sleeping with ``sleeps``."""
    return await call_with_retries(
        call, policy, retry_if=retry_if, rng=rng, sleep=sleeps, before_sleep=before_sleep
    )


async def test_transient_failures_are_tried_again_with_the_policys_waits() -> None:
    """Two transient failures, then success: two waits, as delay_s draws them from the rng."""
    policy, call, sleeps = Backoff(base_s=1, cap_s=8, max_attempts=5), Flaky(Busy(), Busy()), Sleeps()
    expected_rng = random.Random(11)
    expected = [policy.delay_s(1, expected_rng), policy.delay_s(2, expected_rng)]
    result = await run(policy, call, sleeps, rng=random.Random(11))
    assert ("ok", 3, expected) == (result, call.calls, sleeps.asked)


async def test_the_retry_after_of_the_failure_sets_the_wait() -> None:
    """A failure that asks for 30 s is waited for 30 s."""
    policy, call, sleeps = Backoff(base_s=0.01, cap_s=0.1), Flaky(Busy(30.0)), Sleeps()
    await run(policy, call, sleeps)
    assert [30.0] == sleeps.asked


async def test_the_last_failure_is_raised_as_it_is() -> None:
    """After max_attempts the last failure itself propagates (no wrapper)."""
    last = Busy(1.0)
    policy, call, sleeps = Backoff(base_s=0, cap_s=0, max_attempts=3), Flaky(Busy(), Busy(), last), Sleeps()
    with pytest.raises(Busy) as caught:
        await run(policy, call, sleeps)
    assert (last, 3, 2) == (caught.value, call.calls, len(sleeps.asked))


async def test_a_failure_not_retried_is_raised_at_once() -> None:
    """A failure retry_if does not accept ends the loop on the first call."""
    policy, call, sleeps = Backoff(base_s=1, cap_s=1, max_attempts=5), Flaky(Refused("no")), Sleeps()
    with pytest.raises(Refused):
        await run(policy, call, sleeps)
    assert (1, []) == (call.calls, sleeps.asked)


async def test_retry_if_may_be_a_test() -> None:
    """A predicate picks the failures to retry (here: only those with a hint)."""
    policy, call, sleeps = Backoff(base_s=0, cap_s=0), Flaky(Busy(0.5), Busy()), Sleeps()
    with pytest.raises(Busy):
        await run(policy, call, sleeps, retry_if=lambda exc: retry_after_of(exc) is not None)
    assert (2, [0.5]) == (call.calls, sleeps.asked)


async def test_without_max_attempts_the_loop_keeps_trying() -> None:
    """max_attempts None: ten failures in a row are waited out."""
    policy, call, sleeps = Backoff(base_s=0, cap_s=0), Flaky(*[Busy() for _ in range(10)]), Sleeps()
    assert ("ok", 11) == (await run(policy, call, sleeps), call.calls)


async def test_before_sleep_hears_each_failure_and_its_wait() -> None:
    """before_sleep gets the failure and the wait that follows it, before the sleep."""
    heard: list[tuple[BaseException, float]] = []

    async def before_sleep(failure: BaseException, delay_s: float) -> None:
        heard.append((failure, delay_s))

    first, second = Busy(2.0), Busy(3.0)
    policy, call, sleeps = Backoff(base_s=0.01, cap_s=0.01), Flaky(first, second), Sleeps()
    await run(policy, call, sleeps, before_sleep=before_sleep)
    assert ([(first, 2.0), (second, 3.0)], [2.0, 3.0]) == (heard, sleeps.asked)


async def test_retry_if_may_name_several_types() -> None:
    """A tuple of types retries a failure of any of them."""
    policy, call, sleeps = Backoff(base_s=0, cap_s=0), Flaky(Busy(), Refused("no")), Sleeps()
    assert ("ok", 3) == (await run(policy, call, sleeps, retry_if=(Busy, Refused)), call.calls)


async def test_a_cancellation_is_never_retried() -> None:
    """A cancellation passes through on the first call, whatever retry_if accepts."""
    policy, call, sleeps = Backoff(base_s=0, cap_s=0), Flaky(asyncio.CancelledError()), Sleeps()
    with pytest.raises(asyncio.CancelledError):
        await run(policy, call, sleeps, retry_if=BaseException)
    assert (1, []) == (call.calls, sleeps.asked)


async def test_a_call_that_succeeds_is_made_once() -> None:
    """No failure: one call, no wait."""
    call, sleeps = Flaky(), Sleeps()
    assert ("ok", 1, []) == (await run(Backoff(base_s=1, cap_s=1), call, sleeps), call.calls, sleeps.asked)


async def test_after_a_failure_the_loop_counts_it_as_the_first_attempt() -> None:
    """retry_after_failure, handed a first failure, waits as after attempt 1 and calls again."""
    policy, call, sleeps = Backoff(base_s=1, cap_s=8, max_attempts=2), Flaky(), Sleeps()
    expected = policy.delay_s(1, random.Random(4))
    result = await retry_after_failure(
        call, Busy(), policy, retry_if=TransientError, rng=random.Random(4), sleep=sleeps
    )
    assert ("ok", 1, [expected]) == (result, call.calls, sleeps.asked)
