"""The budget meter's store traffic (SPEC §20): the fire's counter is read once per session at most,
the day counters before every call. Real parts: an in-memory SQLite store that counts its reads."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from sentinel_hooks.callbacks.backends.base import ModelReply
from sentinel_hooks.callbacks.sessions.budgets import BudgetExhausted, Meter
from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.core.usage import Usage, fire_key, service_day_key, utc_day
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.store.sqlite import SqliteStore

DAY_MS = 86_400_000
REPLY = ModelReply(text="ok", usage={"inputTokens": 60, "outputTokens": 40})


class ReadCountingStore(SqliteStore):
    """An in-memory SQLite store that keeps the keys of every ``get_usage``."""

    reads: list[list[str]]

    async def get_usage(self, keys: Sequence[str]) -> dict[str, Usage]:
        self.reads.append(list(keys))
        return await super().get_usage(keys)


@pytest.fixture
async def store() -> AsyncIterator[ReadCountingStore]:
    made = ReadCountingStore.in_memory()
    made.reads = []
    await made.open()
    yield made
    await made.close()


def meter(store: ReadCountingStore, budgets: dict[str, Any], fire_used: Usage | None = None) -> Meter:
    clock = FakeClock()
    return Meter(
        store=store,
        clock=clock,
        service=ServiceConfig.model_validate({"budgets": budgets}),
        inbox=Inbox(store, clock),
        events=None,
        callback_id="CB1",
        watcher_id="w",
        session_key="w",
        fire_used=fire_used,
    )


async def spend(m: Meter) -> None:
    """One call's usage counted in its own store step (a judge's way)."""
    await m.record("m", "judge", [{"role": "user", "content": "x"}], REPLY, time.perf_counter())


async def test_the_fires_counter_is_read_at_the_first_check_only(store: ReadCountingStore) -> None:
    """A resumed session reads what its fire spent once; later checks use what the meter counted."""
    await store.add_usage([fire_key("CB1")], Usage(100, 0, 0.0), at=FakeClock().now(), ttl_ms=DAY_MS)
    m = meter(store, {"perFire": {"tokens": 250}})
    await m.check()
    await spend(m)
    await m.check()
    assert [[fire_key("CB1")]] == store.reads
    await spend(m)
    with pytest.raises(BudgetExhausted, match=r"budgets\.perFire\.tokens: 300 of 250"):
        await m.check()
    assert 1 == len(store.reads)


async def test_a_new_sessions_meter_reads_no_fire_counter(store: ReadCountingStore) -> None:
    """A session that has made no call yet knows its fire spent nothing: no read at all."""
    m = meter(store, {"perFire": {"tokens": 250}}, fire_used=Usage())
    await m.check()
    await spend(m)
    await m.check()
    assert [] == store.reads


async def test_day_counters_are_read_before_every_call(store: ReadCountingStore) -> None:
    """Other fires and replicas spend the service's day: its counter is read at every check."""
    m = meter(store, {"perDay": {"tokens": 10_000}}, fire_used=Usage())
    await m.check()
    await m.check()
    day = service_day_key(utc_day(FakeClock().now()))
    assert [[day], [day]] == store.reads
