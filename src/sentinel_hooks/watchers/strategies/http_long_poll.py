"""The ``http-long-poll`` strategy (SPEC.md §3): the server holds the request until it has news.

The runner asks again as soon as a poll returns. The hold time is the watcher's
``timeoutMs`` (default 60 s): when it passes with no answer, or the server answers
``204 No Content``, that is not a failure but ``NoObservation`` (quiet: ask again at once).
Failing to connect at all is an ordinary retryable error.
"""

from __future__ import annotations

from sentinel_hooks.config.watcher import HttpLongPollWatcher
from sentinel_hooks.net.errors import NetError, RequestTimeout
from sentinel_hooks.watchers.strategies.http_request import observe_failure, observed_value, send
from sentinel_hooks.watchers.strategy import NoObservation, Observed, StrategyContext


class HttpLongPollStrategy:
    """Sends the request and waits up to ``timeoutMs`` for the held answer."""

    def __init__(self, watcher: HttpLongPollWatcher, context: StrategyContext) -> None:
        self.watcher = watcher
        self.context = context

    async def poll(self) -> Observed:
        """The held answer's observation; ``NoObservation`` when the hold ends without news."""
        hold_s = self.watcher.timeout_ms / 1000
        try:
            response = await send(self.watcher, self.context, timeout_s=hold_s)
        except RequestTimeout as exc:
            where = self.context.redactor.text(f"{self.watcher.method} {self.watcher.endpoint}")
            raise NoObservation(f"{where}: no answer within the {hold_s:g} s hold; asking again") from exc
        except NetError as exc:
            raise observe_failure(exc, self.context.redactor) from exc
        if response.status == 204:
            where = self.context.redactor.text(f"{response.method} {response.url}")
            raise NoObservation(f"{where}: 204 No Content")
        value = observed_value(response, self.context.redactor)
        return Observed(value=value, at=self.context.clock.now())

    async def close(self) -> None:
        """Nothing to release: the HTTP client is the service's."""


def create(watcher: HttpLongPollWatcher, context: StrategyContext) -> HttpLongPollStrategy:
    """The strategy for an ``http-long-poll`` watcher."""
    return HttpLongPollStrategy(watcher, context)
