"""Store contract: silences (put, get, list by state at an instant, prune) and silenced contracts."""

from __future__ import annotations

import pytest

from sentinel_hooks.core.silences import Matcher
from sentinel_hooks.store import InvalidCursor, Store
from sentinel_hooks.store.pruning import PruneBefore
from sentinel_hooks.store.silences import Silence
from tests.contract import stores
from tests.contract.stores import Backend, at

backend, durable_backend, store, make = stores.backend, stores.durable_backend, stores.store, stores.make


def silence(silence_id: str = "s-1", *, created: float = 0, starts: float = 0, ends: float = 3600) -> Silence:
    """A silence of the watcher eth-price, made ``created`` s after T0, from ``starts`` to ``ends``."""
    return Silence(
        id=silence_id,
        matchers=[Matcher(path="watcherId", op="eq", value="eth-price")],
        starts_at=at(starts),
        ends_at=at(ends),
        created_by="ana",
        created_at=at(created),
        comment="deploying",
    )


def silenced_contract(callback_id: str = "cb-1", by: str = "s-1"):  # type: ignore[no-untyped-def]
    made = stores.contract(callback_id)
    return made.model_copy(update={"state": "silenced", "settled_at": made.created_at, "silenced_by": by})


async def test_put_silence_reads_back_equal(store: Store) -> None:
    """get_silence returns the silence exactly as put; an unknown id is None."""
    await store.put_silence(silence())
    assert (silence(), None) == (await store.get_silence("s-1"), await store.get_silence("nope"))


async def test_put_replaces_the_silence_with_its_id(store: Store) -> None:
    """Expiring is a put with an earlier end: the stored silence is the new one."""
    await store.put_silence(silence())
    expired = silence().expired_at(at(60))
    await store.put_silence(expired)
    assert (expired, "expired") == (await store.get_silence("s-1"), expired.state_at(at(60)))


@pytest.mark.parametrize(
    ("state", "expected"),
    [("active", ["s-active"]), ("pending", ["s-pending"]), ("expired", ["s-ended"]), (None, None)],
)
async def test_list_silences_filters_by_state_at_now(store: Store, state, expected) -> None:  # type: ignore[no-untyped-def]
    """Each silence is listed under its state at ``now``; no state lists every one, newest first."""
    await store.put_silence(silence("s-ended", created=1, starts=0, ends=50))
    await store.put_silence(silence("s-active", created=2, starts=50, ends=200))
    await store.put_silence(silence("s-pending", created=3, starts=150, ends=300))
    page = await store.list_silences(now=at(100), state=state)
    assert (expected or ["s-pending", "s-active", "s-ended"]) == [s.id for s in page.items]


async def test_a_silence_is_active_from_its_start_until_its_end(store: Store) -> None:
    """startsAt is included and endsAt excluded."""
    await store.put_silence(silence(starts=10, ends=20))
    states = [
        [s.id for s in (await store.list_silences(now=at(t), state="active")).items]
        for t in (9.999, 10, 19.999, 20)
    ]
    assert [[], ["s-1"], ["s-1"], []] == states


