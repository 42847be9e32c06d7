"""Pushes at wire speed (issue 30): a notification's alerts are judged together, their fires' store
steps in flight at once under one hold of the watcher's lock, unless one alert's judgement depends on
another's (cooldown, fireOnce, a dedupeKeyTemplate, the same alert twice), when they go one after the
other; ``format: json`` pushes that queue for the lock are one batch with one write."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.store import Store, backends
from sentinel_hooks.store.records import Contract
from sentinel_hooks.store.shortcuts import get_watcher_state
from sentinel_hooks.store.sqlite.store import SqliteStore
from sentinel_hooks.watchers import writeback
from tests.service.test_alertmanager_ingest import PLAIN, Start, alert, push, start
from tests.support import Sink
from tests.watchers.test_writeback import CountingStore

__all__ = ["start"]  # the fixture, used by name


class InFlightStore(SqliteStore):
    """A real SQLite store that remembers how many contracts were being accepted at once, at most.
    Each accept waits (up to ``HOLD_S``) for ``expect`` accepts to have begun, so accepts made
    together are seen together however slowly the machine runs the ones before them."""

    HOLD_S = 3.0

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.expect = 1
        self.in_flight = 0
        self.most = 0
        self._all_in: asyncio.Event | None = None

    async def accept_contract(self, contract: Contract, envelope: Any, **more: Any) -> Contract | None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self._all_in is None:
            self._all_in = asyncio.Event()
        if self.most >= self.expect:
            self._all_in.set()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_in.wait(), self.HOLD_S)
            return await super().accept_contract(contract, envelope, **more)
        finally:
            self.in_flight -= 1


@pytest.fixture
def in_flight(monkeypatch: pytest.MonkeyPatch) -> list[InFlightStore]:
    made: list[InFlightStore] = []

    def loader(url: str, *, base_dir: Path, key_prefix: str) -> Store:
        made.append(InFlightStore(base_dir / url.partition(":///")[2]))
        return made[-1]

    monkeypatch.setitem(backends.LOADERS, "sqlite", loader)
    return made


async def _fires(store: Store) -> Any:
    return (await get_watcher_state(store, "am") or {}).get("fires")


async def test_independent_alerts_fire_together(
    start: Start, sink: Sink, in_flight: Sequence[InFlightStore]
) -> None:
    """20 new alerts, a warning and an unknown resolved one: the 20 fires are accepted at once, each
    its own contract, and the watcher counts 20 fires."""
    service = await start()
    in_flight[0].expect = 20
    alerts = [alert(f"web-{i}") for i in range(20)]
    alerts += [alert("db-1", severity="warning"), alert("ghost", "resolved")]
    assert (202, {"accepted": True, "fired": 20}) == await push(service, *alerts)
    page = await service.store.list_contracts(watcher_id="am", limit=50)
    assert (20, 20, 20) == (in_flight[0].most, len(page.items), await _fires(service.store))
    again = await push(service, *alerts)
    assert ((202, {"accepted": True, "fired": 0}), 20) == (again, await _fires(service.store))


async def test_a_cooldown_keeps_them_in_order(
    start: Start, sink: Sink, in_flight: Sequence[InFlightStore]
) -> None:
    """With a cooldown one fire holds back the next: one at a time, the first fires, the rest wait."""
    service = await start(extra="cooldownMs: 600000\n")
    answer = await push(service, *(alert(f"web-{i}") for i in range(5)))
    assert ((202, {"accepted": True, "fired": 1}), 1) == (answer, in_flight[0].most)


async def test_json_pushes_waiting_for_the_lock_are_one_batch(
    tmp_path: Path, start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``format: json`` pushes that queue behind the watcher's lock are judged in order and stored
    in one write with the state they left, which waits for no gathering window (60 s here): 30
    pushes at once are two writes, each push its own observation, the one that matched a fire."""
    monkeypatch.setattr(writeback, "BUSY_WINDOW_S", 60.0)

    def counting(url: str, *, base_dir: Path, key_prefix: str) -> Store:
        return CountingStore(base_dir / url.partition(":///")[2])

    monkeypatch.setitem(backends.LOADERS, "sqlite", counting)
    (tmp_path / "watchers").mkdir(exist_ok=True)
    (tmp_path / "watchers" / "plain.yaml").write_text(PLAIN)
    service = await start()
    store = service.store
    assert isinstance(store, CountingStore)
    store.batches.clear()
    values = [{"status": "firing" if i == 17 else "ok", "n": i} for i in range(30)]
    async with asyncio.timeout(30):
        outcomes = await asyncio.gather(*(service.ingest("plain", value) for value in values))
    assert [i == 17 for i in range(30)] == [outcome.fired for outcome in outcomes]
    assert [1 + 1, 29 + 1] == store.batches  # the first push alone, then the 29 that queued
    history = await store.observations("plain", limit=40)
    assert list(range(29, -1, -1)) == [o.value["n"] for o in history]  # newest first
    assert 1 == (await get_watcher_state(store, "plain") or {}).get("fires")
