"""RedisStore's in-place changes (SETTLE_CONTRACTS and RECORD_OUTCOMES edit the stored JSON
text): they match what a whole rewrite stores, and a record whose text is not in the shape
they rely on is rewritten whole instead of being edited wrongly."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import redis.asyncio

from sentinel_hooks.store import DeliveryOutcome, Settlement
from sentinel_hooks.store.codec import dump_record
from sentinel_hooks.store.records import Delivery, apply_outcome, as_deduped, settle
from sentinel_hooks.store.redis import RedisStore
from sentinel_hooks.store.redis.scripts import deduped_doc, outcome_tail
from tests.contract.stores import at, contract, create, delivery, due_contracts, get_delivery

pytestmark = pytest.mark.redis


@pytest.fixture
async def redis_store(redis_url: str) -> AsyncIterator[RedisStore]:
    """An open RedisStore on an empty database."""
    store = RedisStore(redis_url)
    await store.open()
    yield store
    await store.close()


async def _rewrite_doc(url: str, key: str, doc: dict[str, object]) -> None:
    """Store ``doc`` under ``key`` as other JSON text: spaces after separators, keys reversed."""
    client = redis.asyncio.Redis.from_url(url)
    try:
        await client.hset(key, "doc", json.dumps(dict(reversed(list(doc.items())))))
    finally:
        await client.aclose()


def test_outcome_tail_is_the_end_of_the_dumped_record() -> None:
    """The tail RECORD_OUTCOMES appends is the updated record's JSON from its "state" field on."""
    claimed = delivery("cb-1", due=1).model_copy(update={"message": {"text": 'a "state":"x", — ok'}})
    outcome = DeliveryOutcome(claimed.key, "pending", 2, at(9.0005), 'HTTP 503: "busy"\n—', at(3.25))
    dumped = dump_record(apply_outcome(claimed, outcome))
    tail = outcome_tail(claimed, outcome)
    assert dumped.endswith(tail)
    assert dumped[: -len(tail)].endswith(',"message":{"text":"a \\"state\\":\\"x\\", — ok"},')


def test_deduped_doc_is_the_dumped_deduped_record() -> None:
    """The deduped record ACCEPT_CONTRACT may store is what dumping ``as_deduped`` gives, even when
    a string of the contract spells the swapped tokens."""
    pending = contract('"state":"pending"', watcher_id='w "settledAt":null', created=1.5)
    assert dump_record(as_deduped(pending)) == deduped_doc(dump_record(pending), pending)


async def test_record_outcomes_rewrites_a_record_in_another_shape_whole(
    redis_store: RedisStore, redis_url: str
) -> None:
    """A delivery record whose text the script cannot cut is read and rewritten instead."""
    await redis_store.enqueue_delivery(delivery("cb-1"))
    (claimed,) = await redis_store.claim_deliveries(at(1), lease_ms=60_000)
    key = redis_store.keys.delivery(claimed.key)
    await _rewrite_doc(redis_url, key, claimed.model_dump(mode="json", by_alias=True))
    outcome = DeliveryOutcome(claimed.key, "delivered", 1, at(2), None, at(2), claimed=claimed)
    assert {claimed.key} == (await redis_store.record_outcomes([outcome])).keys
    assert apply_outcome(claimed, outcome) == await get_delivery(redis_store, claimed.key)


async def test_settle_contracts_rewrites_a_record_in_another_shape_whole(
    redis_store: RedisStore, redis_url: str
) -> None:
    """A contract record without the exact pending tokens is settled with a whole new doc."""
    await create(redis_store, contract("cb-1"), {})
    (claimed,) = await due_contracts(redis_store, at(30))
    await _rewrite_doc(
        redis_url, redis_store.keys.contract("cb-1"), claimed.model_dump(mode="json", by_alias=True)
    )
    batch = [Settlement("cb-1", "fallback_sent", (delivery("cb-1"),), claimed=claimed)]
    assert {"cb-1"} == await redis_store.settle_contracts(batch, at=at(40))
    assert settle(claimed, "fallback_sent", at=at(40)) == await redis_store.get_contract("cb-1")
    assert [delivery("cb-1")] == await redis_store.list_deliveries("cb-1")
    assert [] == await due_contracts(redis_store, at(100))


async def test_record_outcomes_keeps_what_an_attempt_does_not_change(redis_store: RedisStore) -> None:
    """The message and identity of a delivery survive the in-place edit byte for byte."""
    message = {"text": 'he said ","state":"pending" and left', "extra": {"state": "x", "n": [1.5, 2**70]}}
    await redis_store.enqueue_delivery(Delivery.new("cb-1", "oncall", "fallback", message, at=at(0)))
    (claimed,) = await redis_store.claim_deliveries(at(1), lease_ms=60_000)
    outcome = DeliveryOutcome(claimed.key, "pending", 1, at(5), "timeout", at(2), claimed=claimed)
    assert {claimed.key} == (await redis_store.record_outcomes([outcome])).keys
    stored = await get_delivery(redis_store, claimed.key)
    assert stored is not None
    assert (message, apply_outcome(claimed, outcome)) == (stored.message, stored)
