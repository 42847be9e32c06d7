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
    recording a sent delivery  0.2 / 0.4                      equal   3                     (none given)
    a cluster client's start   0 / 0 (each try is bounded)    full    3                     (none given)
    loops on a failing store   0.5 / 5 (``outages``)          equal   until it works        (none given)

Jitter spreads the retries of many callers that failed together: ``full`` waits a uniform
draw from [0, ceiling], ``equal`` from [ceiling / 2, ceiling] (never much less than the
ceiling: a receiver that is down gets a real pause). The random source is the caller's, so
tests and the simulations can seed it.

One loop runs the policy, :func:`retry_after_failure`, a tenacity ``AsyncRetrying`` whose stop,
wait and retry tests are the policy's: after a call failed, while the failure is one ``retry_if``
accepts and the policy's attempts are not spent, it waits as the policy says and calls again; the
failure that ends it is raised as it is. :func:`call_with_retries` makes the
first call and enters the loop only if that fails, so a call that succeeds costs nothing more:
a watcher's poll (up to a thousand a second, ``watchers.retries``) enters it only after a failed
poll (a tenacity loop per poll was measured at 7 % of a poll's CPU, bench/RESULTS.md; one per
model call at a tenth of a session's own work).

What the outbox keeps is not a loop: a delivery's next try is a stored delivery due after
``delay_s``, and ``exhausted`` says when it is a dead letter. A background loop that must outlive a
failing store (``outages.Outage``) waits ``delay_s`` after each failed pass and never gives up.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from sentinel_hooks.errors import TransientError

T = TypeVar("T")
Jitter = Literal["full", "equal"]
RetryIf = type[BaseException] | tuple[type[BaseException], ...] | Callable[[BaseException], bool]
"""Which failures are tried again: those of a type (or types), or those a test accepts."""
Sleep = Callable[[float], Awaitable[None]]
BeforeSleep = Callable[[BaseException, float], Awaitable[None]]
"""Told each failure that will be tried again, and the seconds the loop waits first."""
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


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    policy: Backoff,
    *,
    retry_if: RetryIf,
    rng: random.Random | None = None,
    sleep: Sleep = asyncio.sleep,
    before_sleep: BeforeSleep | None = None,
) -> T:
    """``await call()``, tried again as ``policy`` says while it fails in a way ``retry_if`` accepts
    (:func:`retry_after_failure`, entered only after a failure)."""
    try:
        return await call()
    except Exception as exc:
        failure = exc
    return await retry_after_failure(
        call, failure, policy, retry_if=retry_if, rng=rng, sleep=sleep, before_sleep=before_sleep
    )


async def retry_after_failure(
    call: Callable[[], Awaitable[T]],
    failure: Exception,
    policy: Backoff,
    *,
    retry_if: RetryIf,
    rng: random.Random | None = None,
    sleep: Sleep = asyncio.sleep,
    before_sleep: BeforeSleep | None = None,
) -> T:
    """``call()`` again, after a first try failed with ``failure``, as ``policy`` says.

    A failure ``retry_if`` does not accept, and the last one the policy allows, are raised as
    they are. ``sleep`` waits (one that a stop ends early, say); ``before_sleep(failure, delay_s)``
    runs before each wait. ``rng`` draws the jitter (a shared one when None).
    """
    pending: list[Exception] = [failure]
    draw = rng or _RNG

    async def attempt() -> T:
        # tenacity's first attempt is the try that already failed: its numbering is the policy's.
        if pending:
            raise pending.pop()
        return await call()

    def retried(exc: BaseException) -> bool:
        return isinstance(exc, retry_if) if isinstance(retry_if, type | tuple) else retry_if(exc)

    def wait(state: RetryCallState) -> float:
        return policy.delay_s(state.attempt_number, draw, retry_after_of(_failure_of(state)))

    async def told(state: RetryCallState) -> None:
        if before_sleep is not None and state.next_action is not None:
            await before_sleep(_failure_of(state), state.next_action.sleep)

    retrying = AsyncRetrying(
        retry=retry_if_exception(retried),
        stop=lambda state: policy.exhausted(state.attempt_number),
        wait=wait,
        sleep=sleep,
        before_sleep=told,
        reraise=True,
    )
    return await retrying(attempt)


def _failure_of(state: RetryCallState) -> BaseException:
    """The exception of the attempt tenacity is deciding about (only failed ones reach us)."""
    outcome = state.outcome
    exc = outcome.exception() if outcome is not None else None
    assert exc is not None, "tenacity asks about a failed attempt only"
    return exc
