"""``open_store`` URL forms and the registry behind it, what each backend says about sharing its
state, backend-specific open failures, and the SQLite worker thread."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
from pathlib import Path

import pytest

from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store import SharedState, open_store
from sentinel_hooks.store.backends import LOADERS
from sentinel_hooks.store.redis import RedisStore
from sentinel_hooks.store.sqlite import SqliteStore


def test_relative_sqlite_url_resolves_under_base_dir(tmp_path: Path) -> None:
    """sqlite:///rel/path.db is relative to base_dir."""
    store = open_store("sqlite:///.sentinel/state.db", base_dir=tmp_path)
    assert (SqliteStore, tmp_path / ".sentinel" / "state.db") == (
        type(store),
        getattr(store, "path", None),
    )


def test_absolute_sqlite_url_ignores_base_dir(tmp_path: Path) -> None:
    """sqlite:////abs/path.db is absolute."""
    store = open_store(f"sqlite:///{tmp_path}/abs.db", base_dir=Path("/elsewhere"))
    assert tmp_path / "abs.db" == getattr(store, "path", None)


def test_memory_url_gives_sqlite_in_memory(tmp_path: Path) -> None:
    """memory:// is the SQLite store on SQLite's in-memory database (tests only)."""
    store = open_store("memory://", base_dir=tmp_path)
    assert (SqliteStore, Path(":memory:")) == (type(store), getattr(store, "path", None))


async def test_a_memory_store_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An open memory:// store takes writes and leaves nothing on disk, wherever it runs."""
    monkeypatch.chdir(tmp_path)
    store = open_store("memory://", base_dir=tmp_path)
    await store.open()
    try:
        await store.ping()
    finally:
        await store.close()
    assert [] == os.listdir(tmp_path)


def test_every_scheme_has_a_loader() -> None:
    """The registry knows the four schemes the accepted forms name."""
    assert {"sqlite", "memory", "redis", "rediss"} == set(LOADERS)


def test_a_redis_store_shares_its_server_and_prefix(tmp_path: Path) -> None:
    """Replicas coordinate where a Redis store keeps its keys; a SQLite store shares nothing."""
    shared = open_store("redis://:pw@127.0.0.1/3", base_dir=tmp_path, key_prefix="blue:").shared
    alone = open_store("sqlite:///state.db", base_dir=tmp_path).shared
    assert (SharedState("redis://:pw@127.0.0.1/3", "blue:"), None) == (shared, alone)


@pytest.mark.parametrize("url", ["redis://127.0.0.1/0", "rediss://cache.example:6380/1"])
def test_redis_urls_give_a_redis_store(tmp_path: Path, url: str) -> None:
    """redis:// and rediss:// are the shared store."""
    assert isinstance(open_store(url, base_dir=tmp_path), RedisStore)


def test_redis_store_uses_the_given_key_prefix(tmp_path: Path) -> None:
    """key_prefix reaches the Redis store."""
    store = open_store("redis://127.0.0.1/0", base_dir=tmp_path, key_prefix="blue:")
    assert "blue:" == getattr(getattr(store, "keys", None), "prefix", None)


@pytest.mark.parametrize(
    "url", ["postgres://db/sentinel", "state.db", "sqlite://state.db", "sqlite:///", "memory://x"]
)
def test_unsupported_url_lists_the_accepted_forms(tmp_path: Path, url: str) -> None:
    """Any other URL raises StoreUnavailable naming it and every accepted form."""
    with pytest.raises(StoreUnavailable) as caught:
        open_store(url, base_dir=tmp_path)
    message = str(caught.value)
    assert all(part in message for part in [repr(url), "sqlite:///", "sqlite:////", "redis://"])


def test_unsupported_url_message_hides_a_password(tmp_path: Path) -> None:
    """A refused URL's password never appears in the message."""
    with pytest.raises(StoreUnavailable) as caught:
        open_store("mongodb://admin:hunter2@db/x", base_dir=tmp_path)
    assert "hunter2" not in str(caught.value)


async def test_sqlite_open_creates_the_parent_directory(tmp_path: Path) -> None:
    """Opening a SQLite store creates missing directories and the file."""
    store = SqliteStore(tmp_path / "a" / "b" / "state.db")
    await store.open()
    await store.close()
    assert (tmp_path / "a" / "b" / "state.db").is_file()


async def test_unwritable_sqlite_path_raises_store_unavailable_naming_it(tmp_path: Path) -> None:
    """A path whose directory cannot be created fails open with the file in the message."""
    (tmp_path / "blocker").write_text("a file, not a directory")
    store = open_store("sqlite:///blocker/state.db", base_dir=tmp_path)
    with pytest.raises(StoreUnavailable, match=re.escape("blocker/state.db")):
        await store.open()


async def test_sqlite_file_that_is_not_a_database_raises_store_unavailable(
    tmp_path: Path,
) -> None:
    """A file that is not SQLite fails open with StoreUnavailable naming it."""
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are not the bytes of a database " * 200)
    with pytest.raises(StoreUnavailable, match=re.escape("notes.db")):
        await SqliteStore(path).open()


async def test_a_version_1_file_keeps_its_transcripts_numbering_after_migrating(tmp_path: Path) -> None:
    """A file from before the sessions table: appends go on after each session's last seq, and
    the session's last append is known to idle-session pruning."""
    from datetime import UTC, datetime

    from sentinel_hooks.store.pruning import PruneBefore
    from sentinel_hooks.store.sqlite.schema import MIGRATIONS

    path = tmp_path / "v1.db"
    with sqlite3.connect(path) as conn:
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
        for seq in (1, 2, 3):
            doc = f'{{"seq":{seq},"at":"2026-01-01T00:00:0{seq}.000Z","entry":{{"n":{seq}}}}}'
            conn.execute("INSERT INTO transcripts VALUES ('old', ?, ?)", (seq, doc))
    conn.close()
    store = SqliteStore(path)
    await store.open()
    try:
        appended = await store.append_transcript("old", [{"n": 4}], at=datetime(2026, 2, 1, tzinfo=UTC))
        await store.append_transcript("idle", [{"n": 1}], at=datetime(2026, 1, 1, tzinfo=UTC))
        pruned = await store.prune(PruneBefore(sessions=datetime(2026, 1, 2, tzinfo=UTC)))
        assert ([4], 1) == (appended, pruned.sessions)
        assert [1, 2, 3, 4] == [e.seq for e in await store.get_transcript("old")]
    finally:
        await store.close()


async def test_sqlite_schema_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    """A file written by a newer schema version fails open rather than being misread."""
    path = tmp_path / "new.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 999")
    conn.close()
    with pytest.raises(StoreUnavailable, match="newer"):
        await SqliteStore(path).open()


async def test_unreachable_redis_raises_store_unavailable_without_the_password() -> None:
    """A Redis server that refuses connections fails open; the message hides the password."""
    store = RedisStore("redis://:hunter2@127.0.0.1:1/0")
    with pytest.raises(StoreUnavailable, match=re.escape("127.0.0.1:1")) as caught:
        await store.open()
    assert "hunter2" not in str(caught.value)


async def test_sqlite_calls_do_not_block_the_event_loop(tmp_path: Path) -> None:
    """A ticker task keeps running while 200 SQLite writes are awaited one by one."""
    store = SqliteStore(tmp_path / "state.db")
    await store.open()
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        for i in range(200):
            await store.write_watcher_batch([], {f"w-{i}": {"i": i}})
    finally:
        done.set()
        await task
        await store.close()
    assert ticks >= 200
