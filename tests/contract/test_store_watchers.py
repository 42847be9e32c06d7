"""Store contract: watcher runtime state and bounded observation history."""

from __future__ import annotations

import pytest

from sentinel_hooks.errors import StoreError
from sentinel_hooks.store import Observation, Store
from sentinel_hooks.store.shortcuts import get_watcher_state, last_observation, put_watcher_state
from tests.contract import stores

backend, store, make = stores.backend, stores.store, stores.make


async def record(store: Store, watcher_id: str, observation: Observation, *, keep: int = 500) -> None:
    """One observation, in a batch of its own."""
    await store.write_watcher_batch([(watcher_id, observation)], {}, keep=keep)


async def test_watcher_state_reads_back_equal(store: Store) -> None:
    """A put state is returned by get_watcher_state."""
    state = {"firing": True, "consecutiveFailures": 0, "lastCheckAt": "2026-01-01T00:00:00.000Z"}
    await put_watcher_state(store, "eth-price", state)
    assert state == await get_watcher_state(store, "eth-price")


async def test_unknown_watcher_has_no_state(store: Store) -> None:
    """get_watcher_state of a watcher never written is None."""
    assert await get_watcher_state(store, "nope") is None


async def test_put_watcher_state_replaces_the_previous_state(store: Store) -> None:
    """A second put replaces the whole state."""
    await put_watcher_state(store, "w", {"a": 1})
    await put_watcher_state(store, "w", {"b": 2})
    assert {"b": 2} == await get_watcher_state(store, "w")


async def test_returned_state_is_a_copy(store: Store) -> None:
    """Mutating a returned state does not change what the store holds."""
    await put_watcher_state(store, "w", {"fires": 1})
    got = await get_watcher_state(store, "w")
    assert got is not None
    got["fires"] = 99
    assert {"fires": 1} == await get_watcher_state(store, "w")


async def test_a_none_state_forgets_the_watcher(store: Store) -> None:
    """A batch's None state deletes the watcher's state; deleting again is harmless."""
    await put_watcher_state(store, "w", {"a": 1})
    await store.write_watcher_batch([], {"w": None})
    await store.write_watcher_batch([], {"w": None})
    assert (None, {}) == (await get_watcher_state(store, "w"), await store.list_watcher_states())


async def test_list_watcher_states_returns_every_watcher(store: Store) -> None:
    """list_watcher_states maps each watcher id to its state."""
    await put_watcher_state(store, "a", {"n": 1})
    await put_watcher_state(store, "b", {"n": 2})
    assert {"a": {"n": 1}, "b": {"n": 2}} == await store.list_watcher_states()


async def test_list_watcher_states_with_a_prefix_returns_the_keys_that_start_with_it(store: Store) -> None:
    """A prefix is plain text: LIKE's and glob's wildcards in it, or in keys, match only themselves."""
    keys = (
        "api-definition:a",
        "api-definition:b",
        "api-definitionx",
        "a",
        "p_%*?[x]\\:1",
        "pa%*?[x]\\:2",
        "p_%abcx:3",
    )
    for key in keys:
        await put_watcher_state(store, key, {"key": key})
    assert {"api-definition:a", "api-definition:b"} == set(await store.list_watcher_states("api-definition:"))
    assert {"p_%*?[x]\\:1"} == set(await store.list_watcher_states("p_%*?[x]\\:"))
    assert {} == await store.list_watcher_states("nothing:")
    assert 7 == len(await store.list_watcher_states(""))


async def test_get_watcher_states_returns_those_asked_for_that_exist(store: Store) -> None:
    """get_watcher_states maps each asked id that has a state to it, leaving the others out."""
    await put_watcher_state(store, "a", {"n": 1})
    await put_watcher_state(store, "b", {"n": 2})
    await put_watcher_state(store, "c", {"n": 3})
    assert {"a": {"n": 1}, "c": {"n": 3}} == await store.get_watcher_states(["a", "c", "nope"])


async def test_get_watcher_states_of_no_ids_is_empty(store: Store) -> None:
    """Asking for no watcher reads nothing."""
    await put_watcher_state(store, "a", {"n": 1})
    assert {} == await store.get_watcher_states([])


async def test_a_state_that_is_not_json_raises_store_error(store: Store) -> None:
    """Values JSON cannot hold are refused with StoreError naming the watcher."""
    with pytest.raises(StoreError, match="'w'"):
        await put_watcher_state(store, "w", {"tags": {"a", "b"}})


async def test_last_observation_is_the_most_recent(store: Store, make) -> None:
    """last_observation returns the observation recorded last."""
    await record(store, "w", Observation(at=make.at(1), value={"price": 1}))
    await record(store, "w", Observation(at=make.at(2), value={"price": 2}))
    assert Observation(at=make.at(2), value={"price": 2}) == await last_observation(store, "w")


async def test_last_observations_are_each_watchers_most_recent(store: Store, make) -> None:
    """last_observations maps each asked watcher with a history to its newest observation."""
    await record(store, "a", Observation(at=make.at(1), value={"price": 1}))
    await record(store, "b", Observation(at=make.at(2), value=[2]))
    await record(store, "a", Observation(at=make.at(3), value={"price": 3}))
    await record(store, "c", Observation(at=make.at(4), value=None))
    expected = {
        "a": Observation(at=make.at(3), value={"price": 3}),
        "b": Observation(at=make.at(2), value=[2]),
    }
    assert expected == await store.last_observations(["a", "b", "nope"])


