"""The Inbox service over SQLite in memory and in a file: creation, transitions, refusals, races, hooks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.errors import Conflict, NotFound
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.store import InboxItem, Store
from sentinel_hooks.store.sqlite import SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """An open SqliteStore, in memory or in a file."""
    made = SqliteStore.in_memory() if request.param == "memory" else SqliteStore(tmp_path / "inbox.db")
    await made.open()
    yield made
    await made.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def inbox(store: Store, clock: FakeClock) -> Inbox:
    return Inbox(store, clock)


async def escalation(inbox: Inbox, **extra: Any) -> InboxItem:
    return await inbox.create("escalation", severity="warning", reason="price fell fast", **extra)


async def approval(inbox: Inbox) -> InboxItem:
    return await inbox.create("approval", severity="info", reason="run restart-api", actor="agent")


async def test_create_stores_an_open_item_with_the_given_fields(inbox: Inbox) -> None:
    """create returns the stored item: open, timestamps from the clock, fields as given."""
    item = await escalation(
        inbox, watcher_id="eth", callback_id="cb-1", session_key="s:eth", detail={"price": 1999}
    )
    expected = InboxItem(
        id=item.id,
        kind="escalation",
        status="open",
        severity="warning",
        reason="price fell fast",
        watcher_id="eth",
        callback_id="cb-1",
        session_key="s:eth",
        created_at=T0,
        updated_at=T0,
        actor="sentinel",
        detail={"price": 1999},
    )
    assert (expected, expected) == (item, await inbox.store.get_inbox_item(item.id))


async def test_create_gives_each_item_a_ulid(inbox: Inbox) -> None:
    """Ids are 26-character ULIDs, distinct per item."""
    first, second = await escalation(inbox), await escalation(inbox)
    assert (26, 26, True) == (len(first.id), len(second.id), first.id != second.id)


async def test_approvals_start_open(inbox: Inbox) -> None:
    """An approval item starts open, awaiting a decision."""
    assert ("approval", "open") == ((item := await approval(inbox)).kind, item.status)


async def test_create_with_an_existing_id_returns_the_stored_item(inbox: Inbox) -> None:
    """A given item_id makes creation idempotent: the first item is kept and returned."""
    first = await escalation(inbox, item_id="dead-1")
    again = await inbox.create("escalation", severity="critical", reason="other", item_id="dead-1")
    assert first == again


async def test_notify_receives_each_new_item(store: Store, clock: FakeClock) -> None:
    """notify is awaited with every created item, once."""
    seen: list[InboxItem] = []

    async def notify(item: InboxItem) -> None:
        seen.append(item)

    inbox = Inbox(store, clock, notify=notify)
    item = await escalation(inbox, item_id="x-1")
    await escalation(inbox, item_id="x-1")
    assert [item] == seen


async def test_a_failing_notify_is_logged_not_raised(
    store: Store, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception in notify leaves the item stored and is only logged."""

    async def notify(item: InboxItem) -> None:
        raise RuntimeError("slack down")

    inbox = Inbox(store, clock, notify=notify)
    item = await escalation(inbox)
    assert (item, True) == (
        await store.get_inbox_item(item.id),
        "notify hook failed" in caplog.text,
    )


async def test_ack_moves_open_to_acked_with_actor_note_and_time(inbox: Inbox, clock: FakeClock) -> None:
    """ack sets acked, the actor, the note and updated_at."""
    item = await escalation(inbox)
    clock.advance(5)
    acked = await inbox.ack(item.id, actor="ana", note="looking")
    assert ("acked", "ana", "looking", clock.now()) == (
        acked.status,
        acked.actor,
        acked.note,
        acked.updated_at,
    )


async def test_resolve_moves_open_to_resolved(inbox: Inbox) -> None:
    """An open item can be resolved directly."""
    item = await escalation(inbox)
    assert "resolved" == (await inbox.resolve(item.id, actor="ana")).status


async def test_resolve_moves_acked_to_resolved(inbox: Inbox) -> None:
    """An acked item can be resolved."""
    item = await escalation(inbox)
    await inbox.ack(item.id, actor="ana")
    assert "resolved" == (await inbox.resolve(item.id, actor="bo", note="fixed")).status


