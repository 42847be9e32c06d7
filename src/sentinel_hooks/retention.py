"""Retention (SPEC.md §18): the background pruner that keeps the store from growing for ever.

Every ``interval_s`` (the first pass shortly after start) ``Pruner`` turns the ``retention``
settings and the clock into cutoffs and calls ``Store.prune`` in steps of ``batch`` records, with
a pause between steps, until a step finds nothing more. A step is one short SQLite transaction
or one Redis script, so polls, the relay and the outbox go on in between. With Redis every
replica prunes: a step re-checks each record, so racing replicas cost a few empty steps, never
a record deleted twice. A failed pass is logged and tried again at the next interval.

Observations are not pruned here: each watcher's history is trimmed to
``observationsPerWatcher`` as it is written (``history_keep``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

from sentinel_hooks.background import BackgroundTask
from sentinel_hooks.callbacks.intake.intake import message_key
from sentinel_hooks.callbacks.sessions.memory import memory_key
from sentinel_hooks.callbacks.sessions.progress import progress_key
from sentinel_hooks.clock import Clock
from sentinel_hooks.config.service import RetentionSpec
from sentinel_hooks.config.targets import PagerDutyTargetSpec, SlackTargetSpec, TargetSpec
from sentinel_hooks.delivery.targets.pagerduty import resolved_prefix
from sentinel_hooks.delivery.targets.slack_threads import thread_prefix
from sentinel_hooks.metrics import Metrics
from sentinel_hooks.outages import Outage
from sentinel_hooks.relay.relay import escalation_key, stop_key
from sentinel_hooks.store.base import AuditStore, RetentionStore
from sentinel_hooks.store.pruning import PruneBefore, Pruned

log = logging.getLogger(__name__)

INTERVAL_S = 600.0  # between passes
FIRST_PASS_S = 30.0  # after start: the service settles first
BATCH = 500  # records of each kind per step
PAUSE_S = 0.05  # between steps
UNBOUNDED_HISTORY = 2**62  # ``observationsPerWatcher: 0``: a ``keep`` no history reaches

CALLBACK_CHECKPOINTS = (progress_key(""), message_key(""), escalation_key(""), stop_key(""))
"""Checkpoints named after a callback (its session's progress, rendered message, escalation, why
its session stopped before any page)."""
SESSION_CHECKPOINTS = (memory_key(""),)
"""Checkpoints named after a session (its memory of earlier callbacks)."""


def target_checkpoints(targets: Mapping[str, TargetSpec]) -> tuple[str, ...]:
    """Checkpoints that targets name after a callback: each bot-token Slack target's threads, each
    PagerDuty target's resolved dedup_keys."""
    threads = tuple(
        thread_prefix(name)
        for name, spec in targets.items()
        if isinstance(spec, SlackTargetSpec) and spec.token is not None
    )
    resolved = tuple(
        resolved_prefix(name) for name, spec in targets.items() if isinstance(spec, PagerDutyTargetSpec)
    )
    return threads + resolved


def history_keep(spec: RetentionSpec) -> int:
    """Observations kept per watcher (the stores trim each history to this as it grows)."""
    return spec.observations_per_watcher or UNBOUNDED_HISTORY


@dataclass(frozen=True)
class Ages:
    """How old settled records may get (None: kept for ever)."""

    callbacks: timedelta | None = None
    inbox: timedelta | None = None
    sessions: timedelta | None = None
    audit: timedelta | None = None  # audit rows (SPEC §21: retention.auditDays)

    @classmethod
    def from_spec(cls, spec: RetentionSpec) -> Ages:
        def days(n: int) -> timedelta | None:
            return timedelta(days=n) if n else None

        return cls(
            days(spec.callbacks_days),
            days(spec.inbox_closed_days),
            days(spec.transcripts_days),
            days(spec.audit_days),
        )

    def cutoffs(self, now: datetime, *, callback_checkpoints: Sequence[str] = ()) -> PruneBefore:
        """What a pass at ``now`` may delete (``callback_checkpoints``: more prefixes of
        checkpoints named after a callback, which go with it)."""

        def before(age: timedelta | None) -> datetime | None:
            return None if age is None else now - age

        return PruneBefore(
            callbacks=before(self.callbacks),
            inbox=before(self.inbox),
            sessions=before(self.sessions),
            silences=before(self.callbacks),  # a silence is kept as long as the callbacks it muted
            callback_checkpoints=(*CALLBACK_CHECKPOINTS, *callback_checkpoints),
            session_checkpoints=SESSION_CHECKPOINTS,
        )


