"""Store contract: inbox items, their compare-and-set transitions and audit history."""

from __future__ import annotations

import asyncio

import pytest

from sentinel_hooks.store import InboxHistoryEntry, InvalidCursor, Store
from tests.contract import stores

backend, store, make = stores.backend, stores.store, stores.make


async def test_created_item_reads_back_equal(store: Store, make) -> None:
    """get_inbox_item returns the item exactly as created."""
    item = make.inbox_item("i-1")
    await store.create_inbox_item(item)
    assert item == await store.get_inbox_item("i-1")


async def test_create_refuses_an_existing_id_and_keeps_the_first(store: Store, make) -> None:
    """A second item with the same id is refused and writes nothing (history included)."""
    first = make.inbox_item("i-1", note="first")
    await store.create_inbox_item(first)
    refused = await store.create_inbox_item(make.inbox_item("i-1", note="second"))
    history = await store.inbox_history("i-1")
    assert (False, first, 1) == (refused, await store.get_inbox_item("i-1"), len(history))


async def test_unknown_item_is_none_with_empty_history(store: Store) -> None:
    """An unknown id has no item and no history."""
    assert (None, []) == (await store.get_inbox_item("nope"), await store.inbox_history("nope"))


async def test_creation_is_the_first_history_entry(store: Store, make) -> None:
    """Creating an item records a change from None to its status by its actor."""
    await store.create_inbox_item(make.inbox_item("i-1", created=2, note="see chart"))
    expected = InboxHistoryEntry(
        at=make.at(2), actor="agent", from_status=None, to_status="open", note="see chart"
    )
    assert [expected] == await store.inbox_history("i-1")


async def test_transition_updates_status_actor_note_and_updated_at(store: Store, make) -> None:
    """A transition from an allowed status returns the updated item, also stored."""
    await store.create_inbox_item(make.inbox_item("i-1"))
    moved = await store.transition_inbox_item(
        "i-1", from_statuses={"open"}, to_status="acked", actor="ana", note="on it", at=make.at(9)
    )
    stored = await store.get_inbox_item("i-1")
    assert (moved, "acked", "ana", "on it", make.at(9)) == (
        stored,
        stored.status if stored else None,
        stored.actor if stored else None,
        stored.note if stored else None,
        stored.updated_at if stored else None,
    )


async def test_transition_appends_to_history(store: Store, make) -> None:
    """Each transition adds who, when, from and to, oldest first."""
    await store.create_inbox_item(make.inbox_item("i-1"))
    await store.transition_inbox_item(
        "i-1", from_statuses={"open"}, to_status="acked", actor="ana", note=None, at=make.at(1)
    )
    await store.transition_inbox_item(
        "i-1", from_statuses={"acked"}, to_status="resolved", actor="bo", note="ok", at=make.at(2)
    )
    history = await store.inbox_history("i-1")
    assert [(None, "open", "agent"), ("open", "acked", "ana"), ("acked", "resolved", "bo")] == [
        (h.from_status, h.to_status, h.actor) for h in history
    ]


async def test_transition_without_a_note_keeps_the_previous_note(store: Store, make) -> None:
    """note=None leaves the item's note as it was."""
    await store.create_inbox_item(make.inbox_item("i-1", note="keep me"))
    moved = await store.transition_inbox_item(
        "i-1", from_statuses={"open"}, to_status="acked", actor="ana", note=None, at=make.at(1)
    )
    assert "keep me" == (moved.note if moved else None)


async def test_transition_from_a_disallowed_status_changes_nothing(store: Store, make) -> None:
    """A status outside from_statuses returns None, leaving item and history untouched."""
    item = make.inbox_item("i-1", status="resolved")
    await store.create_inbox_item(item)
    result = await store.transition_inbox_item(
        "i-1", from_statuses={"open"}, to_status="acked", actor="ana", note=None, at=make.at(1)
    )
    history = await store.inbox_history("i-1")
    assert (None, item, 1) == (result, await store.get_inbox_item("i-1"), len(history))


async def test_transition_of_an_unknown_item_is_none(store: Store, make) -> None:
    """Transitioning an id that does not exist returns None."""
    result = await store.transition_inbox_item(
        "nope", from_statuses={"open"}, to_status="acked", actor="ana", note=None, at=make.at(1)
    )
    assert result is None


