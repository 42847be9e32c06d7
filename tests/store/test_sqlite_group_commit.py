"""The SQLite worker's group commit: the writes made in one turn of the event loop share one
transaction, each in its own savepoint, and their callers hear only once it committed (issue 30)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.errors import StoreError
from sentinel_hooks.store.sqlite.worker import SqliteWorker

Write = Callable[[sqlite3.Connection], Any]


@pytest.fixture
async def worker(tmp_path: Path) -> AsyncIterator[SqliteWorker]:
    db = SqliteWorker(tmp_path / "state.db")
    await db.start()
    await db.write("make parents", lambda c: c.execute("CREATE TABLE parents (id INTEGER PRIMARY KEY)"))
    await db.write(
        "make items",
        lambda c: c.execute(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, parent INTEGER"
            " REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)"
        ),
    )
    yield db
    await db.stop()


def _insert(item: int, parent: int | None = None) -> Write:
    def tx(c: sqlite3.Connection) -> int:
        c.execute("INSERT INTO items (id, parent) VALUES (?, ?)", (item, parent))
        return item

    return tx


def _insert_then_fail(item: int) -> Write:
    def tx(c: sqlite3.Connection) -> None:
        c.execute("INSERT INTO items (id) VALUES (?)", (item,))
        c.execute("INSERT INTO items (id) VALUES (?)", (item,))  # the same key: an error

    return tx


async def _stored(db: SqliteWorker) -> list[int]:
    rows = await db.read("list", lambda c: c.execute("SELECT id FROM items ORDER BY id").fetchall())
    return [int(row[0]) for row in rows]


async def _commits_during(db: SqliteWorker, writes: list[Write]) -> tuple[list[object], int]:
    """The writes' results (or errors), made in one turn, and the COMMITs the connection ran."""
    statements: list[str] = []
    await db.read("trace", lambda c: c.set_trace_callback(statements.append))
    results = await asyncio.gather(*(db.write("insert", w) for w in writes), return_exceptions=True)
    await db.read("untrace", lambda c: c.set_trace_callback(None))
    return list(results), sum(1 for text in statements if text.strip().upper() == "COMMIT")


async def test_writes_of_one_turn_share_one_commit(worker: SqliteWorker) -> None:
    """Fifty writes made at once are stored by one COMMIT, each answered with its own result."""
    results, commits = await _commits_during(worker, [_insert(n) for n in range(50)])
    assert (list(range(50)), 1, list(range(50))) == (results, commits, await _stored(worker))


async def test_a_failing_write_is_rolled_back_alone(worker: SqliteWorker) -> None:
    """A write that fails in a shared transaction gets its error and leaves nothing; the rest are stored."""
    results, commits = await _commits_during(worker, [_insert(1), _insert_then_fail(2), _insert(3)])
    assert (1, True, 3, 1) == (results[0], isinstance(results[1], StoreError), results[2], commits)
    assert [1, 3] == await _stored(worker)


async def test_a_failed_commit_fails_every_write_in_it(worker: SqliteWorker) -> None:
    """When the shared COMMIT fails (a deferred foreign key here), no write of it is stored and
    every caller gets the error: none is told of a write that is not durable."""
    results, _ = await _commits_during(worker, [_insert(1), _insert(2, parent=99), _insert(3)])
    assert [True, True, True] == [isinstance(result, StoreError) for result in results]
    assert [] == await _stored(worker)


async def test_a_read_made_after_a_write_sees_it(worker: SqliteWorker) -> None:
    """A read submitted after writes of the same turn runs after them (submission order is kept)."""
    write = asyncio.ensure_future(worker.write("insert", _insert(7)))
    await asyncio.sleep(0)  # the write is made, not yet queued
    read = await _stored(worker)
    assert ([7], 7) == (read, await write)


async def test_writes_after_stop_are_refused(tmp_path: Path) -> None:
    """A write made while the store stops is refused, not left waiting."""
    db = SqliteWorker(tmp_path / "state.db")
    await db.start()
    await db.stop()
    with pytest.raises(StoreError, match="not open"):
        await db.write("insert", _insert(1))


async def test_an_accept_step_failing_with_any_error_fails_alone(worker: SqliteWorker) -> None:
    """The accepts of one notification share a transaction (``accept_contracts``): a step that
    fails with an error other than SQLite's (a fault in building its rows) is undone and answered
    alone; the fires before and after it are stored."""
    from sentinel_hooks.store.sqlite.queries import accept_contracts

    def step(item: int, *, fail: bool = False) -> Callable[..., Any]:
        def run(c: sqlite3.Connection, *, joins: object) -> tuple[str, None]:
            c.execute("INSERT INTO items (id) VALUES (?)", (item,))
            if fail:
                raise ValueError(f"item {item} cannot be stored")
            return "pending", None

        return run

    results = await worker.write(
        "accept", lambda c: accept_contracts(c, [step(1), step(2, fail=True), step(3)])
    )
    assert ("pending", None) == results[0] == results[2]
    assert isinstance(results[1], ValueError)
    assert [1, 3] == await _stored(worker)


async def test_the_joins_of_an_accept_step_undone_are_not_counted(tmp_path: Path) -> None:
    """A batch's joins are counted in their group when the batch ends (``groups.count_joins``): a
    step that joined and then failed is undone with its join, so the group counts and lists only
    the fires stored."""
    from sentinel_hooks.store.sqlite import SqliteStore, groups
    from sentinel_hooks.store.sqlite.queries import accept_contracts
    from tests.contract.test_store_groups import KEY, accept, group_of

    store = SqliteStore(tmp_path / "state.db")
    await store.open()
    try:
        await accept(store, "g-0")

        def join(member: str, *, fail: bool = False) -> Callable[..., Any]:
            def run(c: sqlite3.Connection, *, joins: groups.BatchJoins) -> tuple[str, str]:
                group_id = groups.open_group(c, KEY, 1, joins)
                assert group_id is not None
                groups.join_group(c, group_id, member, 1, joins)
                if fail:
                    raise ValueError(f"{member} cannot be stored")
                return "grouped", group_id

            return run

        steps = [join("g-1"), join("g-2", fail=True), join("g-3")]
        results = await store._db.write("accept", lambda c: accept_contracts(c, steps))
        assert isinstance(results[1], ValueError)
        group = await group_of(store, "g-0")
        assert (3, ["g-0", "g-1", "g-3"]) == (group.fires, group.members)
    finally:
        await store.close()
