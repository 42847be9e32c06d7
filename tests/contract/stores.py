"""The Store contract suite's fixtures: each ``tests/contract/test_store_*.py`` test runs on SQLite in
a file, SQLite in memory (``memory://``) and Redis.

Redis is the tests' own server (``redis_url`` in tests/conftest.py: a database emptied before each
test): the Redis variant is skipped locally without the redis-server binary and fails when ``CI``
is set. A test module takes the fixtures by naming them (``store = stores.store``), and the record
builders and steps below by importing them.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.store import (
    Contract,
    Delivery,
    DeliveryKind,
    InboxItem,
    SettledState,
    Settlement,
    Store,
    Trigger,
)
from sentinel_hooks.store.redis import RedisStore
from sentinel_hooks.store.sqlite import SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``: every test's clock."""
    return T0 + timedelta(seconds=seconds)


@dataclass
class Backend:
    """Makes fresh Store objects over the same data (so a test can close and reopen)."""

    name: str
    make: Callable[[], Store]


async def _backends(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    name: str = request.param
    if name == "memory":
        shared = SqliteStore.in_memory()  # its data lives as long as its connection: one object
        yield Backend(name, lambda: shared)
    elif name == "sqlite":
        path = tmp_path / "state" / "sentinel.db"
        yield Backend(name, lambda: SqliteStore(path))
    else:
        url: str = request.getfixturevalue("redis_url")
        yield Backend(name, lambda: RedisStore(url))


DURABLE = ["sqlite", pytest.param("redis", marks=pytest.mark.redis)]


@pytest.fixture(params=["memory", *DURABLE])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Each Store implementation in turn."""
    async for made in _backends(request, tmp_path):
        yield made


@pytest.fixture(params=DURABLE)
async def durable_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """The implementations whose data outlives the Store object (SQLite in a file, Redis)."""
    async for made in _backends(request, tmp_path):
        yield made


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[Store]:
    """An open store, closed after the test."""
    opened = backend.make()
    await opened.open()
    yield opened
    await opened.close()


# -- record builders ---------------------------------------------------------------------------


def contract(
    callback_id: str = "cb-1",
    *,
    watcher_id: str = "eth-price",
    state: Any = "pending",
    created: float = 0,
    deadline: float = 30,
    priority: Any = "high",
) -> Contract:
    """A contract created ``created`` s after T0 with its deadline at ``deadline`` s."""
    return Contract(
        callback_id=callback_id,
        watcher_id=watcher_id,
        dedupe_key=f"dk-{callback_id}",
        session_key=f"sentinel:hooks:watcher:{watcher_id}",
        state=state,
        trigger=Trigger(kind="match", priority=priority, matched_at=at(created)),
        created_at=at(created),
        deadline=at(deadline),
        targets=["oncall"],
    )


def envelope(callback_id: str = "cb-1", *, watcher_id: str = "eth-price", payload: Any = None) -> Envelope:
    """The envelope of a callback of ``watcher_id`` that matched at T0."""
    return Envelope.model_validate(
        {
            "callbackId": callback_id,
            "watcher": {"id": watcher_id, "eventName": "price_drop"},
            "trigger": {"matchedAt": "2026-01-01T00:00:00.000Z", "priority": "high"},
            "payload": payload,
        }
    )


def delivery(
    callback_id: str = "cb-1",
    target: str = "oncall",
    kind: DeliveryKind = "fallback",
    *,
    due: float = 0,
) -> Delivery:
    """A pending delivery created and due ``due`` s after T0."""
    return Delivery.new(callback_id, target, kind, {"text": f"to {target}"}, at=at(due))


def inbox_item(
    item_id: str = "item-1",
    *,
    kind: Any = "escalation",
    status: Any = "open",
    created: float = 0,
    note: str | None = None,
) -> InboxItem:
    """An inbox item created ``created`` s after T0 by the agent."""
    return InboxItem(
        id=item_id,
        kind=kind,
        status=status,
        severity="warning",
        reason="price fell fast",
        watcher_id="eth-price",
        callback_id="cb-1",
        session_key="sentinel:hooks:watcher:eth-price",
        created_at=at(created),
        updated_at=at(created),
        actor="agent",
        note=note,
        detail={"price": 1999.5},
    )


class Make:
    """The record builders and clock above, handed to tests as the ``make`` fixture."""

    at = staticmethod(at)
    contract = staticmethod(contract)
    envelope = staticmethod(envelope)
    delivery = staticmethod(delivery)
    inbox_item = staticmethod(inbox_item)


@pytest.fixture
def make() -> Make:
    """Builders for contracts, envelopes, deliveries and inbox items, and ``make.at(seconds)``."""
    return Make()


# -- steps the tests take through the contract ---------------------------------------------------


async def create(store: Store, made: Contract, stored: Envelope | None = None) -> bool:
    """Store a new pending contract without a dedupe key (``accept_contract``), with ``stored`` or
    else an envelope of its callback; False when its callback id exists."""
    return await store.accept_contract(made, stored or envelope(made.callback_id)) is not None


async def create_deduped(store: Store, made: Contract, *, holder: Contract) -> Contract:
    """Store ``made`` as the dedupe window stores a repeat: ``holder`` (pending, accepted first if
    absent) holds the window ``made`` falls in."""
    key = f"dedupe:held-by:{holder.callback_id}"
    await store.accept_contract(holder, envelope(holder.callback_id), dedupe_key=key, dedupe_ttl_ms=3_600_000)
    stored = await store.accept_contract(
        made, envelope(made.callback_id), dedupe_key=key, dedupe_ttl_ms=3_600_000
    )
    assert stored is not None
    assert "deduped" == stored.state
    return stored


async def settle(
    store: Store, callback_id: str, state: SettledState, *, at: datetime, deliveries: Sequence[Delivery] = ()
) -> bool:
    """Settle one contract (``settle_contracts`` of one): whether this settlement won."""
    return callback_id in await store.settle_contracts(
        [Settlement(callback_id, state, tuple(deliveries))], at=at
    )


async def due_contracts(store: Store, now: datetime, **options: Any) -> list[Contract]:
    """The contracts ``claim_due`` claims, without their envelopes."""
    return [claimed for claimed, _ in await store.claim_due(now, **options)]


async def get_delivery(store: Store, key: str) -> Delivery | None:
    """The delivery with ``key``, read through its callback's deliveries (``list_deliveries``)."""
    callback_id = key.split(":", 1)[0]
    return next((d for d in await store.list_deliveries(callback_id) if d.key == key), None)


_fresh_ids = itertools.count(1)


async def opens_window(store: Store, key: str, *, ttl_ms: int, now: datetime) -> bool:
    """Whether a new callback at ``now`` with dedupe ``key`` opens its window (it is stored pending,
    the key set until ``now + ttl_ms``) rather than being deduped by a live one."""
    made = Contract(
        callback_id=f"window-{next(_fresh_ids)}",
        watcher_id="eth-price",
        dedupe_key=key,
        session_key="sentinel:hooks:watcher:eth-price",
        state="pending",
        trigger=Trigger(kind="match", priority="high", matched_at=now),
        created_at=now,
        deadline=now + timedelta(hours=1),
        targets=["oncall"],
    )
    stored = await store.accept_contract(
        made, envelope(made.callback_id), dedupe_key=key, dedupe_ttl_ms=ttl_ms
    )
    assert stored is not None
    return stored.state == "pending"
