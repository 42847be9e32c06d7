"""Store contract: grouping (SPEC §19). ``accept_contract`` with a group request opens the key's
group or joins the open one in the same atomic step as the dedupe check; ``claim_joins`` and
``joins_reported`` gather the fires that joined after the group's page into paced follow-ups."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from sentinel_hooks.store import Contract, Delivery, Store
from sentinel_hooks.store.pruning import PruneBefore
from sentinel_hooks.store.records import GroupInfo, GroupRequest, NoOpenGroup
from tests.contract import stores
from tests.contract.stores import at, envelope, settle

backend, store, make, durable_backend = stores.backend, stores.store, stores.make, stores.durable_backend

KEY = '["am",["HighCPU"]]'


def fire(callback_id: str, created: float = 0, key: str = KEY) -> Contract:
    """A pending fire of group ``key``, as the intake makes it: it carries its group, itself alone."""
    made = stores.contract(callback_id, created=created, deadline=created + 40)
    return made.model_copy(update={"group": GroupInfo(key=key, by=[("payload.a", 1)], members=[callback_id])})


async def accept(
    store: Store,
    callback_id: str,
    created: float = 0,
    *,
    key: str = KEY,
    interval_ms: int = 60_000,
    max_fires: int = 100,
    dedupe_key: str | None = None,
    deliveries: Sequence[Delivery] = (),
) -> Contract:
    """Accept a fire of group ``key`` (its dedupe key its own unless ``dedupe_key``)."""
    stored = await store.accept_contract(
        fire(callback_id, created, key),
        envelope(callback_id),
        group=GroupRequest(key=key, interval_ms=interval_ms, max_fires=max_fires),
        dedupe_key=dedupe_key or f"dedupe:{callback_id}",
        dedupe_ttl_ms=60_000,
        deliveries=deliveries,
    )
    assert stored is not None
    return stored


async def group_of(store: Store, callback_id: str) -> GroupInfo:
    """The group the contract of ``callback_id`` carries."""
    stored = await store.get_contract(callback_id)
    assert stored is not None
    assert stored.group is not None
    return stored.group


async def test_the_first_fire_opens_a_group_whose_contract_is_its_own(store: Store) -> None:
    """The first fire of a key is stored pending, carrying its group with itself as the only member."""
    opened = await accept(store, "g-1")
    assert ("pending", None) == (opened.state, opened.group_id)
    assert opened == await store.get_contract("g-1")


async def test_later_fires_join_as_grouped_members(store: Store) -> None:
    """Later fires of the key are stored `grouped` naming the group; the group counts and lists them."""
    await accept(store, "g-1")
    joined = await accept(store, "g-2", 1)
    await accept(store, "g-3", 2)
    assert ("grouped", "g-1") == (joined.state, joined.group_id)
    assert joined == await store.get_contract("g-2")
    group = await group_of(store, "g-1")
    assert (3, ["g-1", "g-2", "g-3"]) == (group.fires, group.members)


async def test_a_member_has_no_deadline_session_or_deliveries(store: Store) -> None:
    """A member is final at once: never claimed as due, and the deliveries it came with are not kept."""
    await accept(store, "g-1")
    stored = await accept(store, "g-2", 1, deliveries=[stores.delivery("g-2", kind="fanout")])
    assert "grouped" == stored.state
    claimed = [c.callback_id for c, _ in await store.claim_due(at(1000))]
    assert ["g-1"] == claimed
    assert [] == await store.list_deliveries("g-2")
    listed = await store.list_contracts(state="grouped")
    assert ["g-2"] == [c.callback_id for c in listed.items]


async def test_keys_have_groups_of_their_own(store: Store) -> None:
    """A fire of another key opens another group."""
    await accept(store, "g-1")
    other = await accept(store, "h-1", 1, key='["am",["Disk"]]')
    assert ("pending", None) == (other.state, other.group_id)


async def test_dedupe_acts_before_grouping(store: Store) -> None:
    """A fire inside its dedupe window is `deduped`, and the group does not count it."""
    await accept(store, "g-1")
    repeat = await accept(store, "g-2", 1, dedupe_key="dedupe:g-1")
    assert "deduped" == repeat.state
    assert 1 == (await group_of(store, "g-1")).fires


async def test_a_quiet_interval_closes_the_group(store: Store) -> None:
    """A fire `interval_ms` or more after the group's last one opens a new group."""
    await accept(store, "g-1", 0, interval_ms=10_000)
    await accept(store, "g-2", 9, interval_ms=10_000)
    fresh = await accept(store, "g-3", 19, interval_ms=10_000)
    assert ("pending", None) == (fresh.state, fresh.group_id)


async def test_a_full_group_closes_and_the_next_fire_opens_a_new_one(store: Store) -> None:
    """At `max_fires` the group closes: the next fire of the key opens another."""
    for n in range(3):
        await accept(store, f"g-{n}", n, max_fires=3)
    fresh = await accept(store, "g-3", 3, max_fires=3)
    assert ("pending", None) == (fresh.state, fresh.group_id)
    joined = await accept(store, "g-4", 4, max_fires=3)
    assert "g-3" == joined.group_id


