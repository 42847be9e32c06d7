"""How long Sentinel waits before trying again: one backoff policy for every retry.

Adapters try once and raise; the orchestrators retry, and decide *whether* by type (a
``TransientError`` may pass, anything else will not, see ``errors``) and *how long to wait*
with a ``Backoff``: exponential from ``base_s`` by ``factor``, capped at ``cap_s``, jittered,
and never shorter than the wait the other side asked for (the error's ``retry_after_s``),
which ``retry_after_cap_s`` may bound. The policies in use (SPEC §3, §5.2, §6.2)::

    who                        base / cap (s)                 jitter  attempts              Retry-After
    watcher polls              retry.baseMs / retry.maxMs     full    retry.maxRetries + 1  up to 10 x maxMs
    subscription (re)connects  as the watcher's polls         full    until connected       up to 10 x maxMs
    deliveries (the outbox)    delivery.baseMs / .maxMs       equal   delivery.maxAttempts  as long as asked
    model calls                0.5 / 8                        full    3                     (none given)
    loops on a failing store   0.5 / 5 (``outages``)          equal   until it works        (none given)

Jitter spreads the retries of many callers that failed together: ``full`` waits a uniform
draw from [0, ceiling], ``equal`` from [ceiling / 2, ceiling] (never much less than the
ceiling: a receiver that is down gets a real pause). The random source is the caller's, so
tests and the simulations can seed it.

Two ways to run the policy. ``retrying`` gives a tenacity ``AsyncRetrying`` for loops that run
seldom (a cluster client's first command). A watcher's polls and subscription connects (one
loop, ``watchers.retries``), model calls and the outbox use ``delay_s`` and ``exhausted``
directly: polls run up to a thousand times a second, and a tenacity object per poll was
measured at 7 % of a poll's CPU and under 42 % of the samples of failing polls
(bench/RESULTS.md); a delivery's retry is a stored delivery due later, not a loop.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_base,
    retry_if_exception,
    retry_if_exception_type,
    stop_after_attempt,
    stop_never,
)

from sentinel_hooks.errors import TransientError

Jitter = Literal["full", "equal"]
MAX_DOUBLINGS = 62  # past this the ceiling is the cap for any sane base (and 2**n stays a float)
_RNG = random.Random()  # for callers with no random source of their own


@dataclass(frozen=True)
class Backoff:
    """A retry policy: how long to wait after each failed attempt, and how many attempts.

    ``max_attempts`` counts the first try (None: never give up); ``retry_after_cap_s`` bounds
    how long a Retry-After hint can make us wait (None: as long as it asks).
    """

    base_s: float
    cap_s: float
    jitter: Jitter = "full"
    factor: float = 2
    max_attempts: int | None = None
    retry_after_cap_s: float | None = None

    def __post_init__(self) -> None:
        if self.base_s < 0 or self.cap_s < 0 or self.factor < 1:
            raise ValueError(f"a backoff needs base_s, cap_s >= 0 and factor >= 1, got {self}")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max_attempts counts the first try: at least 1, got {self.max_attempts}")

    def ceiling_s(self, attempt: int) -> float:
        """The longest wait after failed attempt number ``attempt`` (1-based), before jitter:
        ``base_s * factor ** (attempt - 1)``, at most ``cap_s``."""
        doublings = min(max(attempt - 1, 0), MAX_DOUBLINGS)
        return min(self.cap_s, self.base_s * self.factor**doublings)

    def delay_s(self, attempt: int, rng: random.Random, retry_after_s: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based): a jittered draw
        under ``ceiling_s``, or the Retry-After hint when that asks for longer."""
        ceiling = self.ceiling_s(attempt)
        delay = rng.uniform(0, ceiling) if self.jitter == "full" else rng.uniform(ceiling / 2, ceiling)
        if retry_after_s is None or retry_after_s <= 0:
            return delay
        asked = float(retry_after_s)
        if self.retry_after_cap_s is not None:
            asked = min(asked, self.retry_after_cap_s)
        return max(delay, asked)

    def exhausted(self, attempt: int) -> bool:
        """True when attempt number ``attempt`` (1-based) was the last one allowed."""
        return self.max_attempts is not None and attempt >= self.max_attempts


def retry_after_of(exc: BaseException | None) -> float | None:
    """The wait a transient failure asked for (None for any other exception, or no hint)."""
    return exc.retry_after_s if isinstance(exc, TransientError) else None


def retrying(
    policy: Backoff,
    *,
    retry_if: type[BaseException] | Callable[[BaseException], bool],
    rng: random.Random | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    before_sleep: Callable[[BaseException, float], Awaitable[None]] | None = None,
) -> AsyncRetrying:
    """A tenacity loop that runs ``policy``: ``async for attempt in retrying(...): with attempt: …``.

    ``retry_if`` says which failures are tried again, by type or by a test (the others, and
    the last failure, are raised as they are); ``sleep`` waits (one that a stop ends early, say);
    ``before_sleep(failure, delay_s)`` runs before each wait.
    """
    source = rng or _RNG

    def wait(state: RetryCallState) -> float:
        return policy.delay_s(state.attempt_number, source, retry_after_of(_failure(state)))

    async def announce(state: RetryCallState) -> None:
        failure = _failure(state)
        if before_sleep is not None and failure is not None:
            await before_sleep(failure, state.upcoming_sleep)

    if isinstance(retry_if, type):
        retry: retry_base = retry_if_exception_type(retry_if)
    else:
        retry = retry_if_exception(retry_if)
    return AsyncRetrying(
        stop=stop_never if policy.max_attempts is None else stop_after_attempt(policy.max_attempts),
        wait=wait,
        retry=retry,
        sleep=sleep,
        before_sleep=announce if before_sleep is not None else None,
        reraise=True,
    )


def _failure(state: RetryCallState) -> BaseException | None:
    return state.outcome.exception() if state.outcome is not None else None
