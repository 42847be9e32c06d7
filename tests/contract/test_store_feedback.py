"""Store contract: feedback on fires (SPEC §22): the latest per person counts, read per callback,
kept across reopening, pruned with its contract."""

from __future__ import annotations

import asyncio

from sentinel_hooks.store import Store
from sentinel_hooks.store.feedback import Feedback, FeedbackCounts
from sentinel_hooks.store.pruning import PruneBefore
from tests.contract import stores
from tests.contract.stores import Backend, at
from tests.contract.test_store_pruning import settled

backend, durable_backend, store = stores.backend, stores.durable_backend, stores.store


def fb(cid: str, person: str, useful: bool, seconds: float, note: str | None = None) -> Feedback:
    return Feedback(callback_id=cid, person=person, useful=useful, note=note, at=at(seconds))


async def test_latest_per_person_counts(store: Store) -> None:
    """A person who changes their mind replaces their feedback; each person counts once."""
    await store.put_feedback(fb("a", "ana", True, 1))
    await store.put_feedback(fb("a", "bo", True, 2, note="found the disk"))
    await store.put_feedback(fb("a", "ana", False, 3, note="wrong host"))
    await store.put_feedback(fb("b", "ana", True, 4))
    found = await store.get_feedback(["a", "b", "none"])
    assert [
        fb("a", "bo", True, 2, note="found the disk"),
        fb("a", "ana", False, 3, note="wrong host"),
    ] == found["a"]
    assert [fb("b", "ana", True, 4)] == found["b"]
    assert "none" not in found
    assert FeedbackCounts(useful=1, not_useful=1) == FeedbackCounts.of(found["a"])


async def test_concurrent_clicks_keep_one_per_person(store: Store) -> None:
    """Twenty racing clicks by two people leave exactly two records."""
    await asyncio.gather(*(store.put_feedback(fb("c", f"p{i % 2}", i % 3 == 0, i)) for i in range(20)))
    assert {"p0", "p1"} == {f.person for f in (await store.get_feedback(["c"]))["c"]}


async def test_nothing_asked_is_nothing_read(store: Store) -> None:
    assert {} == await store.get_feedback([])


async def test_feedback_outlives_the_store_object(durable_backend: Backend) -> None:
    first = durable_backend.make()
    await first.open()
    await first.put_feedback(fb("d", "ana", True, 1))
    await first.close()
    second = durable_backend.make()
    await second.open()
    try:
        assert [fb("d", "ana", True, 1)] == (await second.get_feedback(["d"]))["d"]
    finally:
        await second.close()


async def test_feedback_goes_with_its_pruned_contract(store: Store) -> None:
    """Retention deletes a contract's feedback with it; a younger contract's stays."""
    await settled(store, "old")
    await settled(store, "young", created=2000)
    await store.put_feedback(fb("old", "ana", True, 40))
    await store.put_feedback(fb("young", "ana", False, 2040))
    await store.prune(PruneBefore(callbacks=at(1000)))
    assert ["young"] == list(await store.get_feedback(["old", "young"]))