async def join_only(store: Store, callback_id: str, created: float, *, max_fires: int = 100) -> Contract:
    """Offer a fire of ``KEY`` as a join only (the intake's lean path), its dedupe key its own."""
    stored = await store.accept_contract(
        fire(callback_id, created),
        envelope(callback_id),
        group=GroupRequest(key=KEY, interval_ms=60_000, max_fires=max_fires, join_only=True),
        dedupe_key=f"dedupe:{callback_id}",
        dedupe_ttl_ms=60_000,
    )
    assert stored is not None
    return stored


async def test_a_join_only_fire_joins_the_open_group(store: Store) -> None:
    """A join-only fire of a key whose group is open is stored `grouped` and listed, as any join."""
    await accept(store, "g-1")
    joined = await join_only(store, "g-2", 1)
    assert ("grouped", "g-1") == (joined.state, joined.group_id)
    assert joined == await store.get_contract("g-2")
    assert (2, ["g-1", "g-2"]) == ((g := await group_of(store, "g-1")).fires, g.members)


async def test_a_join_only_fire_with_no_open_group_is_refused_and_writes_nothing(store: Store) -> None:
    """No open group (none yet, or the last one full): NoOpenGroup, no contract and no dedupe
    key written, so the same fire offered whole then opens the group."""
    with pytest.raises(NoOpenGroup):
        await join_only(store, "g-1", 0)
    assert await store.get_contract("g-1") is None
    opened = await accept(store, "g-1", 0, max_fires=2)
    assert "pending" == opened.state
    await join_only(store, "g-2", 1, max_fires=2)
    with pytest.raises(NoOpenGroup):
        await join_only(store, "g-3", 2, max_fires=2)
    fresh = await accept(store, "g-3", 2, max_fires=2)
    assert ("pending", None) == (fresh.state, fresh.group_id)


async def test_a_join_only_fire_inside_its_dedupe_window_is_deduped(store: Store) -> None:
    """Dedupe acts on a join-only fire as on any: `deduped`, not counted by the group."""
    await accept(store, "g-1")
    repeat = await store.accept_contract(
        fire("g-2", 1),
        envelope("g-2"),
        group=GroupRequest(key=KEY, interval_ms=60_000, max_fires=100, join_only=True),
        dedupe_key="dedupe:g-1",
        dedupe_ttl_ms=60_000,
    )
    assert repeat is not None
    assert "deduped" == repeat.state
    assert 1 == (await group_of(store, "g-1")).fires


async def test_racing_fires_of_one_key_open_one_group(store: Store) -> None:
    """Twenty concurrent first fires of a key: one opens the group, nineteen join it."""
    stored = await asyncio.gather(*(accept(store, f"r-{n}") for n in range(20)))
    opened = [c for c in stored if c.state == "pending"]
    assert 1 == len(opened)
    assert {opened[0].callback_id} == {c.group_id for c in stored if c.state == "grouped"}
    assert 20 == (await group_of(store, opened[0].callback_id)).fires


async def test_joins_before_the_page_wait_for_no_follow_up(store: Store) -> None:
    """While the group's contract is pending its joins reach people with its page: nothing to claim."""
    await accept(store, "g-1")
    await accept(store, "g-2", 1)
    assert [] == await store.claim_joins(at(10_000))


async def test_joins_after_the_page_are_claimed_at_most_every_interval(store: Store) -> None:
    """After the page, joins wait until `interval_ms` after the group opened (then after the last
    follow-up), and are claimed together in join order with the follow-up's ordinal."""
    await accept(store, "g-1", 0, interval_ms=60_000)
    assert await settle(store, "g-1", "fallback_sent", at=at(40))
    await accept(store, "g-2", 41, interval_ms=60_000)
    await accept(store, "g-3", 42, interval_ms=60_000)
    assert [] == await store.claim_joins(at(59))
    [batch] = await store.claim_joins(at(60))
    assert ("g-1", ("g-2", "g-3"), 1) == (batch.group_id, batch.members, batch.ordinal)
    assert [] == await store.claim_joins(at(61)), "a claimed batch is leased"
    follow_up = stores.delivery("g-1", kind="joined.1", due=60)
    assert await store.joins_reported(batch, [follow_up], at=at(60))
    assert [follow_up.key] == [d.key for d in await store.list_deliveries("g-1")]
    await accept(store, "g-4", 70, interval_ms=60_000)
    assert [] == await store.claim_joins(at(119))
    [second] = await store.claim_joins(at(120))
    assert (("g-4",), 2) == (second.members, second.ordinal)