async def test_last_observations_of_many_watchers_in_one_call(store: Store, make) -> None:
    """Thousands of ids are answered in one call (the Redis store pipelines them in slices)."""
    pairs = [(f"w{i}", Observation(at=make.at(1), value=i)) for i in range(6_000)]
    await store.write_watcher_batch(pairs, {})
    found = await store.last_observations([f"w{i}" for i in range(6_001)])
    assert (6_000, 5_999) == (len(found), found["w5999"].value)


async def test_unknown_watcher_has_no_observations(store: Store) -> None:
    """A watcher never observed has no last observation and an empty history."""
    assert (None, []) == (await last_observation(store, "nope"), await store.observations("nope"))


async def test_observations_are_newest_first(store: Store, make) -> None:
    """observations lists the most recently recorded first."""
    for i in range(3):
        await record(store, "w", Observation(at=make.at(i), value=i))
    assert [2, 1, 0] == [o.value for o in await store.observations("w")]


async def test_observations_limit_caps_the_count(store: Store, make) -> None:
    """limit returns only the newest ones."""
    for i in range(5):
        await record(store, "w", Observation(at=make.at(i), value=i))
    assert [4, 3] == [o.value for o in await store.observations("w", limit=2)]


async def test_observations_since_keeps_those_at_or_after_it(store: Store, make) -> None:
    """since drops observations older than it."""
    for i in range(5):
        await record(store, "w", Observation(at=make.at(i), value=i))
    found = await store.observations("w", since=make.at(3))
    assert [4, 3] == [o.value for o in found]


async def test_observation_histories_are_per_watcher(store: Store, make) -> None:
    """One watcher's observations never appear in another's history."""
    await record(store, "a", Observation(at=make.at(1), value="a"))
    await record(store, "b", Observation(at=make.at(1), value="b"))
    assert ["a"] == [o.value for o in await store.observations("a")]


# -- write_watcher_batch ------------------------------------------------------------------------


async def test_watcher_batch_appends_in_order_and_puts_states(store: Store, make) -> None:
    """A batch appends each watcher's observations in order and puts its states."""
    await record(store, "a", Observation(at=make.at(0), value=0))
    batch = [("a", Observation(at=make.at(i), value=i)) for i in (1, 2)]
    batch.append(("b", Observation(at=make.at(3), value="b")))
    await store.write_watcher_batch(batch, {"a": {"fires": 1}, "c": {"fires": 2}})
    assert [2, 1, 0] == [o.value for o in await store.observations("a")]
    assert ["b"] == [o.value for o in await store.observations("b")]
    assert 2 == (await last_observation(store, "a")).value  # type: ignore[union-attr]
    assert ({"fires": 1}, {"fires": 2}) == (
        await get_watcher_state(store, "a"),
        await get_watcher_state(store, "c"),
    )


async def test_watcher_batch_keeps_only_the_newest(store: Store, make) -> None:
    """Each watcher's history is trimmed to ``keep``, counting what the batch added (a
    watcher's first batched write trims on every backend)."""
    batch = [("w", Observation(at=make.at(i), value=i)) for i in range(6)]
    batch.append(("v", Observation(at=make.at(6), value=6)))
    await store.write_watcher_batch(batch, {}, keep=3)
    assert [5, 4, 3] == [o.value for o in await store.observations("w")]
    assert [6] == [o.value for o in await store.observations("v")]


async def test_batched_history_reads_exactly_the_newest_keep(store: Store, make) -> None:
    """Many one-observation batches: after each, a read of up to 500 returns the newest ``keep``
    and no more (SQLite trims its table every 32nd write; no read sees the rows in between)."""
    seen = []
    for i in range(100):
        await store.write_watcher_batch([("w", Observation(at=make.at(i), value=i))], {}, keep=5)
        seen.append([o.value for o in await store.observations("w", limit=500)])
    assert all(list(range(i, max(i - 5, -1), -1)) == values for i, values in enumerate(seen))


async def test_history_since_reads_only_the_newest_keep(store: Store, make) -> None:
    """A read with ``since`` older than the whole history still returns only the newest ``keep``."""
    for i in range(40):
        await store.write_watcher_batch([("w", Observation(at=make.at(i), value=i))], {}, keep=5)
    found = await store.observations("w", limit=500, since=make.at(0))
    assert [39, 38, 37, 36, 35] == [o.value for o in found]


async def test_history_written_with_a_larger_keep_is_read_up_to_the_new_one(store: Store, make) -> None:
    """A history kept at 50 (an earlier run's setting), then one write at keep 5: reads give 5."""
    await store.write_watcher_batch(
        [("old", Observation(at=make.at(i), value=i)) for i in range(50)], {}, keep=50
    )
    await store.write_watcher_batch([("w", Observation(at=make.at(50), value=50))], {}, keep=5)
    assert [49, 48, 47, 46, 45] == [o.value for o in await store.observations("old", limit=500)]


async def test_watcher_batch_puts_and_forgets_states_together(store: Store) -> None:
    """States put and forgotten in one batch: each watcher ends as the batch says."""
    await put_watcher_state(store, "old", {"n": 1})
    await store.write_watcher_batch([], {"old": None, "new": {"n": 2}})
    assert {"new": {"n": 2}} == await store.list_watcher_states()


async def test_empty_watcher_batch_changes_nothing(store: Store) -> None:
    """No observations and no states: nothing is written."""
    await store.write_watcher_batch([], {})
    assert {} == await store.list_watcher_states()


async def test_watcher_batch_with_a_state_that_is_not_json_writes_nothing(store: Store, make) -> None:
    """A state that cannot be stored raises StoreError and the batch's observations are not kept."""
    with pytest.raises(StoreError):
        await store.write_watcher_batch([("w", Observation(at=make.at(1), value=1))], {"w": {"x": object()}})
    assert [] == await store.observations("w")