async def test_concurrent_transitions_from_open_have_one_winner(store: Store, make) -> None:
    """Of 10 concurrent approve/deny decisions on an open approval, exactly one applies."""
    await store.create_inbox_item(make.inbox_item("i-1", kind="approval"))
    results = await asyncio.gather(
        *(
            store.transition_inbox_item(
                "i-1",
                from_statuses={"open"},
                to_status="approved" if i % 2 else "denied",
                actor=f"user-{i}",
                note=None,
                at=make.at(1),
            )
            for i in range(10)
        )
    )
    winners = [r for r in results if r is not None]
    history = await store.inbox_history("i-1")
    assert (1, 2) == (len(winners), len(history))


async def test_list_inbox_is_newest_first(store: Store, make) -> None:
    """Items are listed by created_at descending."""
    for i, item_id in enumerate(["a", "b", "c"]):
        await store.create_inbox_item(make.inbox_item(item_id, created=i))
    page = await store.list_inbox()
    assert ["c", "b", "a"] == [i.id for i in page.items]


async def test_list_inbox_filters_by_status_and_kind(store: Store, make) -> None:
    """status and kind filters combine."""
    await store.create_inbox_item(make.inbox_item("a", kind="approval"))
    await store.create_inbox_item(make.inbox_item("b", kind="escalation"))
    await store.create_inbox_item(make.inbox_item("c", kind="approval", status="approved"))
    page = await store.list_inbox(status="open", kind="approval")
    assert ["a"] == [i.id for i in page.items]


async def test_list_inbox_follows_a_transition_to_the_new_status(store: Store, make) -> None:
    """After a transition the item is listed under its new status only."""
    await store.create_inbox_item(make.inbox_item("a"))
    await store.transition_inbox_item(
        "a", from_statuses={"open"}, to_status="acked", actor="ana", note=None, at=make.at(1)
    )
    open_items = await store.list_inbox(status="open")
    acked = await store.list_inbox(status="acked", kind="escalation")
    assert ([], ["a"]) == (open_items.items, [i.id for i in acked.items])


async def test_list_inbox_cursor_pages_through_all_without_gaps_or_repeats(store: Store, make) -> None:
    """Following next_cursor with limit 2 visits 7 items once each, newest first."""
    for i in range(7):
        await store.create_inbox_item(make.inbox_item(f"i-{i}", created=i // 2))
    seen, cursor = [], None
    while True:
        page = await store.list_inbox(limit=2, cursor=cursor)
        seen += [i.id for i in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert [f"i-{i}" for i in reversed(range(7))] == seen


async def test_list_inbox_refuses_a_cursor_it_did_not_issue(store: Store) -> None:
    """A cursor that does not decode raises InvalidCursor."""
    with pytest.raises(InvalidCursor):
        await store.list_inbox(cursor="%%%")


# -- an item created with the first step of its escalation chain ------------------------------------


async def test_create_with_deliveries_enqueues_them_with_the_item(store: Store, make) -> None:
    """The deliveries given with a new item are in the outbox, due when they say."""
    item = make.inbox_item("i-1")
    steps = [make.delivery("i-1", "oncall", "escalation.0"), make.delivery("i-1", "lead", "escalation.0")]
    assert await store.create_inbox_item(item, steps)
    assert sorted(steps, key=lambda d: d.key) == await store.list_deliveries("i-1")
    claimed = await store.claim_deliveries(make.at(0))
    assert sorted(d.key for d in steps) == sorted(d.key for d in claimed)


async def test_create_with_deliveries_refused_for_an_existing_id_enqueues_nothing(store: Store, make) -> None:
    """A second item with the same id writes none of its deliveries."""
    await store.create_inbox_item(make.inbox_item("i-1"))
    refused = await store.create_inbox_item(
        make.inbox_item("i-1"), [make.delivery("i-1", "oncall", "escalation.0")]
    )
    assert (False, []) == (refused, await store.list_deliveries("i-1"))


async def test_create_leaves_a_delivery_key_already_queued_as_it_was(store: Store, make) -> None:
    """A delivery whose key is already in the outbox keeps its first record (idempotent by key)."""
    first = make.delivery("i-1", "oncall", "escalation.0", due=1)
    await store.enqueue_delivery(first)
    later = make.delivery("i-1", "oncall", "escalation.0", due=9)
    assert await store.create_inbox_item(make.inbox_item("i-1"), [later])
    assert [first] == await store.list_deliveries("i-1")


async def test_create_with_a_future_delivery_is_not_claimed_before_it_is_due(store: Store, make) -> None:
    """A later step stored with the item waits for its time."""
    await store.create_inbox_item(
        make.inbox_item("i-1"), [make.delivery("i-1", "lead", "escalation.1", due=5)]
    )
    assert [] == await store.claim_deliveries(make.at(4.999))
    assert ["i-1:lead:escalation.1"] == [d.key for d in await store.claim_deliveries(make.at(5))]
