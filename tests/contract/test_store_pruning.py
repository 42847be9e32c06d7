"""Store contract: retention (``Store.prune``): what goes, what goes with it, and what never goes.

Every record here is made through the store's own steps (settled, notified, deduped, paused), and
time is the suite's fixed clock: ``make.at(seconds)``. The cutoff is ``at(1000)`` unless a test
says otherwise, so records made in the first seconds are "old".
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from sentinel_hooks.store import Contract, DeliveryOutcome, Store
from sentinel_hooks.store.base import TranscriptTail
from sentinel_hooks.store.pruning import PruneBefore, Pruned
from sentinel_hooks.store.shortcuts import get_checkpoint, get_envelope
from tests.contract import stores
from tests.contract.stores import at, contract, create, delivery, due_contracts, envelope, inbox_item, settle

backend, durable_backend, store = stores.backend, stores.durable_backend, stores.store

CUTOFF = at(1000)
CALLBACK_CHECKPOINTS = ("session:", "message:")
SESSION_CHECKPOINTS = ("memory:",)
ALL = PruneBefore(
    callbacks=CUTOFF,
    inbox=CUTOFF,
    sessions=CUTOFF,
    callback_checkpoints=CALLBACK_CHECKPOINTS,
    session_checkpoints=SESSION_CHECKPOINTS,
)


def session_of(watcher_id: str) -> str:
    return f"sentinel:hooks:watcher:{watcher_id}"


async def pending(store: Store, cid: str, *, watcher: str = "w1", created: float = 0) -> Contract:
    made = contract(cid, watcher_id=watcher, created=created, deadline=created + 30)
    assert await create(store, made, envelope(cid, payload={"n": 1}))
    await store.put_checkpoint(f"session:{cid}", {"status": "done"})
    await store.put_checkpoint(f"message:{cid}", {"text": "hello"})
    return made


async def settled(store: Store, cid: str, state: Any = "fallback_sent", **kw: Any) -> Contract:
    """A contract settled by its deadline, its fallback delivered."""
    made = await pending(store, cid, **kw)
    fallback = delivery(cid, kind="fallback", due=kw.get("created", 0) + 30)
    assert await settle(store, cid, state, at=made.deadline, deliveries=[fallback])
    outcome = DeliveryOutcome(fallback.key, "delivered", 1, made.deadline, None, made.deadline)
    await store.record_outcomes([outcome])
    return made


async def fulfilled(store: Store, cid: str, **kw: Any) -> Contract:
    """A contract whose agent's notify was delivered."""
    made = await pending(store, cid, **kw)
    note = delivery(cid, kind="notify", due=kw.get("created", 0) + 5)
    assert (await store.begin_notify(cid, [note], at=note.created_at)) is not None
    outcome = DeliveryOutcome(note.key, "delivered", 1, note.created_at, None, note.created_at)
    await store.record_outcomes([outcome])
    assert "fulfilled" == (await store.get_contract(cid)).state  # type: ignore[union-attr]
    return made


async def deduped(store: Store, cid: str, *, created: float = 0) -> Contract:
    """A contract refused by the dedupe window (a first one holds the key)."""
    first = contract(f"{cid}-first", created=created)
    await store.accept_contract(first, envelope(cid), dedupe_key=f"dk-{cid}", dedupe_ttl_ms=60_000)
    second = contract(cid, created=created + 1)
    stored = await store.accept_contract(second, envelope(cid), dedupe_key=f"dk-{cid}", dedupe_ttl_ms=60_000)
    assert stored is not None
    assert "deduped" == stored.state
    return stored


async def gone(store: Store, cid: str) -> bool:
    """Nothing of the callback is left: contract, envelope, deliveries, checkpoints."""
    found = (
        await store.get_contract(cid),
        await get_envelope(store, cid),
        await store.list_deliveries(cid),
        await get_checkpoint(store, f"session:{cid}"),
        await get_checkpoint(store, f"message:{cid}"),
    )
    return (None, None, [], None, None) == found


async def prune_all(store: Store, before: PruneBefore = ALL, *, limit: int = 500) -> Pruned:
    """Call ``prune`` until it has nothing more to do; the summed counts."""
    total = Pruned()
    for _ in range(100):
        step = await store.prune(before, limit=limit)
        total += step
        if not step.more:
            return replace(total, more=False)
    raise AssertionError("prune kept saying there was more")


# -- contracts -----------------------------------------------------------------------------------


