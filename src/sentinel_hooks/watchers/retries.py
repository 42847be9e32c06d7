"""How a watcher retries: its ``retry`` as a ``core.retry.Backoff``, and the one loop that runs it.

A poll (``polling``) and a subscription's connect (``subscription``) retry the same way: a
transient failure (``TransientObserveError``, but not a quiet long-poll's ``NoObservation``,
which is asked again at once) is tried again after ``Backoff.delay_s``, each failed attempt
recorded before its wait, and a stop ends the wait at once (the runner's ``sleep`` raises
``Stopping``). A poll gives up after ``retry.maxRetries`` retries, a connect never does.

The loop is ``core.retry.retry_after_failure``, entered only after a first failure: a poll that
succeeds costs the call and nothing else (polls run up to a thousand times a second; a tenacity
loop per poll was measured at 7 % of a poll's CPU, ``core.retry``), and a failing one costs a
plain loop.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import TypeGuard, TypeVar, cast

from sentinel_hooks.config.watcher import RetrySpec
from sentinel_hooks.core.retry import Backoff, retry_after_failure
from sentinel_hooks.watchers.strategy import NoObservation, ObserveError, TransientObserveError

T = TypeVar("T")


class Stopping(Exception):
    """Raised inside a backoff sleep when the runner is being stopped."""


def retried(exc: BaseException) -> TypeGuard[TransientObserveError]:
    """A failed observation worth another try (a quiet long-poll is asked again at once instead)."""
    return isinstance(exc, TransientObserveError) and not isinstance(exc, NoObservation)


def watcher_backoff(retry: RetrySpec) -> Backoff:
    """The watcher's ``retry`` as a policy: full jitter under min(maxMs, baseMs * 2^(n-1)),
    ``maxRetries`` retries after the first try, a Retry-After hint honoured up to ten times maxMs."""
    cap_s = retry.max_ms / 1000
    return Backoff(
        base_s=retry.base_ms / 1000,
        cap_s=cap_s,
        jitter="full",
        max_attempts=retry.max_retries + 1,
        retry_after_cap_s=cap_s * 10,
    )


async def retry_failed(
    attempt: Callable[[], Awaitable[T]],
    failure: Exception,
    policy: Backoff,
    *,
    rng: random.Random,
    sleep: Callable[[float], Awaitable[None]],
    before_sleep: Callable[[ObserveError, float], Awaitable[None]],
) -> T:
    """``attempt`` again, after its first try failed with ``failure``, as ``policy`` says.

    A failure that is not ``retried``, and the last one the policy allows, are raised as they
    are; ``before_sleep(failure, delay_s)`` runs before each wait, ``sleep`` waits (the runner's
    raises ``Stopping`` when it stops).
    """

    async def announce(exc: BaseException, delay_s: float) -> None:
        await before_sleep(cast(ObserveError, exc), delay_s)  # only ``retried`` failures are waited after

    return await retry_after_failure(
        attempt, failure, policy, retry_if=retried, rng=rng, sleep=sleep, before_sleep=announce
    )
