"""Store contract: ``hold_contract`` keeps the relay off a contract while a notify is sent, and
refuses once the relay has claimed it, so one fire never gets both a notify and a fallback."""

from __future__ import annotations

from sentinel_hooks.store import Settlement, Store


async def test_a_hold_before_the_deadline_keeps_the_contract_from_claims(store: Store, make) -> None:
    """Held at 29 s for 5 s (deadline 30 s): no claim at the deadline, due again at 34 s."""
    await store.create_contract(make.contract("a", deadline=30), {})
    assert await store.hold_contract("a", deadline=make.at(30), now=make.at(29), hold_ms=5_000)
    assert [] == await store.claim_due(make.at(33.9), lease_ms=1_000)
    assert ["a"] == [c.callback_id for c in await store.claim_due(make.at(34), lease_ms=1_000)]


async def test_a_short_hold_never_moves_the_deadline_earlier(store: Store, make) -> None:
    """A hold ending before the deadline leaves the contract due at its deadline."""
    await store.create_contract(make.contract("a", deadline=30), {})
    assert await store.hold_contract("a", deadline=make.at(30), now=make.at(1), hold_ms=1_000)
    assert [] == await store.claim_due(make.at(29.9))
    assert ["a"] == [c.callback_id for c in await store.claim_due(make.at(30))]


async def test_a_contract_claimed_by_the_relay_cannot_be_held(store: Store, make) -> None:
    """Past the deadline and claimed: the fallback is on its way, the notify must not go."""
    await store.create_contract(make.contract("a", deadline=30), {})
    assert ["a"] == [c.callback_id for c in await store.claim_due(make.at(30), lease_ms=1_000)]
    assert not await store.hold_contract("a", deadline=make.at(30), now=make.at(30.5), hold_ms=5_000)


async def test_an_overdue_unclaimed_or_lapsed_contract_can_be_held(store: Store, make) -> None:
    """Overdue but not claimed (or its claim lapsed): the notify takes it before the relay."""
    await store.create_contract(make.contract("a", deadline=30), {})
    await store.create_contract(make.contract("b", deadline=30), {})
    claimed = await store.claim_due(make.at(30), limit=1, lease_ms=1_000)
    assert ["a"] == [c.callback_id for c in claimed]  # its claim lapses at 31 s
    assert await store.hold_contract("a", deadline=make.at(30), now=make.at(35), hold_ms=5_000)
    assert await store.hold_contract("b", deadline=make.at(30), now=make.at(35), hold_ms=5_000)
    assert [] == await store.claim_due(make.at(39.9))


async def test_a_settled_or_unknown_contract_cannot_be_held(store: Store, make) -> None:
    """Nothing to hold once the contract has its final state, or when it does not exist."""
    await store.create_contract(make.contract("a", deadline=30), {})
    await store.settle_contracts([Settlement("a", "fulfilled")], at=make.at(10))
    assert not await store.hold_contract("a", deadline=make.at(30), now=make.at(11), hold_ms=5_000)
    assert not await store.hold_contract("nope", deadline=make.at(30), now=make.at(11), hold_ms=5_000)
