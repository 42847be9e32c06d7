"""Store contract: ``GroupStore.join_members`` (SPEC §19, a storm's joins written out beforehand)
stores each member as ``accept_contract``'s join would, in one step, and stops at the first member
no group takes."""

from __future__ import annotations

import pytest

from sentinel_hooks.store import Store, codec
from sentinel_hooks.store.records import GroupRequest, MemberJoin, as_member, to_epoch_ms
from tests.contract import stores
from tests.contract.stores import at, envelope, settle
from tests.contract.test_store_groups import KEY, accept, fire, group_of, join_only

backend, store, make = stores.backend, stores.store, stores.make


def written(callback_id: str, created: float = 0, *, watcher_id: str = "eth-price") -> MemberJoin:
    """The fire ``accept`` would make, written out as a member whose group is left to the store."""
    member = as_member(fire(callback_id, created), "").model_copy(update={"watcher_id": watcher_id})
    return MemberJoin(
        callback_id=callback_id,
        watcher_id=watcher_id,
        created_ms=to_epoch_ms(member.created_at),
        doc=codec.dump_record(member),
        envelope=envelope(callback_id).wire_text(),
    )


def request(*, interval_ms: int = 60_000, max_fires: int = 100) -> GroupRequest:
    return GroupRequest(key=KEY, interval_ms=interval_ms, max_fires=max_fires)


async def test_members_join_the_open_group_as_a_join_would_store_them(store: Store) -> None:
    """Each member is stored grouped with its group's id and its envelope, and the group's contract
    counts and lists them after the fires that joined before, in order."""
    await accept(store, "g-1")
    await join_only(store, "g-2", 1)
    answers = await store.join_members(request(), [written("g-3", 2), written("g-4", 3)])
    assert ["g-1", "g-1"] == answers
    stored = await store.get_contract("g-3")
    assert as_member(fire("g-3", 2), "g-1") == stored
    assert envelope("g-4") == (await store.get_envelopes(["g-4"]))["g-4"]
    group = await group_of(store, "g-1")
    assert (["g-1", "g-2", "g-3", "g-4"], 4) == (group.members, group.fires)
    listed = await store.list_contracts(watcher_id="eth-price", state="grouped")
    assert {"g-2", "g-3", "g-4"} == {c.callback_id for c in listed.items}


async def test_a_member_whose_id_exists_is_answered_none_and_left_as_it_is(store: Store) -> None:
    await accept(store, "g-1")
    await join_only(store, "g-2", 1)
    before = await store.get_contract("g-2")
    assert [None, "g-1"] == await store.join_members(request(), [written("g-2", 5), written("g-3", 6)])
    assert before == await store.get_contract("g-2")
    assert (["g-1", "g-2", "g-3"], 3) == ((g := await group_of(store, "g-1")).members, g.fires)


async def test_no_open_group_takes_nothing_and_writes_nothing(store: Store) -> None:
    assert [] == await store.join_members(request(), [written("g-1"), written("g-2")])
    assert await store.get_contract("g-1") is None
    await accept(store, "o-1", 0, interval_ms=10_000)
    assert [] == await store.join_members(request(interval_ms=10_000), [written("g-3", 30)]), "gone quiet"
    assert await store.get_contract("g-3") is None


async def test_the_answers_stop_where_the_group_fills(store: Store) -> None:
    """At ``max_fires`` the group closes: the members after it are not written, and the next fire
    of the key opens a new group."""
    await accept(store, "g-1", max_fires=3)
    answers = await store.join_members(request(max_fires=3), [written(f"g-{i}", i) for i in (2, 3, 4, 5)])
    assert ["g-1", "g-1"] == answers
    assert await store.get_contract("g-4") is None
    assert [] == await store.join_members(request(max_fires=3), [written("g-4", 4)])
    opened = await accept(store, "g-4", 4, max_fires=3)
    assert "pending" == opened.state


async def test_members_after_the_page_wait_for_one_follow_up(store: Store) -> None:
    await accept(store, "g-1", 0, interval_ms=60_000)
    assert await settle(store, "g-1", "fallback_sent", at=at(40))
    assert ["g-1", "g-1"] == await store.join_members(request(), [written("g-2", 41), written("g-3", 42)])
    assert [] == await store.claim_joins(at(59))
    [batch] = await store.claim_joins(at(60))
    assert ("g-1", ("g-2", "g-3"), 1) == (batch.group_id, batch.members, batch.ordinal)


async def test_members_of_two_watchers_are_refused(store: Store) -> None:
    await accept(store, "g-1")
    with pytest.raises(ValueError, match="one watcher"):
        await store.join_members(request(), [written("g-2"), written("g-3", watcher_id="other")])
    assert await store.get_contract("g-2") is None


def test_a_member_must_leave_its_group_to_the_store() -> None:
    with pytest.raises(ValueError, match="groupId"):
        MemberJoin(callback_id="c", watcher_id="w", created_ms=0, doc='{"groupId":"x"}', envelope="{}")