async def test_delivery_failures_are_acked_and_resolved_like_escalations(inbox: Inbox) -> None:
    """A delivery_failure item follows open → acked → resolved."""
    item = await inbox.create("delivery_failure", severity="critical", reason="slack: 500 x5")
    await inbox.ack(item.id, actor="ana")
    assert "resolved" == (await inbox.resolve(item.id, actor="ana")).status


async def test_approve_moves_an_open_approval_to_approved(inbox: Inbox) -> None:
    """approve sets approved."""
    item = await approval(inbox)
    assert "approved" == (await inbox.approve(item.id, actor="ana")).status


async def test_deny_moves_an_open_approval_to_denied(inbox: Inbox) -> None:
    """deny sets denied with the note."""
    item = await approval(inbox)
    denied = await inbox.deny(item.id, actor="ana", note="not now")
    assert ("denied", "not now") == (denied.status, denied.note)


async def test_expire_moves_an_open_approval_to_expired_by_sentinel(inbox: Inbox) -> None:
    """expire sets expired, by the sentinel actor by default."""
    item = await approval(inbox)
    expired = await inbox.expire(item.id)
    assert ("expired", "sentinel") == (expired.status, expired.actor)


async def test_resolving_a_resolved_item_is_a_conflict_naming_the_status(inbox: Inbox) -> None:
    """A second resolve raises Conflict explaining the current and allowed statuses."""
    item = await escalation(inbox)
    await inbox.resolve(item.id, actor="ana")
    with pytest.raises(Conflict) as raised:
        await inbox.resolve(item.id, actor="bo")
    assert f"item {item.id} is resolved; only open or acked items can be resolved" == str(raised.value)


async def test_acking_an_acked_item_is_a_conflict(inbox: Inbox) -> None:
    """ack accepts only open items."""
    item = await escalation(inbox)
    await inbox.ack(item.id, actor="ana")
    with pytest.raises(Conflict, match="is acked; only open items can be acked"):
        await inbox.ack(item.id, actor="bo")


async def test_approving_an_escalation_is_a_conflict(inbox: Inbox) -> None:
    """approve on a non-approval item is refused and changes nothing."""
    item = await escalation(inbox)
    with pytest.raises(Conflict, match="not an approval"):
        await inbox.approve(item.id, actor="ana")
    assert item == await inbox.store.get_inbox_item(item.id)


async def test_acking_an_approval_is_a_conflict(inbox: Inbox) -> None:
    """ack on an approval is refused: approvals are approved or denied."""
    item = await approval(inbox)
    with pytest.raises(Conflict, match="approved or denied"):
        await inbox.ack(item.id, actor="ana")


async def test_denying_an_approved_approval_is_a_conflict(inbox: Inbox) -> None:
    """A decided approval cannot be decided again."""
    item = await approval(inbox)
    await inbox.approve(item.id, actor="ana")
    with pytest.raises(Conflict, match="is approved; only open approvals can be denied"):
        await inbox.deny(item.id, actor="bo")


async def test_expiring_a_decided_approval_is_a_conflict(inbox: Inbox) -> None:
    """expire after a decision is refused (the decision stands)."""
    item = await approval(inbox)
    await inbox.deny(item.id, actor="ana")
    with pytest.raises(Conflict, match="is denied"):
        await inbox.expire(item.id)


@pytest.mark.parametrize("action", ["ack", "resolve", "approve", "deny", "expire"])
async def test_unknown_id_is_not_found(inbox: Inbox, action: str) -> None:
    """Every action on an unknown id raises NotFound naming it."""
    with pytest.raises(NotFound, match="'nope' not found"):
        await getattr(inbox, action)("nope", actor="ana")


async def test_get_of_an_unknown_id_is_not_found(inbox: Inbox) -> None:
    """get raises NotFound for an unknown id."""
    with pytest.raises(NotFound):
        await inbox.get("nope")


async def test_two_racing_acks_one_wins_one_conflicts(inbox: Inbox) -> None:
    """Concurrent acks: exactly one succeeds, the other gets Conflict; one history entry added."""
    item = await escalation(inbox)
    results = await asyncio.gather(
        inbox.ack(item.id, actor="ana"), inbox.ack(item.id, actor="bo"), return_exceptions=True
    )
    _, history = await inbox.get(item.id)
    assert (1, 1, 2) == (
        sum(isinstance(r, InboxItem) for r in results),
        sum(isinstance(r, Conflict) for r in results),
        len(history),
    )


