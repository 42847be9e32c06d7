"""The ``websocket`` strategy (SPEC.md §3): JSON messages from a WebSocket.

Connects through ``SafeHttp.ws_connect`` (same host rules, messages capped at
``limits.maxResponseBytes``), sends ``subscribeMessage`` once connected (an object as JSON
text, a string as-is), and keeps the connection checked with ping/pong heartbeats. Each
text message is one observation (JSON, or ``{"text": …}`` when it is not JSON); binary
messages are ignored. A close, an error or a missed pong raises ``ObserveError`` and the
runner reconnects with backoff.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from sentinel_hooks.config.watcher import WebSocketWatcher
from sentinel_hooks.net.client import WebSocket
from sentinel_hooks.net.errors import NetError
from sentinel_hooks.net.translate import TRANSLATED, translate
from sentinel_hooks.watchers.strategies.http_body import NotJson, parse_json
from sentinel_hooks.watchers.strategies.http_request import observe_failure
from sentinel_hooks.watchers.strategy import Observed, StrategyContext, TransientObserveError

HEARTBEAT_S = 30.0


def message_value(text: str) -> Any:
    """The observation for a text message: its JSON value, or ``{"text": text}``."""
    try:
        return parse_json(text)
    except NotJson:
        return {"text": text}


def subscribe_text(message: Any) -> str:
    """``subscribeMessage`` as sent: a string as-is, anything else as JSON."""
    return message if isinstance(message, str) else json.dumps(message, ensure_ascii=False)


class WebSocketStrategy:
    """One WebSocket connection per ``stream()`` call."""

    def __init__(
        self, watcher: WebSocketWatcher, context: StrategyContext, *, heartbeat_s: float = HEARTBEAT_S
    ) -> None:
        self.watcher = watcher
        self.context = context
        self.heartbeat_s = heartbeat_s

    def _failure(self, reason: str) -> TransientObserveError:
        return TransientObserveError(self.context.redactor.text(f"GET {self.watcher.endpoint}: {reason}"))

    async def stream(self) -> AsyncIterator[Observed]:
        """Observations until the socket closes or fails (then ``ObserveError``)."""
        try:
            ws = await self.context.http.ws_connect(
                self.watcher.endpoint,
                headers=self.watcher.headers,
                heartbeat_s=self.heartbeat_s,
                max_bytes=self.context.limits.max_response_bytes,
            )
        except NetError as exc:
            raise observe_failure(exc, self.context.redactor) from exc
        try:
            async for message in self._messages(ws):
                yield Observed(value=message_value(message), at=self.context.clock.now())
        finally:
            await ws.close()

    async def _messages(self, ws: WebSocket) -> AsyncIterator[str]:
        try:
            if self.watcher.subscribe_message is not None:
                await ws.send_str(subscribe_text(self.watcher.subscribe_message))
            async for message in ws:
                if message.type == aiohttp.WSMsgType.TEXT:
                    yield message.data
                elif message.type == aiohttp.WSMsgType.ERROR:
                    raise self._failure(f"WebSocket failed: {ws.exception() or message.data}")
        except TRANSLATED as exc:
            failure = translate(exc).for_request("GET", self.watcher.endpoint)
            raise observe_failure(failure, self.context.redactor) from exc
        problem = ws.exception()
        if problem is not None:
            raise self._failure(f"WebSocket failed: {problem}")
        raise self._failure(f"the server closed the WebSocket (code {ws.close_code})")

    async def close(self) -> None:
        """Nothing to release: each ``stream()`` closes its own socket."""


def create(watcher: WebSocketWatcher, context: StrategyContext) -> WebSocketStrategy:
    """The subscription strategy for a ``websocket`` watcher."""
    return WebSocketStrategy(watcher, context)
