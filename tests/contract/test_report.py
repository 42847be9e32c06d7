"""The noise report (SPEC §22) computed from each store: the same fires give the same figures on
SQLite and Redis (``report.build_report`` reads only the store's roles)."""

from __future__ import annotations

import pytest

from sentinel_hooks.core.usage import Usage, fire_key
from sentinel_hooks.report import build_report, parse_since, percentiles
from sentinel_hooks.store import Store
from sentinel_hooks.store.feedback import Feedback
from tests.contract import stores
from tests.contract.stores import at, contract, create, envelope, inbox_item
from tests.contract.test_store_pruning import deduped, fulfilled, settled

backend, durable_backend, store = stores.backend, stores.durable_backend, stores.store


async def flapping_fires(store: Store, watcher: str, count: int) -> None:
    """``count`` fires of ``watcher`` that the source reported over before their page."""
    for n in range(count):
        cid = f"{watcher}-{n}"
        made = contract(cid, watcher_id=watcher, created=100 + n * 60, deadline=100 + n * 60 + 30)
        assert await create(store, made, envelope(cid, watcher_id=watcher))
        assert await store.resolve_contract(cid, [], at=at(100 + n * 60 + 10)) is not None


async def test_figures_per_watcher_and_in_total(store: Store) -> None:
    await settled(store, "fb", watcher="disk")  # fallback at its 30 s deadline
    await fulfilled(store, "ok", watcher="disk")  # the agent's page 5 s after the fire
    await deduped(store, "dd")  # on eth-price: "dd-first" stays pending, "dd" deduped
    await flapping_fires(store, "flappy", 3)
    await store.put_feedback(Feedback(callback_id="fb", person="ana", useful=False, at=at(40)))
    await store.put_feedback(Feedback(callback_id="fb", person="bo", useful=True, at=at(41)))
    await store.add_usage([fire_key("ok")], Usage(100, 20, 0.5), at=at(5), ttl_ms=86_400_000)
    item = inbox_item("item-fb", created=31).model_copy(update={"callback_id": "fb", "watcher_id": "disk"})
    assert await store.create_inbox_item(item)
    acked = await store.transition_inbox_item(
        "item-fb", from_statuses=["open"], to_status="acked", actor="ana", note=None, at=at(90)
    )
    assert acked is not None

    report = await build_report(store, since=at(-1), until=at(3600))
    total = report["total"]
    assert (7, 2, 1, 1, 1, 3) == (
        total["fires"],
        total["pages"],
        total["pagesByAgent"],
        total["fallbacks"],
        total["deduped"],
        total["resolvedBeforePage"],
    )
    disk = report["watchers"]["disk"]
    assert {"p50": 5.0, "p90": 30.0} == disk["timeToPageS"]
    assert {"p50": 90.0, "p90": 90.0} == disk["timeToAckS"]
    assert {"useful": 1, "notUseful": 1} == disk["feedback"]
    assert {"inputTokens": 100, "outputTokens": 20, "costUsd": 0.5} == disk["usage"]
    assert {"p50": 10.0, "p90": 10.0} == report["watchers"]["flappy"]["timeToResolveS"]
    assert [{"watcherId": "flappy", "cycles": 3, "day": "2026-01-01"}] == report["flapping"]
    assert ["flappy", "disk", "eth-price"] == [n["watcherId"] for n in report["noisiest"]]


async def test_the_window_leaves_older_and_newer_fires_out(store: Store) -> None:
    await flapping_fires(store, "flappy", 3)  # created at 100, 160 and 220 s
    report = await build_report(store, since=at(150), until=at(200))
    assert 1 == report["total"]["fires"]
    assert [] == report["flapping"]


def test_windows_and_percentiles() -> None:
    assert 7 * 86400 == parse_since("7d").total_seconds()
    assert 36 * 3600 == parse_since("1d12h").total_seconds()
    for bad in ("", "7", "d7", "7x", "0d", "7d junk"):
        with pytest.raises(ValueError, match="since:"):
            parse_since(bad)
    assert {"p50": None, "p90": None} == percentiles([])
    assert {"p50": 5.0, "p90": 9.0} == percentiles([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