async def test_racing_approve_and_deny_yield_one_decision(inbox: Inbox) -> None:
    """approve and deny at once: exactly one decision is stored."""
    item = await approval(inbox)
    results = await asyncio.gather(
        inbox.approve(item.id, actor="ana"), inbox.deny(item.id, actor="bo"), return_exceptions=True
    )
    winners = [r for r in results if isinstance(r, InboxItem)]
    stored, _ = await inbox.get(item.id)
    assert (1, winners[0].status) == (len(winners), stored.status)


async def test_history_records_every_change_oldest_first(inbox: Inbox, clock: FakeClock) -> None:
    """get returns the item and who changed it, when, from what, to what, with the note."""
    item = await escalation(inbox)
    clock.advance(1)
    await inbox.ack(item.id, actor="ana", note="on it")
    clock.advance(1)
    await inbox.resolve(item.id, actor="bo")
    stored, history = await inbox.get(item.id)
    expected = [
        (T0, "sentinel", None, "open", None),
        (T0 + timedelta(seconds=1), "ana", "open", "acked", "on it"),
        (T0 + timedelta(seconds=2), "bo", "acked", "resolved", None),
    ]
    assert ("resolved", expected) == (
        stored.status,
        [(h.at, h.actor, h.from_status, h.to_status, h.note) for h in history],
    )


async def test_on_decision_receives_approvals_denials_and_expiries(store: Store, clock: FakeClock) -> None:
    """on_decision is awaited after approve, deny and expire with the moved item."""
    decided: list[tuple[str, str]] = []

    async def on_decision(item: InboxItem) -> None:
        decided.append((item.id, item.status))

    inbox = Inbox(store, clock, on_decision=on_decision)
    first, second, third = await approval(inbox), await approval(inbox), await approval(inbox)
    await inbox.approve(first.id, actor="ana")
    await inbox.deny(second.id, actor="ana")
    await inbox.expire(third.id)
    assert [(first.id, "approved"), (second.id, "denied"), (third.id, "expired")] == decided


async def test_on_decision_is_not_called_for_ack_or_resolve(store: Store, clock: FakeClock) -> None:
    """Working an escalation is not a decision."""
    decided: list[InboxItem] = []

    async def on_decision(item: InboxItem) -> None:
        decided.append(item)

    inbox = Inbox(store, clock, on_decision=on_decision)
    item = await escalation(inbox)
    await inbox.ack(item.id, actor="ana")
    await inbox.resolve(item.id, actor="ana")
    assert [] == decided


async def test_a_failing_on_decision_does_not_undo_the_decision(store: Store, clock: FakeClock) -> None:
    """An exception in on_decision is swallowed; the approval stays approved."""

    async def on_decision(item: InboxItem) -> None:
        raise RuntimeError("session gone")

    inbox = Inbox(store, clock, on_decision=on_decision)
    item = await approval(inbox)
    approved = await inbox.approve(item.id, actor="ana")
    assert ("approved", approved) == (approved.status, (await inbox.get(item.id))[0])


async def test_list_filters_by_status_and_kind(inbox: Inbox) -> None:
    """list returns only items of the given status and kind."""
    open_escalation = await escalation(inbox)
    acked = await escalation(inbox)
    await inbox.ack(acked.id, actor="ana")
    waiting = await approval(inbox)
    assert ([open_escalation.id], [waiting.id]) == (
        [i.id for i in (await inbox.list(status="open", kind="escalation")).items],
        [i.id for i in (await inbox.list(kind="approval")).items],
    )


async def test_list_pages_newest_first(inbox: Inbox, clock: FakeClock) -> None:
    """Paging with the cursor visits every item once, newest first."""
    made = []
    for _ in range(5):
        made.append((await escalation(inbox)).id)
        clock.advance(1)
    first = await inbox.list(limit=2)
    second = await inbox.list(limit=2, cursor=first.next_cursor)
    third = await inbox.list(limit=2, cursor=second.next_cursor)
    seen = [i.id for page in (first, second, third) for i in page.items]
    assert (made[::-1], None) == (seen, third.next_cursor)