async def test_silence_pages_visit_every_silence_once(store: Store) -> None:
    """Paging with nextCursor lists every silence once, newest first."""
    for i in range(7):
        await store.put_silence(silence(f"s-{i}", created=i % 3))
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list_silences(now=at(10), state="active", limit=3, cursor=cursor)
        seen += [s.id for s in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    expected = sorted((f"s-{i}" for i in range(7)), key=lambda sid: (int(sid[2:]) % 3, sid), reverse=True)
    assert expected == seen


async def test_a_foreign_silence_cursor_is_refused(store: Store) -> None:
    """A cursor the store did not issue raises InvalidCursor."""
    with pytest.raises(InvalidCursor):
        await store.list_silences(now=at(0), cursor="not a cursor")


async def test_silences_survive_reopening(durable_backend: Backend) -> None:
    """A silence put before close is there after reopening (restarts, other replicas)."""
    first = durable_backend.make()
    await first.open()
    await first.put_silence(silence())
    await first.close()
    second = durable_backend.make()
    await second.open()
    try:
        assert silence() == await second.get_silence("s-1")
    finally:
        await second.close()


async def test_prune_deletes_silences_ended_before_the_cutoff(store: Store) -> None:
    """Silences that ended before the cutoff go; active ones and those ended later stay."""
    await store.put_silence(silence("old", ends=10))
    await store.put_silence(silence("recent", ends=100))
    await store.put_silence(silence("active", ends=10_000))
    pruned = await store.prune(PruneBefore(silences=at(50)))
    remaining = [s.id for s in (await store.list_silences(now=at(0))).items]
    assert (1, ["active", "recent"]) == (pruned.silences, sorted(remaining))


async def test_prune_of_silences_is_bounded_by_limit(store: Store) -> None:
    """One step deletes at most ``limit`` silences and says there may be more."""
    for i in range(5):
        await store.put_silence(silence(f"s-{i}", ends=10))
    pruned = await store.prune(PruneBefore(silences=at(50)), limit=3)
    left = await store.list_silences(now=at(0))
    assert (3, True, 2) == (pruned.silences, pruned.more, len(left.items))


async def test_silenced_contract_is_stored_final_without_a_deadline(store: Store, make) -> None:  # type: ignore[no-untyped-def]
    """A silenced contract is stored as it is, listed under silenced, and never claimed as due."""
    made = silenced_contract()
    stored = await store.accept_contract(made, make.envelope("cb-1"))
    listed = await store.list_contracts(state="silenced")
    due = await store.claim_due(at(10_000))
    assert (made, made, [made], []) == (stored, await store.get_contract("cb-1"), listed.items, due)


async def test_silenced_contract_sets_no_dedupe_key(store: Store, make) -> None:  # type: ignore[no-untyped-def]
    """A pending contract after a silenced one with the same dedupe key is not deduped."""
    await store.accept_contract(silenced_contract("cb-1"), make.envelope("cb-1"))
    later = make.contract("cb-2").model_copy(update={"dedupe_key": "dk-cb-1"})
    stored = await store.accept_contract(
        later, make.envelope("cb-2"), dedupe_key="dedupe:dk-cb-1", dedupe_ttl_ms=60_000
    )
    assert "pending" == (stored.state if stored else None)


async def test_silenced_contract_refuses_a_taken_callback_id(store: Store, make) -> None:  # type: ignore[no-untyped-def]
    """A silenced contract with an existing callback id is refused like any other."""
    await store.accept_contract(make.contract("cb-1"), make.envelope("cb-1"))
    assert None is await store.accept_contract(silenced_contract("cb-1"), make.envelope("cb-1"))


async def test_silenced_contract_with_a_dedupe_key_is_refused(store: Store, make) -> None:  # type: ignore[no-untyped-def]
    """A silenced contract takes no dedupe key (ValueError, nothing written)."""
    with pytest.raises(ValueError, match="silenced"):
        await store.accept_contract(
            silenced_contract(), make.envelope("cb-1"), dedupe_key="dedupe:x", dedupe_ttl_ms=10
        )
    assert None is await store.get_contract("cb-1")


async def test_silenced_contract_with_deliveries_is_refused(store: Store, make) -> None:  # type: ignore[no-untyped-def]
    """A silenced fire sends no fan-out line: deliveries with it are refused (ValueError, nothing written)."""
    with pytest.raises(ValueError, match="silenced"):
        await store.accept_contract(
            silenced_contract(), make.envelope("cb-1"), deliveries=[make.delivery("cb-1", "oncall", "fanout")]
        )
    assert (None, []) == (await store.get_contract("cb-1"), await store.list_deliveries("cb-1"))


async def test_silenced_contracts_are_pruned_like_settled_ones(store: Store, make) -> None:  # type: ignore[no-untyped-def]
    """A silenced contract older than the callbacks cutoff is pruned."""
    await store.accept_contract(silenced_contract(), make.envelope("cb-1"))
    pruned = await store.prune(PruneBefore(callbacks=at(100)))
    assert (1, None) == (pruned.contracts, await store.get_contract("cb-1"))