async def test_old_settled_contracts_go_with_envelope_deliveries_and_checkpoints(store: Store) -> None:
    """fallback_sent, expired, fulfilled and deduped contracts older than the cutoff are deleted whole."""
    await settled(store, "fb")
    await settled(store, "ex", state="expired")
    await fulfilled(store, "ok")
    await deduped(store, "dd")
    counts = await prune_all(store)
    assert [True] * 4 == [await gone(store, cid) for cid in ("fb", "ex", "ok", "dd")]
    assert (4, 3) == (counts.contracts, counts.deliveries)  # a fallback, a fallback, a notify
    # "dd-first" is the pending contract holding the dedupe key: it stays
    assert ["dd-first"] == [c.callback_id for c in (await store.list_contracts()).items]


async def test_pruned_contracts_leave_no_listing_or_queue_entry(store: Store) -> None:
    """After a prune, no listing, filter or claim finds the deleted contracts or deliveries."""
    await settled(store, "a", watcher="w1")
    await settled(store, "b", watcher="w2", state="expired")
    await prune_all(store)
    listings = [
        await store.list_contracts(),
        await store.list_contracts(watcher_id="w1"),
        await store.list_contracts(state="fallback_sent"),
        await store.list_contracts(watcher_id="w2", state="expired"),
    ]
    assert [[]] * 4 == [page.items for page in listings]
    assert [] == await due_contracts(store, at(10**6))
    assert [] == await store.claim_deliveries(at(10**6))


async def test_open_contracts_are_never_pruned_however_old(store: Store) -> None:
    """Pending, notifying and awaiting_approval contracts stay with everything they hold."""
    await pending(store, "p")
    await pending(store, "n")
    note = delivery("n", kind="notify", due=1)
    await store.begin_notify("n", [note], at=note.created_at)
    await pending(store, "a")
    await store.pause_contract("a")
    counts = await store.prune(ALL)
    states = [(await store.get_contract(cid)).state for cid in ("p", "n", "a")]  # type: ignore[union-attr]
    assert (0, ["pending", "notifying", "awaiting_approval"]) == (counts.contracts, states)
    assert [note.key] == [d.key for d in await store.list_deliveries("n")]
    assert {"status": "done"} == await get_checkpoint(store, "session:a")


async def test_settled_contracts_newer_than_the_cutoff_stay(store: Store) -> None:
    """A contract created after the cutoff, or settled after it, is kept."""
    await settled(store, "new", created=2000)
    await pending(store, "late", created=900)
    await settle(store, "late", "expired", at=at(1100))
    assert 0 == (await store.prune(ALL)).contracts
    assert ["late", "new"] == sorted(c.callback_id for c in (await store.list_contracts()).items)


async def test_a_settled_contract_with_a_pending_delivery_stays(store: Store) -> None:
    """A fallback still being retried keeps its contract (and the delivery) until it ends."""
    await pending(store, "retrying")
    fallback = delivery("retrying", kind="fallback", due=30)
    await settle(store, "retrying", "fallback_sent", at=at(30), deliveries=[fallback])
    assert 0 == (await store.prune(ALL)).contracts
    assert [fallback.key] == [d.key for d in await store.claim_deliveries(at(10**6))]


async def test_a_step_deletes_at_most_limit_and_says_there_is_more(store: Store) -> None:
    """Five old contracts, limit 2: 2, 2, then 1 with nothing more, oldest first."""
    for n in range(5):
        await settled(store, f"c{n}", created=n)
    steps = [await store.prune(ALL, limit=2) for _ in range(3)]
    assert [(2, True), (2, True), (1, False)] == [(s.contracts, s.more) for s in steps]


async def test_oldest_contracts_go_first(store: Store) -> None:
    """A limited step takes the oldest settled contracts."""
    for n in (5, 1, 3):
        await settled(store, f"c{n}", created=n)
    await store.prune(ALL, limit=2)
    assert ["c5"] == [c.callback_id for c in (await store.list_contracts()).items]


async def test_nothing_is_pruned_without_cutoffs(store: Store) -> None:
    """With every cutoff None (every limit disabled) a prune deletes nothing."""
    await settled(store, "a")
    await store.create_inbox_item(inbox_item("i", status="resolved"))
    await store.append_transcript(session_of("w1"), [{"callbackId": "x"}], at=at(0))
    assert Pruned() == await store.prune(PruneBefore())
    assert (await store.get_contract("a"), await store.get_inbox_item("i")) != (None, None)


async def test_a_second_prune_finds_nothing(store: Store) -> None:
    """Pruning is idempotent: what is gone is not counted twice."""
    await settled(store, "a")
    await prune_all(store)
    assert Pruned() == await store.prune(ALL)


async def test_prune_refuses_a_limit_below_one(store: Store) -> None:
    """limit 0 is a caller's mistake."""
    with pytest.raises(ValueError, match="limit"):
        await store.prune(ALL, limit=0)


# -- transcripts ---------------------------------------------------------------------------------


