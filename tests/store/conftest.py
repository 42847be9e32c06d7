"""One contract suite for every Store: the ``store`` fixture runs each test on memory, SQLite and
Redis. Redis is a real server the tests start themselves (``redis_server``, db 15): the Redis
variant is skipped locally without the redis-server binary and fails when ``CI`` is set. Each Redis test
uses a random key prefix and deletes its keys afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

from sentinel_hooks.store import (
    Contract,
    Delivery,
    DeliveryKind,
    InboxItem,
    MemoryStore,
    RedisStore,
    SqliteStore,
    Store,
    Trigger,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``: every test's clock."""
    return T0 + timedelta(seconds=seconds)


@pytest.fixture(scope="session")
def redis_url(redis_server: str) -> str:
    """Database 15 of the tests' own redis-server."""
    return f"{redis_server}/15"


@dataclass
class Backend:
    """Makes fresh Store objects over the same data (so a test can close and reopen)."""

    name: str
    make: Callable[[], Store]


async def _delete_prefix(url: str, prefix: str) -> None:
    client = redis.asyncio.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


async def _backends(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    name: str = request.param
    if name == "memory":
        shared = MemoryStore()
        yield Backend(name, lambda: shared)
    elif name == "sqlite":
        path = tmp_path / "state" / "sentinel.db"
        yield Backend(name, lambda: SqliteStore(path))
    else:
        url: str = request.getfixturevalue("redis_url")
        prefix = f"sentinel-test:{uuid.uuid4().hex}:"
        yield Backend(name, lambda: RedisStore(url, key_prefix=prefix))
        await _delete_prefix(url, prefix)


DURABLE = ["sqlite", pytest.param("redis", marks=pytest.mark.redis)]


@pytest.fixture(params=["memory", *DURABLE])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Each Store implementation in turn."""
    async for made in _backends(request, tmp_path):
        yield made


@pytest.fixture(params=DURABLE)
async def durable_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """The implementations whose data outlives the Store object (SQLite, Redis)."""
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
) -> Contract:
    """A contract created ``created`` s after T0 with its deadline at ``deadline`` s."""
    return Contract(
        callback_id=callback_id,
        watcher_id=watcher_id,
        dedupe_key=f"dk-{callback_id}",
        session_key=f"sentinel:hooks:watcher:{watcher_id}",
        state=state,
        trigger=Trigger(kind="match", priority="high", matched_at=at(created)),
        created_at=at(created),
        deadline=at(deadline),
        targets=["oncall"],
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
    delivery = staticmethod(delivery)
    inbox_item = staticmethod(inbox_item)


@pytest.fixture
def make() -> Make:
    """Builders for contracts, deliveries and inbox items, and ``make.at(seconds)``."""
    return Make()