async def test_a_batch_is_recorded_once(store: Store) -> None:
    """A second record of the same batch (a lapsed lease, another replica) writes nothing."""
    await accept(store, "g-1", 0, interval_ms=1_000)
    assert await settle(store, "g-1", "fallback_sent", at=at(0.1))
    await accept(store, "g-2", 0.5, interval_ms=1_000)
    [batch] = await store.claim_joins(at(41))
    assert await store.joins_reported(batch, [stores.delivery("g-1", kind="joined.1")], at=at(41))
    assert not await store.joins_reported(
        batch, [stores.delivery("g-1", "other", kind="joined.1")], at=at(42)
    )
    assert 1 == len(await store.list_deliveries("g-1"))


async def test_a_group_closed_by_quiet_still_reports_its_joins(store: Store) -> None:
    """Joins after the page reach people even when the group closed meanwhile."""
    await accept(store, "g-1", 0, interval_ms=10_000)
    assert await settle(store, "g-1", "fallback_sent", at=at(5))
    await accept(store, "g-2", 6, interval_ms=10_000)
    await accept(store, "n-1", 30, interval_ms=10_000)  # quiet: a new group opens
    [batch] = await store.claim_joins(at(30))
    assert ("g-1", ("g-2",)) == (batch.group_id, batch.members)


async def test_groups_outlive_the_store_object(durable_backend: stores.Backend) -> None:
    """Reopened, the store still joins fires to the open group (groups live in the store)."""
    first = durable_backend.make()
    await first.open()
    await accept(first, "g-1")
    await first.close()
    second = durable_backend.make()
    await second.open()
    try:
        joined = await accept(second, "g-2", 1)
        assert "g-1" == joined.group_id
    finally:
        await second.close()


async def test_a_group_closes_once_every_member_resolved(store: Store) -> None:
    """Members reported over (one twice) leave the group open until the last; then the next fire
    of the key opens a new group."""
    for n in range(3):
        await accept(store, f"g-{n}", n)
    assert not await store.member_resolved("g-0", "g-1")
    assert not await store.member_resolved("g-0", "g-1")
    assert not await store.member_resolved("g-0", "g-0")
    assert await store.member_resolved("g-0", "g-2")
    fresh = await accept(store, "g-3", 3)
    assert ("pending", None) == (fresh.state, fresh.group_id)


async def test_an_unknown_group_counts_as_resolved(store: Store) -> None:
    """A group the store does not know (pruned) has nothing left firing."""
    assert await store.member_resolved("nope", "nope")


async def test_pruning_a_group_s_contract_forgets_the_group(store: Store) -> None:
    """Retention prunes a group's contract with its group: the key's next fire opens a new one."""
    await accept(store, "g-1", 0, interval_ms=10_000_000)
    assert await settle(store, "g-1", "fallback_sent", at=at(40))
    await store.prune(PruneBefore(callbacks=at(100)))
    fresh = await accept(store, "g-2", 200, interval_ms=10_000_000)
    assert ("pending", None) == (fresh.state, fresh.group_id)


async def test_fires_accepted_at_once_all_join_one_group(store: Store) -> None:
    """Forty fires of one key accepted at once (a notification's alerts): one opens the group, the
    others join it, and the group counts and lists every member once."""
    ids = [f"b-{n:02d}" for n in range(40)]
    stored = await asyncio.gather(*(accept(store, callback_id, n / 100) for n, callback_id in enumerate(ids)))
    opened = [contract.callback_id for contract in stored if contract.state == "pending"]
    assert 1 == len(opened)
    assert {opened[0]} == {contract.group_id for contract in stored if contract.state == "grouped"}
    group = await group_of(store, opened[0])
    assert (40, ids) == (group.fires, sorted(group.members))


async def test_a_taken_id_among_fires_accepted_at_once_refuses_only_that_fire(store: Store) -> None:
    """When fires accepted at once include an id already taken, that one is refused (None) and the
    other is stored and joins as usual."""
    await accept(store, "t-1")
    again = store.accept_contract(
        fire("t-1"), envelope("t-1"), group=GroupRequest(key=KEY, interval_ms=60_000, max_fires=100)
    )
    refused, joined = await asyncio.gather(again, accept(store, "t-2", 1))
    assert (None, "grouped") == (refused, joined.state)
    assert (2, ["t-1", "t-2"]) == ((group := await group_of(store, "t-1")).fires, group.members)


async def test_max_fires_counts_fires_accepted_at_once(store: Store) -> None:
    """maxFires counts the fires accepted at once: past it, a second group opens and takes the rest."""
    stored = await asyncio.gather(*(accept(store, f"m-{n}", n / 100, max_fires=3) for n in range(5)))
    opened = sorted(contract.callback_id for contract in stored if contract.state == "pending")
    sizes = sorted([len((await group_of(store, group_id)).members) for group_id in opened])
    members = [member for group_id in opened for member in (await group_of(store, group_id)).members]
    assert (2, [2, 3], [f"m-{n}" for n in range(5)]) == (len(opened), sizes, sorted(members))
