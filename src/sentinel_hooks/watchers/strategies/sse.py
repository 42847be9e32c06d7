"""The ``sse`` strategy (SPEC.md §3): observations from a Server-Sent Events stream.

Each event's ``data`` (JSON when it parses, else the string) is one observation, for the
types in ``eventTypes`` (default: every type; an event without ``event:`` is ``message``).
The last event ID lives on the strategy between connections and is sent back as the
``Last-Event-ID`` header, so a reconnect resumes where the stream stopped. When the
connection ends or fails, ``stream()`` raises ``ObserveError`` (carrying the server's
``retry:`` hint) and the runner reconnects with backoff.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp

from sentinel_hooks.config.watcher import SseWatcher
from sentinel_hooks.net.body import media_type
from sentinel_hooks.net.errors import NetError, status_error
from sentinel_hooks.net.response import parse_retry_after
from sentinel_hooks.watchers.strategies.http_body import json_or_text
from sentinel_hooks.watchers.strategies.http_request import observe_failure
from sentinel_hooks.watchers.strategies.sse_parser import SseParser, SseTooLarge
from sentinel_hooks.watchers.strategy import Observed, ObserveError, StrategyContext, TransientObserveError

IDLE_TIMEOUT_S = 300.0
EVENT_STREAM = "text/event-stream"


class SseStrategy:
    """Reads one event stream per ``stream()`` call; keeps ``last_event_id`` across calls."""

    def __init__(
        self, watcher: SseWatcher, context: StrategyContext, *, idle_timeout_s: float = IDLE_TIMEOUT_S
    ):
        self.watcher = watcher
        self.context = context
        self.idle_timeout_s = idle_timeout_s
        self.last_event_id = ""
        self.retry_ms: int | None = None
        self._types = None if watcher.event_types is None else frozenset(watcher.event_types)

    def _where(self) -> str:
        return self.context.redactor.text(f"GET {self.watcher.endpoint}")

    def _headers(self) -> dict[str, str]:
        headers = {**self.watcher.headers, "Accept": EVENT_STREAM, "Cache-Control": "no-cache"}
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        return headers

    def _check(self, response: aiohttp.ClientResponse) -> None:
        if response.status == 204:
            raise ObserveError(f"{self._where()}: 204 No Content (the server closed the stream)")
        if not 200 <= response.status < 300:
            hint = parse_retry_after(response.headers.get("Retry-After"), now=self.context.clock.now())
            error = status_error(response.status, retry_after_s=hint)
            raise observe_failure(error.for_request("GET", self.watcher.endpoint), self.context.redactor)
        kind = media_type(response.headers.get("Content-Type"))
        if kind != EVENT_STREAM:
            raise ObserveError(f"{self._where()}: Content-Type is {kind!r}, not {EVENT_STREAM}")

    def _ended(self, reason: str) -> TransientObserveError:
        hint = None if self.retry_ms is None else self.retry_ms / 1000
        return TransientObserveError(f"{self._where()}: {reason}", retry_after_s=hint)

    async def stream(self) -> AsyncIterator[Observed]:
        """Observations until the stream ends or fails (then ``ObserveError``)."""
        parser = SseParser(max_chars=self.context.limits.max_response_bytes, last_event_id=self.last_event_id)
        http = self.context.http
        try:
            async with http.stream(
                "GET", self.watcher.endpoint, headers=self._headers(), idle_timeout_s=self.idle_timeout_s
            ) as response:
                self._check(response)
                async for chunk in response.content.iter_any():
                    events = parser.feed(chunk)
                    self.retry_ms = parser.retry_ms if parser.retry_ms is not None else self.retry_ms
                    for event in events:
                        self.last_event_id = event.id
                        if self._types is None or event.type in self._types:
                            yield Observed(value=json_or_text(event.data), at=self.context.clock.now())
                    self.last_event_id = parser.last_event_id
        except NetError as exc:
            raise observe_failure(exc, self.context.redactor) from exc
        except SseTooLarge as exc:
            raise self._ended(f"{exc} (limits.maxResponseBytes)") from exc
        raise self._ended("the server closed the event stream")

    async def close(self) -> None:
        """Nothing to release: each ``stream()`` closes its own connection."""


def create(watcher: SseWatcher, context: StrategyContext) -> SseStrategy:
    """The subscription strategy for an ``sse`` watcher."""
    return SseStrategy(watcher, context)