async def entries_of(store: Store, session: str) -> list[tuple[int, str]]:
    return [(e.seq, e.entry["callbackId"]) for e in await store.get_transcript(session)]


async def test_a_pruned_callback_leaves_the_head_of_its_session_transcript(store: Store) -> None:
    """Leading entries of deleted callbacks go; the trim stops at the first callback still stored,
    and the entries left keep their seq."""
    session = session_of("w1")
    await settled(store, "a")
    await pending(store, "b", created=1)
    await settled(store, "c", created=2)
    for cid, n in (("a", 2), ("b", 1), ("c", 2)):
        await store.append_transcript(session, [{"callbackId": cid, "n": i} for i in range(n)], at=at(5))
    counts = await prune_all(store, PruneBefore(callbacks=CUTOFF))
    assert (2, 2) == (counts.contracts, counts.transcript_entries)
    assert [(3, "b"), (4, "c"), (5, "c")] == await entries_of(store, session)
    window = await store.get_transcript(session, after_seq=3, limit=1)
    assert [(4, "c")] == [(e.seq, e.entry["callbackId"]) for e in window]


async def test_appends_continue_after_a_fully_trimmed_transcript(store: Store) -> None:
    """When every entry was trimmed, the next append still continues the numbering (the session's
    memory counts on seq numbers never coming back)."""
    session = session_of("w1")
    await settled(store, "a")
    await store.append_transcript(session, [{"callbackId": "a"}, {"callbackId": "a"}], at=at(5))
    await prune_all(store, PruneBefore(callbacks=CUTOFF))
    assert [] == await store.get_transcript(session)
    stored = await store.append_transcript(session, [{"callbackId": "b"}], at=at(2000))
    assert ([3], [(3, "b")]) == (stored, await entries_of(store, session))


async def test_entries_newer_than_the_cutoff_are_not_trimmed(store: Store) -> None:
    """An entry appended after the cutoff stays even when its callback is gone."""
    session = session_of("w1")
    await settled(store, "a")
    await store.append_transcript(session, [{"callbackId": "a"}], at=at(5))
    await store.append_transcript(session, [{"callbackId": "a"}], at=at(1500))
    await prune_all(store, PruneBefore(callbacks=CUTOFF))
    assert [(2, "a")] == await entries_of(store, session)


# -- idle sessions -------------------------------------------------------------------------------


async def test_an_idle_session_goes_with_its_memory_and_starts_again_at_one(store: Store) -> None:
    """No append since the cutoff and no open contract: transcript and memory are deleted, and
    the session's next entry is seq 1."""
    session = session_of("w1")
    await settled(store, "a")
    await store.append_transcript(session, [{"callbackId": "a"}] * 3, at=at(5))
    await store.put_checkpoint(f"memory:{session}", {"throughSeq": 3})
    counts = await prune_all(store, PruneBefore(sessions=CUTOFF, session_checkpoints=SESSION_CHECKPOINTS))
    assert (1, 3) == (counts.sessions, counts.transcript_entries)
    assert [] == await store.get_transcript(session)
    assert await get_checkpoint(store, f"memory:{session}") is None
    assert await store.get_contract("a") is not None  # callbacks have their own cutoff
    stored = await store.append_transcript(session, [{"callbackId": "b"}], at=at(2000))
    assert [1] == stored


async def test_a_session_with_an_open_contract_is_never_pruned(store: Store) -> None:
    """An idle session whose callback is still open (here awaiting approval) keeps everything."""
    session = session_of("w1")
    await pending(store, "a")
    await store.pause_contract("a")
    await store.append_transcript(session, [{"callbackId": "a"}], at=at(5))
    await store.put_checkpoint(f"memory:{session}", {"throughSeq": 1})
    counts = await prune_all(store)
    assert (0, [(1, "a")]) == (counts.sessions, await entries_of(store, session))
    assert {"throughSeq": 1} == await get_checkpoint(store, f"memory:{session}")


async def test_a_session_appended_to_after_the_cutoff_stays(store: Store) -> None:
    """One recent entry keeps a session alive."""
    session = session_of("w1")
    await store.append_transcript(session, [{"callbackId": "a"}], at=at(5))
    await store.append_transcript(session, [{"callbackId": "b"}], at=at(1200))
    assert 0 == (await prune_all(store, PruneBefore(sessions=CUTOFF))).sessions
    assert [(1, "a"), (2, "b")] == await entries_of(store, session)


# -- inbox ---------------------------------------------------------------------------------------


async def close(store: Store, item_id: str, to: Any, *, at_s: float = 10, kind: Any = "escalation") -> None:
    await store.create_inbox_item(inbox_item(item_id, kind=kind))
    moved = await store.transition_inbox_item(
        item_id, from_statuses={"open", "acked"}, to_status=to, actor="ana", note=None, at=at(at_s)
    )
    assert moved is not None


