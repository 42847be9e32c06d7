"""The plug-in point for watcher strategies: a small Protocol per kind and a registry.

A strategy turns an endpoint into observations. It tries once and raises ``ObserveError``,
or ``TransientObserveError`` (with an optional ``retry_after_s`` hint) when trying again may
help; the runner owns scheduling, retries with backoff, status, and the firing pipeline.

- ``PollStrategy`` (http-poll, http-long-poll, command, evm-call): ``poll()`` takes one
  observation. The runner calls it on the watcher's schedule (long-poll: again at once),
  never while the previous call still runs.
- ``SubscribeStrategy`` (sse, websocket, redis-pubsub, redis-stream): ``stream()`` yields
  observations until the connection fails (raise ``ObserveError``) or the task is
  cancelled. The runner calls ``stream()`` again after a backoff; state needed to resume
  (SSE Last-Event-ID, stream position) lives on the strategy object between calls.
- ``webhook`` has no strategy: the API's ingest route feeds the pipeline directly.

Every strategy is exactly one of the two kinds, stamps observations with the context's clock,
lets go of its source (connection, subscription, probe process) when a call is cancelled, and
``close()`` may come before any use and twice. Each strategy module exposes
``create(watcher, context) -> PollStrategy | SubscribeStrategy`` and is listed in ``MODULES``;
tests/contract/test_strategies.py runs the contract against each, and against the fakes that
ship for tests, ``ScriptedPoll`` and ``ScriptedSubscription`` (``strategies/scripted.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, runtime_checkable

from sentinel_hooks.clock import Clock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import LimitsSpec
from sentinel_hooks.errors import SentinelError, TransientError

if TYPE_CHECKING:
    from sentinel_hooks.config.watcher import AnyWatcher
    from sentinel_hooks.net.client import SafeHttp
    from sentinel_hooks.watchers.strategies.probe_state import ProbeOutcome, ProbeTrigger


class ObserveError(SentinelError):
    """Taking an observation failed, and will fail alike until something changes (the config,
    the source's setup); ``TransientObserveError`` when the source may answer next time."""


class TransientObserveError(ObserveError, TransientError):
    """Taking an observation failed in a way that may pass; the runner tries again with backoff,
    waiting at least ``retry_after_s`` when the source asked for it."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def observe_error(message: str, *, like: BaseException) -> ObserveError:
    """The ``ObserveError`` reporting ``like`` as ``message``: transient (keeping its Retry-After
    hint) when ``like`` is."""
    if isinstance(like, TransientError):
        return TransientObserveError(message, retry_after_s=like.retry_after_s)
    return ObserveError(message)


class NoObservation(TransientObserveError):
    """Nothing to observe this time (a long-poll hold ran out): ask again at once; not a failure."""

    def __init__(self, message: str = "no observation this time") -> None:
        super().__init__(message)
        self.quiet = True


class PollSkipped(ObserveError):
    """The poll could not start in time (e.g. no free request slot): skipped and counted, not a failure.

    ``reason`` labels the ``sentinel_polls_skipped`` metric. The watcher polls again at its next run.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Observed:
    """One observation: JSON ``value`` seen at ``at``.

    ``probe`` is what a `command` probe run amounted to (its report, or its error) and
    ``trigger`` the kind it asks for (``terminal``, ``no_progress``) on every run while it
    lasts; the pipeline fires that whatever the conditions, once per episode (``episodes``).
    ``ack`` is awaited once the observation is stored (redis-stream acks then, so a crash
    before storing redelivers it).
    """

    value: Any
    at: datetime
    trigger: ProbeTrigger | None = None
    probe: ProbeOutcome | None = None
    ack: Callable[[], Awaitable[None]] | None = field(default=None, compare=False)


@runtime_checkable
class PollStrategy(Protocol):
    """Takes one observation when asked."""

    async def poll(self) -> Observed: ...

    async def close(self) -> None: ...


@runtime_checkable
class SubscribeStrategy(Protocol):
    """Yields observations from a long-lived connection until it fails or is cancelled."""

    def stream(self) -> AsyncIterator[Observed]: ...

    async def close(self) -> None: ...


Strategy = PollStrategy | SubscribeStrategy

_POLLS_BY_TYPE: dict[type, bool] = {}


def polls(strategy: Strategy) -> TypeGuard[PollStrategy]:
    """Whether ``strategy`` is a ``PollStrategy``, decided once per class.

    ``isinstance`` against a runtime-checkable protocol inspects the protocol's members on every
    call (about 10 µs): a tenth of starting a watcher, a million times at start.
    """
    kind = type(strategy)
    known = _POLLS_BY_TYPE.get(kind)
    if known is None:
        known = _POLLS_BY_TYPE[kind] = isinstance(strategy, PollStrategy)
    return known


@dataclass(frozen=True)
class StrategyContext:
    """What a strategy may use: the one safe HTTP client, the clock, limits and the project dir."""

    http: SafeHttp
    clock: Clock
    limits: LimitsSpec
    base_dir: Path
    redactor: Redactor = field(default_factory=Redactor)


class StrategyFactory(Protocol):
    def __call__(self, watcher: AnyWatcher, context: StrategyContext) -> Strategy: ...


MODULES: dict[str, str] = {
    "http-poll": "sentinel_hooks.watchers.strategies.http_poll",
    "http-long-poll": "sentinel_hooks.watchers.strategies.http_long_poll",
    "sse": "sentinel_hooks.watchers.strategies.sse",
    "websocket": "sentinel_hooks.watchers.strategies.websocket",
    "redis-pubsub": "sentinel_hooks.watchers.strategies.redis_pubsub",
    "redis-stream": "sentinel_hooks.watchers.strategies.redis_stream",
    "command": "sentinel_hooks.watchers.strategies.command",
    "evm-call": "sentinel_hooks.watchers.strategies.evm_call",
}


def create_strategy(watcher: AnyWatcher, context: StrategyContext) -> Strategy:
    """The strategy for ``watcher`` (imported on first use, so unused strategies cost nothing)."""
    module_name = MODULES.get(watcher.strategy_name)
    if module_name is None:
        raise SentinelError(f"strategy {watcher.strategy_name!r} has no runner (it is fed by the API)")
    factory: StrategyFactory = importlib.import_module(module_name).create
    return factory(watcher, context)
