"""A notification's alerts are judged together (issue 30): their fires' store steps are in flight at
once under one hold of the watcher's lock, unless one alert's judgement depends on another's
(cooldown, fireOnce, a dedupeKeyTemplate, the same alert twice), when they go one after the other."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.store import Store, backends
from sentinel_hooks.store.records import Contract
from sentinel_hooks.store.shortcuts import get_watcher_state
from sentinel_hooks.store.sqlite.store import SqliteStore
from tests.service.test_alertmanager_ingest import Start, alert, push, start
from tests.support import Sink

__all__ = ["start"]  # the fixture, used by name


class InFlightStore(SqliteStore):
    """A real SQLite store that remembers how many contracts were being accepted at once, at most."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.in_flight = 0
        self.most = 0

    async def accept_contract(self, contract: Contract, envelope: Any, **more: Any) -> Contract | None:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0)  # let every step that is ready start before this one ends
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