async def test_closed_inbox_items_older_than_the_cutoff_go_with_their_history(store: Store) -> None:
    """resolved, approved, denied and expired items go; their history too."""
    await close(store, "res", "resolved")
    await close(store, "app", "approved", kind="approval")
    await close(store, "den", "denied", kind="approval")
    await close(store, "exp", "expired", kind="approval")
    counts = await prune_all(store, PruneBefore(inbox=CUTOFF))
    assert 4 == counts.inbox_items
    for item_id in ("res", "app", "den", "exp"):
        assert (None, []) == (await store.get_inbox_item(item_id), await store.inbox_history(item_id))
    for status in (None, "resolved", "approved"):
        assert [] == (await store.list_inbox(status=status)).items
    assert [] == (await store.list_inbox(kind="approval")).items


async def test_open_and_acked_inbox_items_are_never_pruned(store: Store) -> None:
    """An open escalation and an acked one stay, however old."""
    await store.create_inbox_item(inbox_item("open"))
    await close(store, "acked", "acked")
    assert 0 == (await prune_all(store)).inbox_items
    assert {"open", "acked"} == {i.id for i in (await store.list_inbox()).items}


async def test_a_closed_item_goes_with_its_escalation_steps_unless_one_is_pending(store: Store) -> None:
    """The deliveries of an item's escalation chain (keyed by the item's id) go with it; an item
    whose later step is still pending (not yet due, so not yet cancelled) stays until it is not."""
    done = [delivery("done", "oncall", "escalation.0"), delivery("done", "oncall", "escalation.1", due=5)]
    await store.create_inbox_item(inbox_item("done"), deliveries=done)
    first, second = done
    await store.record_outcomes(
        [
            DeliveryOutcome(first.key, "delivered", 1, at(1), None, at(1)),
            DeliveryOutcome(second.key, "cancelled", 0, at(6), None, at(6)),
        ]
    )
    await store.create_inbox_item(
        inbox_item("waits"), deliveries=[delivery("waits", "oncall", "escalation.1", due=5000)]
    )
    for item_id in ("done", "waits"):
        moved = await store.transition_inbox_item(
            item_id, from_statuses={"open"}, to_status="resolved", actor="ana", note=None, at=at(10)
        )
        assert moved is not None
    counts = await prune_all(store, PruneBefore(inbox=CUTOFF))
    assert (1, 2) == (counts.inbox_items, counts.deliveries)
    assert (None, []) == (await store.get_inbox_item("done"), await store.list_deliveries("done"))
    assert await store.get_inbox_item("waits") is not None
    assert ["escalation.1"] == [d.kind for d in await store.list_deliveries("waits")]


async def test_an_item_closed_after_the_cutoff_stays(store: Store) -> None:
    """Created long ago but resolved recently: kept until its last change is old too."""
    await close(store, "recent", "resolved", at_s=1500)
    assert 0 == (await prune_all(store, PruneBefore(inbox=CUTOFF))).inbox_items
    assert await store.get_inbox_item("recent") is not None


# -- racing replicas -----------------------------------------------------------------------------


async def test_racing_pruners_delete_each_record_once(durable_backend) -> None:
    """Two store objects on one backend (two replicas) pruning at once count each record once."""
    first, second = durable_backend.make(), durable_backend.make()
    await first.open()
    await second.open()
    try:
        for n in range(30):
            await settled(first, f"c{n}", created=n)
            await close(first, f"i{n}", "resolved")
        results = await asyncio.gather(*(prune_all(s, limit=7) for s in (first, second, first, second)))
        total = sum((r for r in results), Pruned())
        assert (30, 30, 30) == (total.contracts, total.deliveries, total.inbox_items)
        assert [] == (await first.list_contracts()).items
    finally:
        await first.close()
        await second.close()


async def test_a_transcript_tail_keeps_its_seqs_after_the_head_was_trimmed(store: Store) -> None:
    """read_callback's tail after a trimmed head: the entries after the place, with their seqs."""
    session = session_of("w1")
    await settled(store, "a")
    await pending(store, "b", created=1)
    for cid, n in (("a", 2), ("b", 3)):
        await store.append_transcript(session, [{"callbackId": cid, "n": i} for i in range(n)], at=at(5))
    await prune_all(store, PruneBefore(callbacks=CUTOFF))
    await store.put_checkpoint("memory", {"through_seq": 3})
    view = await store.read_callback("b", [], tail=TranscriptTail(session, "memory", "through_seq"))
    assert [(4, "b"), (5, "b")] == [(e.seq, e.entry["callbackId"]) for e in view.transcript or []]
