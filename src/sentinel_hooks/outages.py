"""A background loop that keeps failing: how long it waits before trying again, and a short log.

The loops that retry against the store (the outbox, the relay, the session queue, the
watcher-change subscription, the lease keeper, the heartbeat, retention) and the watchers'
writes used to log every failed pass: a 27 s Redis outage wrote 158 ERROR lines, and a store
outage wrote a line per watcher. Each such loop (the watchers share one) keeps an ``Outage``:

* the first failure of a run of them is one line with the cause: WARNING for one of Sentinel's
  errors (the store out of reach, refusing writes), ERROR with the traceback for anything else
  (a bug);
* while it lasts, at most one line per ``SUMMARY_EVERY_S``, with how long and how many attempts;
* the first success after it is one line saying how long it lasted;
* every other failure is a DEBUG line.

So an outage logs a few lines per loop whatever its length and however many watchers there are.
``failed`` also says how long to wait before the next attempt: ``STORE_RETRY``, 0.5 s doubling
to 5 s (equal jitter, so the loops that failed together do not come back together), so a loop
that polls every 0.25 s does not keep hammering a server that is down, and what fell due during
the outage is done within 5 s of its end.
"""

from __future__ import annotations

import logging
import random
from datetime import datetime

from sentinel_hooks.clock import Clock
from sentinel_hooks.core.retry import Backoff
from sentinel_hooks.errors import SentinelError

STORE_RETRY = Backoff(base_s=0.5, cap_s=5.0, jitter="equal")
SUMMARY_EVERY_S = 30.0


class Outage:
    """One loop's run of failures (``what`` names the loop's work in its log lines)."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        clock: Clock,
        backoff: Backoff = STORE_RETRY,
        summary_every_s: float = SUMMARY_EVERY_S,
        rng: random.Random | None = None,
    ) -> None:
        self._log = logger
        self.what = what
        self._clock = clock
        self._backoff = backoff
        self._summary_every_s = summary_every_s
        self._rng = rng or random.Random()
        self.attempts = 0  # failed attempts in the current run (0: not failing)
        self._since: datetime | None = None
        self._summarised_at: datetime | None = None

    @property
    def failing(self) -> bool:
        return self.attempts > 0

    def failed(self, exc: BaseException) -> float:
        """Count a failed attempt and log it if it is due; the seconds to wait before the next."""
        self.note(exc)
        return self._backoff.delay_s(self.attempts, self._rng)

    async def retried(self, exc: BaseException, _delay_s: float) -> None:
        """``failed`` for a ``core.retry`` loop, which waits by itself (its ``before_sleep``)."""
        self.note(exc)

    def note(self, exc: BaseException) -> None:
        """Count a failed attempt and log it if it is due."""
        now = self._clock.now()
        self.attempts += 1
        if self._since is None:
            self._since = self._summarised_at = now
            if isinstance(exc, SentinelError):
                self._log.warning("%s failed: %s", self.what, exc)
            else:
                self._log.error("%s failed: %s", self.what, exc, exc_info=exc)
        elif (now - (self._summarised_at or now)).total_seconds() >= self._summary_every_s:
            self._summarised_at = now
            self._log.warning(
                "%s still failing after %.0f s (%d attempts): %s",
                self.what,
                (now - self._since).total_seconds(),
                self.attempts,
                exc,
            )
        else:
            self._log.debug("%s failed (attempt %d): %s", self.what, self.attempts, exc)

    def succeeded(self) -> None:
        """An attempt worked: one line when it ends a run of failures (cheap otherwise)."""
        if not self.attempts:
            return
        lasted_s = (self._clock.now() - self._since).total_seconds() if self._since else 0.0
        self._log.info(
            "%s works again after %.1f s (%d failed attempt(s))", self.what, lasted_s, self.attempts
        )
        self.attempts = 0
        self._since = self._summarised_at = None
