"""Each alert of a format: alertmanager watcher is its own stream (watchers/alerts.py), tried hard.

Random sequences of notifications (alerts firing, repeating, resolving, firing again, arriving
in any order) are fed to the real pipeline over a real SQLite store, and compared with a model
of the guarantee: an alert (fingerprint + startsAt) that matches fires exactly once, however
often it is sent; a resolved alert reaches exactly the fire it ends, and only one that fired.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sentinel_hooks.callbacks.intake.intake import CallbackIntake, LoggingSink
from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import WATCHER_ADAPTER, AnyWatcher
from sentinel_hooks.core.alertmanager import alert_callback_id
from sentinel_hooks.store.sqlite import SqliteStore
from sentinel_hooks.watchers.alerts import AlertStreams
from sentinel_hooks.watchers.pipeline import FiringPipeline
from sentinel_hooks.watchers.state import WatcherState
from sentinel_hooks.watchers.strategy import Observed

WATCHER = WATCHER_ADAPTER.validate_python(
    {
        "id": "am",
        "strategy": "webhook",
        "format": "alertmanager",
        "conditions": [{"path": "labels.severity", "op": "eq", "value": "critical"}],
        "deliveryTargets": ["console"],
    }
)
INSTANCES = ("web-1", "web-2", "db-1")  # db-1 is a warning: it never matches
STARTS = ("2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z")


def alert(instance: str, status: str, start: int, note: int) -> dict[str, Any]:
    severity = "warning" if instance == "db-1" else "critical"
    return {
        "status": status,
        "labels": {"alertname": "HighLoad", "instance": instance, "severity": severity},
        "annotations": {"value": str(note)},  # changes between sends; the alert stays the same
        "startsAt": STARTS[start],
        "endsAt": "2026-03-01T12:00:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
        "fingerprint": f"fp-{instance}",
    }


@dataclass
class Replica:
    """One service's alert streams over a shared store; records its resolved lines."""

    store: SqliteStore
    clock: FakeClock
    resolved: list[str | None] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    state: WatcherState = field(default_factory=WatcherState)

    def __post_init__(self) -> None:
        config = ServiceConfig()
        intake = CallbackIntake(store=self.store, clock=self.clock, service=config, sink=LoggingSink())
        pipeline = FiringPipeline(
            store=self.store,
            clock=self.clock,
            service=config,
            intake=intake,
            base_dir=Path("."),
            redactor=Redactor(),
        )
        self.streams = AlertStreams(
            store=self.store, pipeline=pipeline, on_resolved=self._resolved, resolve_items=self._close
        )

    async def _resolved(self, watcher: AnyWatcher, text: str, callback_id: str | None) -> None:
        self.resolved.append(callback_id)

    async def _close(self, callback_id: str) -> list[Any]:
        self.closed.append(callback_id)
        return []

    async def push(self, value: dict[str, Any]) -> bool:
        """One alert observed; whether it fired."""
        self.clock.advance(1)
        outcome = await self.streams.observe(WATCHER, Observed(value=value, at=self.clock.now()), self.state)
        self.state = outcome.state
        return outcome.fired


SENDS = st.lists(
    st.tuples(
        st.sampled_from(INSTANCES),
        st.sampled_from(("firing", "firing", "resolved")),
        st.integers(0, len(STARTS) - 1),
        st.integers(0, 3),
    ),
    max_size=30,
)


async def _run(sends: list[tuple[str, str, int, int]]) -> None:
    store = SqliteStore.in_memory()
    await store.open()
    try:
        replica = Replica(store, FakeClock())
        fired: set[tuple[str, int]] = set()
        expected_resolved: list[str | None] = []
        for instance, status, start, note in sends:
            value = alert(instance, status, start, note)
            identity = (instance, start)
            should_fire = status == "firing" and instance != "db-1" and identity not in fired
            if status == "resolved" and identity in fired:
                expected_resolved.append(alert_callback_id("am", value))
            assert should_fire == await replica.push(value), (instance, status, start)
            if should_fire:
                fired.add(identity)
        contracts = (await store.list_contracts(watcher_id="am", limit=100)).items
        expected_ids = {alert_callback_id("am", alert(i, "firing", s, 0)) for i, s in fired}
        assert expected_ids == {c.callback_id for c in contracts}
        assert (expected_resolved, expected_resolved) == (replica.resolved, replica.closed)
        assert len(fired) == replica.state.fires
    finally:
        await store.close()


@settings(max_examples=80, deadline=None)
@given(sends=SENDS)
def test_each_alert_fires_once_and_resolves_its_own_fire(sends: list[tuple[str, str, int, int]]) -> None:
    """Whatever the order and repetition of sends, fires and resolved lines match the model."""
    asyncio.run(_run(sends))


async def test_two_replicas_taking_the_same_alert_at_once_fire_it_once(memory_store: SqliteStore) -> None:
    """Two services sharing a store receive the same new alert concurrently (Alertmanager in HA
    sends from each peer): one fire in all; the other sees a repeat."""
    clock = FakeClock()
    replicas = [Replica(memory_store, clock), Replica(memory_store, clock)]
    for round_ in range(5):
        value = alert("web-1", "firing", 0, round_) | {"fingerprint": f"fp-{round_}"}
        results = await asyncio.gather(*(replica.push(value) for replica in replicas))
        assert [False, True] == sorted(results), round_
    contracts = (await memory_store.list_contracts(watcher_id="am")).items
    assert 5 == len(contracts)
