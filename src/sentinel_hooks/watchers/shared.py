"""What every watcher runner shares (``WatcherRunner`` in ``runner``): the store roles, clock,
firing pipeline, scheduler and the rest of ``RunnerDeps``, the outages logged once for all of
them, and the vocabulary of cluster mode's fencing (``Fence`` and why an observation is dropped).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from sentinel_hooks.clock import Clock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.metrics import Metrics
from sentinel_hooks.outages import Outage
from sentinel_hooks.store.base import ContractStore, WatcherStore
from sentinel_hooks.watchers.alerts import AlertStreams
from sentinel_hooks.watchers.pipeline import FiringPipeline
from sentinel_hooks.watchers.strategy import StrategyContext
from sentinel_hooks.watchers.writeback import WatcherWrites

log = logging.getLogger("sentinel_hooks.watchers.runner")  # the runners' outages: lines of the runners'

Fence = Callable[[], Awaitable[bool]]
"""Cluster mode: True while this replica still holds the watcher's lease (raises when unsure)."""

LEASE_LOST = "lease_lost"  # dropped: another replica runs the watcher now (or will at its next tick)
LEASE_UNKNOWN = "lease_unknown"  # dropped: this replica could not confirm its lease in time
NOT_LEASED = "lease not held by this replica"  # Outcome.skipped of an observation dropped so


class RunnerRoles(WatcherStore, ContractStore, Protocol):
    """The store roles runners and their manager call: watchers' state and history, and the
    callbacks an alert stream looks up (``AlertStreams``, when the service gave none)."""


@dataclass(frozen=True)
class RunnerDeps:
    """What every runner shares with the others."""

    store: RunnerRoles
    clock: Clock
    pipeline: FiringPipeline
    context: StrategyContext
    metrics: Metrics
    scheduler: AsyncIOScheduler
    redactor: Redactor
    rng: random.Random
    writes: WatcherWrites | None = None  # batches state writes (None: one store call each)
    alerts: AlertStreams | None = None  # format: alertmanager (None: alerts resolve in the log only)

    @cached_property
    def unrecorded(self) -> Outage:
        """The runners' store failures, logged as one run (``outages``), not a line per watcher:
        each watcher's own is on its status (``lastError``) and at DEBUG."""
        return Outage(log, "recording what watchers observe", clock=self.clock)

    @cached_property
    def unfenced(self) -> Outage:
        """The runners' lease checks that could not tell (Redis away), logged as one run."""
        return Outage(log, "checking watcher leases", clock=self.clock)