class PrunedStore(RetentionStore, AuditStore, Protocol):
    """What the pruner deletes from: settled work, and audit rows past ``auditDays``."""


@dataclass(frozen=True)
class Pruning:
    """What a service's pruner deletes (``ages``) and how often it looks."""

    ages: Ages
    interval_s: float = INTERVAL_S
    first_pass_s: float = FIRST_PASS_S


class Pruner:
    """Runs retention passes in the background (``start``/``stop``) or on demand (``prune``)."""

    def __init__(
        self,
        store: PrunedStore,
        clock: Clock,
        ages: Ages,
        *,
        metrics: Metrics | None = None,
        interval_s: float = INTERVAL_S,
        first_pass_s: float = FIRST_PASS_S,
        batch: int = BATCH,
        pause_s: float = PAUSE_S,
        callback_checkpoints: Sequence[str] = (),
    ) -> None:
        """``callback_checkpoints``: prefixes of the checkpoints targets name after a callback
        (``target_checkpoints``), deleted with it."""
        self._callback_checkpoints = tuple(callback_checkpoints)
        self._store = store
        self._clock = clock
        self._ages = ages
        self._metrics = metrics
        self._interval_s = interval_s
        self._first_pass_s = first_pass_s
        self._batch = batch
        self._pause_s = pause_s
        self._loop = BackgroundTask()
        self._passes = Outage(log, "retention pass", clock=clock)

    @property
    def enabled(self) -> bool:
        return Ages() != self._ages

    async def prune(self) -> Pruned:
        """One pass: steps until nothing is left to delete; what the pass deleted."""
        before = self._ages.cutoffs(self._clock.now(), callback_checkpoints=self._callback_checkpoints)
        total = Pruned()
        while True:
            step = await self._store.prune(before, limit=self._batch)
            total += step
            if self._metrics is not None:
                for kind, count in step.counts().items():
                    if count:
                        self._metrics.pruned.labels(kind).inc(count)
            if not step.more:
                await self._prune_audit()
                return replace(total, more=False)
            await asyncio.sleep(self._pause_s)  # polls and the relay run between steps

    async def _prune_audit(self) -> int:
        """Delete audit rows older than ``auditDays``, a batch a step; how many went."""
        if self._ages.audit is None:
            return 0
        before, deleted = self._clock.now() - self._ages.audit, 0
        while True:
            step = await self._store.prune_audit(before, limit=self._batch)
            deleted += step
            if self._metrics is not None and step:
                self._metrics.pruned.labels("audit").inc(step)
            if step < self._batch:
                if deleted:
                    log.info("retention: pruned %d audit rows", deleted)
                return deleted
            await asyncio.sleep(self._pause_s)

    def start(self) -> None:
        """Prune every ``interval_s`` from ``first_pass_s`` on (nothing when every limit is 0)."""
        if self.enabled:
            self._loop.start(self._run)

    async def stop(self) -> None:
        await self._loop.stop()

    async def _run(self) -> None:
        await asyncio.sleep(self._first_pass_s)
        while True:
            try:
                done = await self.prune()
            except Exception as exc:  # a store outage: the next pass tries again
                self._passes.failed(exc)
            else:
                self._passes.succeeded()
                if any(done.counts().values()):
                    log.info("retention: pruned %s", ", ".join(f"{n} {k}" for k, n in done.counts().items()))
            await asyncio.sleep(self._interval_s)
