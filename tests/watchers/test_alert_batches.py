"""A grouped watcher's notifications, tried hard (watchers/alerts.py ``judge_together`` and the
members written out, watchers/written.py).

Random notifications of alerts (several alerts at once, repeats in and across notifications,
resolutions, groups filling at a small ``maxFires``) go through the alert streams as
``WatcherRunner.ingest_alerts`` takes them, over a real SQLite store, and are compared with a
model: each alert (fingerprint + startsAt) that matches fires once however often it comes, by
opening a group or as a member of one; every fire is in exactly one group, whose count holds it;
the watcher counts each fire once; a resolved alert reaches exactly the fire it ends.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.watcher import WATCHER_ADAPTER
from sentinel_hooks.core.alertmanager import alert_callback_id
from sentinel_hooks.core.paths import MISSING
from sentinel_hooks.errors import StoreError
from sentinel_hooks.store.sqlite import SqliteStore
from sentinel_hooks.store.sqlite.worker import IN_MEMORY
from sentinel_hooks.watchers.pipeline import Outcome
from sentinel_hooks.watchers.strategy import Observed
from tests.watchers.test_alert_streams import WATCHER as UNGROUPED
from tests.watchers.test_alert_streams import Replica

GROUP = {"by": ["payload.labels.alertname"], "waitMs": 60000, "maxFires": 4}
WATCHER = WATCHER_ADAPTER.validate_python(  # test_alert_streams' watcher, grouped
    {**UNGROUPED.model_dump(mode="json", by_alias=True, exclude_unset=True), "fire": {"group": GROUP}}
)
INSTANCES = ("web-1", "web-2", "web-3", "db-1", "db-2", "db-3")  # db-3 is a warning: it never matches
NAMES = {"web": "HighLoad", "db": "DiskFull"}
STARTS = ("2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z")


def alert(instance: str, status: str, start: int) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {
            "alertname": NAMES[instance.split("-")[0]],
            "instance": instance,
            "severity": "warning" if instance == "db-3" else "critical",
        },
        "annotations": {},
        "startsAt": STARTS[start],
        "endsAt": "0001-01-01T00:00:00Z",
        "fingerprint": f"fp-{instance}",
    }


class Streams(Replica):
    """One service's alert streams over a store (``test_alert_streams.Replica``), taking whole
    notifications."""

    async def notification(self, values: list[dict[str, Any]]) -> list[Outcome]:
        """One notification's alerts, as ``WatcherRunner.ingest_alerts`` takes them."""
        self.clock.advance(1)
        observed = [Observed(value=value, at=self.clock.now()) for value in values]
        ids = self.streams.callback_ids(WATCHER.id, observed)
        if self.streams.independent(WATCHER, ids):
            outcomes, self.state, error = await self.streams.judge_together(
                WATCHER, observed, self.state, previous=MISSING, callback_ids=ids
            )
            assert error is None
            return outcomes
        known = await self.streams.callbacks(ids)
        outcomes = []
        for item in observed:
            outcome = await self.streams.judge(WATCHER, item, self.state, previous=MISSING, known=known)
            self.state = outcome.state
            outcomes.append(outcome)
        return outcomes


def took(outcome: Outcome) -> bool:
    """Whether the alert's fire was stored: a group opened, or a member (written out or whole)."""
    stored = outcome.contract is not None and outcome.contract.state in ("pending", "grouped")
    return stored or outcome.joined is not None


SEND = st.tuples(
    st.sampled_from(INSTANCES), st.sampled_from(("firing", "firing", "resolved")), st.integers(0, 1)
)
NOTIFICATIONS = st.lists(st.lists(SEND, min_size=1, max_size=6), max_size=12)


async def _run(notifications: list[list[tuple[str, str, int]]]) -> None:
    store = SqliteStore.in_memory()
    await store.open()
    try:
        streams = Streams(store, FakeClock())
        fired: set[tuple[str, int]] = set()
        expected_resolved: list[str | None] = []
        written = 0
        for sends in notifications:
            values = [alert(instance, status, start) for instance, status, start in sends]
            outcomes = await streams.notification(values)
            assert len(values) == len(outcomes)
            seen: set[tuple[str, int]] = set()  # this notification's identities, in order
            for (instance, status, start), value, outcome in zip(sends, values, outcomes, strict=True):
                identity = (instance, start)
                should = status == "firing" and instance != "db-3" and identity not in fired | seen
                if status == "resolved" and identity in fired | seen:
                    expected_resolved.append(alert_callback_id("am", value))
                assert should == took(outcome), (instance, status, start)
                if should:
                    seen.add(identity)
                written += outcome.joined is not None
            fired |= seen
        contracts = (await store.list_contracts(watcher_id="am", limit=500)).items
        expected = {alert_callback_id("am", alert(i, "firing", s)) for i, s in fired}
        assert expected == {c.callback_id for c in contracts}
        groups = [c for c in contracts if c.group is not None]
        members = [m for g in groups for m in g.group.members]
        assert sorted(expected) == sorted(members), "each fire in exactly one group"
        assert len(expected) == sum(g.group.fires for g in groups)
        assert {c.callback_id for c in contracts if c.group is None} == {
            m for g in groups for m in g.group.members[1:]
        }, "members are grouped contracts naming their group"
        assert all(c.group_id in {g.callback_id for g in groups} for c in contracts if c.group is None)
        assert len(fired) == streams.state.fires
        assert expected_resolved == streams.resolved
        WRITTEN.append(written)
    finally:
        await store.close()


