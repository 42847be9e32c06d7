"""``ContractStore.trigger_priorities`` reads the stored texts as they are: a record's text that is
not JSON is a ``StoreError`` (as ``get_contracts`` says), a record without a priority adds none,
on SQLite (``json_extract``) and on Redis (its script, or plain JSON where its decoder refuses a
text) alike."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import redis.asyncio

from sentinel_hooks.errors import StoreError
from sentinel_hooks.store import Store
from sentinel_hooks.store.redis import RedisStore
from sentinel_hooks.store.redis import store as redis_store
from sentinel_hooks.store.sqlite import SqliteStore
from tests.contract.stores import contract, create


async def _stored(store: Store) -> None:
    for callback_id in ("ok", "bad", "bare"):
        await create(store, contract(callback_id))


async def test_sqlite_reads_a_corrupt_record_as_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "sentinel.db"
    store = SqliteStore(path)
    await store.open()
    try:
        await _stored(store)
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE contracts SET doc = 'not json {' WHERE callback_id = 'bad'")
            conn.execute("""UPDATE contracts SET doc = '{"trigger":{}}' WHERE callback_id = 'bare'""")
        assert {"high"} == await store.trigger_priorities(["ok", "bare"])
        with pytest.raises(StoreError):
            await store.trigger_priorities(["ok", "bad"])
    finally:
        await store.close()


@pytest.mark.redis
async def test_redis_reads_a_corrupt_record_as_a_store_error(redis_url: str) -> None:
    store = RedisStore(redis_url)
    await store.open()
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        await _stored(store)
        await client.hset(store.keys.contract("bad"), "doc", "not json {")
        await client.hset(store.keys.contract("bare"), "doc", '{"trigger":{}}')
        assert {"high"} == await store.trigger_priorities(["ok", "bare"])
        with pytest.raises(StoreError, match="contract 'bad'"):
            await store.trigger_priorities(["ok", "bad"])
    finally:
        await client.aclose()
        await store.close()


@pytest.mark.redis
async def test_redis_reads_what_its_decoder_refuses_itself_in_every_chunk(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis reads the priorities in chunks; a record Redis's JSON decoder refuses (a lone
    surrogate escape, which Python's reads) is read by the service, whichever chunk it is in."""
    monkeypatch.setattr(redis_store, "PRIORITIES_CHUNK", 2)
    store = RedisStore(redis_url)
    await store.open()
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        levels = {"a": "low", "b": "normal", "c": "low", "d": "high", "e": "low"}
        for callback_id, level in levels.items():
            await create(store, contract(callback_id, priority=level))
        odd = '{"note":"\\ud800","trigger":{"priority":"critical"}}'
        await client.hset(store.keys.contract("d"), "doc", odd)
        assert {"low", "normal", "critical"} == await store.trigger_priorities(list(levels))
        assert {"low", "critical"} == await store.trigger_priorities(["c", "d"])
        assert {"low"} == await store.trigger_priorities(["e", "nope", "a"])
    finally:
        await client.aclose()
        await store.close()
