"""Sentinel's exception tree.

Adapters translate foreign exceptions (``sqlite3.Error``, ``redis.RedisError``,
``jinja2.TemplateError``, ``aiohttp.ClientError``) into these with ``raise … from exc``,
so the surfaces (the CLI's ``main()``, the API's error middleware) render every failure
in one place and never show a traceback.

Whether trying again may help is told by type: a failure that may pass by itself (a network
failure, a 429 or 5xx answer, a model's rate limit or timeout, a store out of reach) is a
``TransientError``; anything else fails alike until something changes. Adapters try once and
raise; only the orchestrators retry, and they catch by type (``core.retry`` says how long they
wait). Each stage keeps its own error family next to its Protocol, with a transient twin that
is also a ``TransientError``::

    SentinelError
    ├── TransientError        may pass by itself; retry_after_s: how long the other side asked us to wait
    ├── ConfigError           invalid sentinel.yaml / watcher / skill files (holds every ConfigIssue)
    ├── TemplateError         a template that cannot be parsed or rendered (names template and variable)
    ├── StoreError            the store failed an operation
    │   └── StoreUnavailable  the store cannot be reached or opened (transient)
    ├── NotFound              a watcher, callback, inbox item … that does not exist
    ├── Conflict              the request conflicts with the current state (e.g. an id in use)
    │   └── CallbackExists    a callback id that is already taken (names the callback and its state)
    ├── NetError              an outbound request failed (net/errors.py draws its subtree)
    │   ├── ConnectionFailed        DNS, connect, reset, protocol (transient)
    │   ├── RequestTimeout          no complete answer in time (transient)
    │   └── HttpStatusError         a non-2xx answer
    │       └── TransientHttpStatusError  5xx, 408, 425, 429 (transient)
    ├── ObserveError          a watcher's observation failed (watchers/strategy.py)
    │   ├── TransientObserveError   the source may answer next time (transient)
    │   │   └── NoObservation       a long-poll hold ran out: ask again at once, not a failure
    │   └── PollSkipped             the poll could not start in time: counted, not retried
    ├── DeliveryError         a target did not take a message (delivery/targets/base.py)
    │   └── TransientDeliveryError  network failure, 5xx, 408, 429, a busy disk (transient)
    └── ModelError            a model request failed (callbacks/backends/base.py)
        └── TransientModelError     timeout, connection failure, 408, 409, 429, 5xx (transient)

"(transient)" marks the classes that also derive from ``TransientError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


class SentinelError(Exception):
    """Base of every error Sentinel raises on purpose.

    ``retryable`` mirrors the type (True for a ``TransientError``), for messages and tests;
    code that decides whether to try again catches or checks the type.
    """

    retryable: ClassVar[bool] = False


class TransientError(SentinelError):
    """A failure that may pass by itself: the same call, tried again later, may succeed.

    ``retry_after_s`` is how long the other side asked us to wait (a ``Retry-After`` header, an
    SSE ``retry:`` field), None when it did not say. A subclass sets it in its ``__init__``.
    """

    retryable: ClassVar[bool] = True
    retry_after_s: float | None = None


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in one file, printed as ``file:line: key.path: message``."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class ConfigError(SentinelError):
    """The configuration is invalid; ``issues`` lists every problem found, in file order."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(issue) for issue in issues))


class TemplateError(SentinelError):
    """A template failed to parse (at load) or to render (at fire time)."""

    def __init__(self, message: str, *, template: str, variable: str | None = None) -> None:
        self.template = template
        self.variable = variable
        self.reason = message
        shown = template if len(template) <= 120 else template[:117] + "..."
        super().__init__(f"{message} in template {shown!r}")


class StoreError(SentinelError):
    """A store operation failed."""


class StoreUnavailable(StoreError, TransientError):
    """The store cannot be opened or reached (bad URL, server down, unwritable file).

    Transient: a server comes back and a disk frees up (the API answers 503, cluster clients
    try their first command again); a bad URL fails alike every time, and is reported as such.
    """


class NotFound(SentinelError):
    """The named object does not exist."""


class Conflict(SentinelError):
    """The request conflicts with the current state (an id in use, a file-defined watcher …)."""


class CallbackExists(Conflict):
    """A new callback names an id that is already taken; ``state`` is that callback's state
    (None when it was removed in the meantime)."""

    def __init__(self, callback_id: str, state: str | None) -> None:
        self.callback_id = callback_id
        self.state = state
        super().__init__(
            f"callback {callback_id!r} already exists (state {state}); send a new callbackId, or "
            f"GET /api/v1/callbacks/{callback_id} to follow the one there is"
        )
