"""What the HTTP strategies share: sending the watcher's request and reporting failures.

Every request goes through the service's one ``SafeHttp`` (allowlist, private addresses,
no redirects, byte limit). A ``NetError`` becomes an ``ObserveError``, transient when it was
(keeping its ``retry_after_s`` hint), with its message redacted (headers and URLs may hold
secrets from the environment).
"""

from __future__ import annotations

from typing import Any

from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.watcher import HttpLongPollWatcher, HttpPollWatcher
from sentinel_hooks.net.errors import NetError, NoSlot
from sentinel_hooks.net.response import HttpResponse, raise_for_status
from sentinel_hooks.watchers.strategies.http_body import body_observation
from sentinel_hooks.watchers.strategy import ObserveError, PollSkipped, StrategyContext, observe_error


def observe_failure(exc: NetError, redactor: Redactor) -> ObserveError:
    """The ``ObserveError`` reporting ``exc`` (message redacted, hints kept); ``NoSlot`` is a skip."""
    if isinstance(exc, NoSlot):
        return PollSkipped(redactor.text(str(exc)), reason="no_slot")
    return observe_error(redactor.text(str(exc)), like=exc)


async def send(
    watcher: HttpPollWatcher | HttpLongPollWatcher,
    context: StrategyContext,
    *,
    timeout_s: float,
    start_within_s: float | None = None,
) -> HttpResponse:
    """The watcher's request (a string body as-is, an object or list as JSON), answered in full.

    ``start_within_s``: how long it may wait for a request slot (``NoSlot`` after that).
    """
    body = watcher.body
    payload: dict[str, Any] = {"data": body} if isinstance(body, str) else {"json": body}
    return await context.http.request(
        watcher.method,
        watcher.endpoint,
        headers=watcher.headers,
        timeout_s=timeout_s,
        max_bytes=context.limits.max_response_bytes,
        start_within_s=start_within_s,
        **payload,
    )


def observed_value(response: HttpResponse, redactor: Redactor) -> Any:
    """The value a 2xx answer shows; ``ObserveError`` for other statuses or unparsable labelled JSON."""
    try:
        raise_for_status(response)
    except NetError as exc:
        raise observe_failure(exc, redactor) from exc
    try:
        return body_observation(response.body, response.content_type, response.charset)
    except ObserveError as exc:
        where = redactor.text(f"{response.method} {response.url}")
        raise observe_error(f"{where}: {exc}", like=exc) from exc
