"""Store contract: the audit trail (SPEC §21) on every backend: newest first, filtered by time and
actor, paged without gaps or repeats, kept across reopening, pruned oldest first in bounded steps."""

from __future__ import annotations

import asyncio

import pytest

from sentinel_hooks.store import Store
from sentinel_hooks.store.audit import AuditEntry
from sentinel_hooks.store.base import InvalidCursor
from tests.contract import stores
from tests.contract.stores import Backend, at

backend, durable_backend, store = stores.backend, stores.durable_backend, stores.store


def entry(n: int, actor: str = "alice", seconds: float | None = None) -> AuditEntry:
    return AuditEntry(
        id=f"e{n:03d}",
        at=at(n if seconds is None else seconds),
        actor=actor,
        claimed_actor="mallory" if n % 2 else None,
        via="api",
        action="inbox.ack",
        target=f"item-{n}",
        note=None,
    )


async def test_newest_first_with_filters(store: Store) -> None:
    for n in range(6):
        await store.add_audit(entry(n, "alice" if n % 3 else "bob"))
    page = await store.list_audit(limit=10)
    assert [f"e{n:03d}" for n in (5, 4, 3, 2, 1, 0)] == [e.id for e in page.items]
    assert entry(5) == page.items[0]
    assert ["e003", "e000"] == [e.id for e in (await store.list_audit(actor="bob")).items]
    assert ["e005", "e004"] == [e.id for e in (await store.list_audit(since=at(4))).items]


async def test_pages_cover_everything_once(store: Store) -> None:
    await asyncio.gather(*(store.add_audit(entry(n, seconds=n // 3)) for n in range(25)))
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list_audit(actor="alice", limit=4, cursor=cursor)
        seen += [e.id for e in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert sorted(seen) == [f"e{n:03d}" for n in range(25)]
    assert len(seen) == len(set(seen))


async def test_a_forged_cursor_is_refused(store: Store) -> None:
    with pytest.raises(InvalidCursor):
        await store.list_audit(cursor="not-a-cursor!")


async def test_prune_deletes_older_rows_in_steps(store: Store) -> None:
    for n in range(7):
        await store.add_audit(entry(n))
    assert 3 == await store.prune_audit(at(5), limit=3)
    assert 2 == await store.prune_audit(at(5), limit=3)
    assert 0 == await store.prune_audit(at(5), limit=3)
    assert ["e006", "e005"] == [e.id for e in (await store.list_audit()).items]


async def test_audit_outlives_the_store_object(durable_backend: Backend) -> None:
    first = durable_backend.make()
    await first.open()
    await first.add_audit(entry(1))
    await first.close()
    second = durable_backend.make()
    await second.open()
    try:
        assert [entry(1)] == (await second.list_audit()).items
    finally:
        await second.close()
