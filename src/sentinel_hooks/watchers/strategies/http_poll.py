"""The ``http-poll`` strategy (SPEC.md §3): one request per scheduled poll.

The runner owns the schedule (interval or cron), jitter, no-overlap and retries; this
module only turns one request into one observation or one ``ObserveError``. A request that
cannot get a slot within one period of the watcher is not sent: the poll is skipped
(``PollSkipped``), since the next scheduled poll is due by then anyway.
"""

from __future__ import annotations

from sentinel_hooks.config.watcher import HttpPollWatcher
from sentinel_hooks.net.errors import NetError
from sentinel_hooks.watchers.schedule import period, shared_interval
from sentinel_hooks.watchers.strategies.http_request import observe_failure, observed_value, send
from sentinel_hooks.watchers.strategy import Observed, StrategyContext


class HttpPollStrategy:
    """Requests ``endpoint`` and observes the answer (JSON, or ``{"text", "contentType"}``).

    One per started watcher, so slotted, and the wait for a request slot of an interval
    watcher is its interval's one float (``schedule.shared_interval``): issue 34.5's memory per idle watcher.
    """

    __slots__ = ("_start_within_s", "context", "watcher")

    def __init__(self, watcher: HttpPollWatcher, context: StrategyContext) -> None:
        self.watcher = watcher
        self.context = context
        self._start_within_s = shared_interval(period(watcher, context.clock.now()))[1]

    async def poll(self) -> Observed:
        """One request within ``timeoutMs``; non-2xx, refusals and bad JSON raise ``ObserveError``."""
        try:
            response = await send(
                self.watcher,
                self.context,
                timeout_s=self.watcher.timeout_ms / 1000,
                start_within_s=self._start_within_s,
            )
        except NetError as exc:
            raise observe_failure(exc, self.context.redactor) from exc
        value = observed_value(response, self.context.redactor)
        return Observed(value=value, at=self.context.clock.now())

    async def close(self) -> None:
        """Nothing to release: the HTTP client is the service's."""


def create(watcher: HttpPollWatcher, context: StrategyContext) -> HttpPollStrategy:
    """The strategy for an ``http-poll`` watcher."""
    return HttpPollStrategy(watcher, context)