WRITTEN: list[int] = []


@settings(max_examples=120, deadline=None)
@given(notifications=NOTIFICATIONS)
def test_each_alert_of_a_grouped_watcher_fires_once_in_one_group(
    notifications: list[list[tuple[str, str, int]]],
) -> None:
    """Whatever the notifications, fires, groups and resolved lines match the model."""
    asyncio.run(_run(notifications))


def test_the_runs_above_took_the_written_path() -> None:
    """A run that cannot fail when the members are never written out proves nothing: some joined
    that way (the examples above run first in this module)."""
    asyncio.run(_run([[("web-1", "firing", 0)], [("web-2", "firing", 0), ("web-3", "firing", 0)]]))
    assert WRITTEN[-1] == 2


def test_a_notification_that_fills_its_group_makes_only_each_group_s_first_fire_whole() -> None:
    """Six alerts of one key in one notification, groups full at four: the first opens a group
    (whole), three join it written out, the fifth finds it full and opens the next (whole), the
    sixth joins that one written out."""
    sends = [(instance, "firing", start) for start in (0, 1) for instance in ("web-1", "web-2", "web-3")]
    asyncio.run(_run([sends]))
    assert WRITTEN[-1] == 4


class FailsOnce(SqliteStore):
    """A real in-memory store whose first ``accept_contract`` fails as a store outage would."""

    failed = False

    async def accept_contract(self, *args: Any, **kwargs: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise StoreError("sqlite store :memory: accept contract failed: disk I/O error")
        return await super().accept_contract(*args, **kwargs)


async def _opener_fails() -> None:
    store = FailsOnce(IN_MEMORY)
    await store.open()
    try:
        streams = Streams(store, FakeClock())
        values = [alert(instance, "firing", 0) for instance in ("web-1", "web-2", "web-3")]
        observed = [Observed(value=value, at=streams.clock.now()) for value in values]
        ids = streams.streams.callback_ids(WATCHER.id, observed)
        outcomes, _, error = await streams.streams.judge_together(
            WATCHER, observed, streams.state, previous=MISSING, callback_ids=ids
        )
        assert isinstance(error, StoreError), "the opener's error is the notification's"
        assert 2 == sum(took(outcome) for outcome in outcomes), "the alerts after it are judged whole"
        ids = [alert_callback_id("am", value) for value in values]
        assert [None, True, True] == [await store.get_contract(i) and True for i in ids]
        again = await streams.notification(values)  # the source sends it again: nothing lost or doubled
        assert [True, False, False] == [took(outcome) for outcome in again]
        contracts = (await store.list_contracts(watcher_id="am", limit=10)).items
        group = next(c.group for c in contracts if c.group is not None)
        assert group is not None
        assert (sorted(ids), 3) == (sorted(group.members), group.fires)
    finally:
        await store.close()


def test_an_opener_that_fails_is_the_notification_s_error_and_the_resend_loses_nothing() -> None:
    """The first alert of a key fails to be stored: the error is answered (no 202), the alerts
    after it are stored whole, and the notification sent again stores the first as a member."""
    asyncio.run(_opener_fails())


def test_a_repeat_of_a_full_group_s_member_does_not_open_the_next_group() -> None:
    """The first alert of a notification that finds its key's group full is a repeat (it fired in
    that group): the next alert, new, opens the next group whole and the one after it joins that
    group written out, as if the repeat were not there."""
    fill = [("web-1", "firing", 0), ("web-2", "firing", 0), ("web-3", "firing", 0), ("web-1", "firing", 1)]
    after = [("web-2", "firing", 0), ("web-2", "firing", 1), ("web-3", "firing", 1)]
    asyncio.run(_run([fill, after]))
    assert WRITTEN[-1] == 3 + 1
