"""The inbox service: create escalations, approvals and delivery failures, and move them on.

``Inbox`` is what the API, the CLI (through the API), hook sessions and the relay use; it
owns no state of its own. Items and their audit trail live in the Store, and every status
change is the store's atomic compare-and-set, so of two operators acking the same item at
once exactly one succeeds and the other gets ``Conflict`` naming the item's new status.

Three hooks, given at construction, connect the inbox to the rest of the service:

* ``plan(item)`` is awaited before a new item is stored and returns the deliveries of the first
  step of its escalation chain (SPEC.md §15, ``relay.escalation``); the store writes them with
  the item in one atomic step, so a crash in between cannot lose them.
* ``notify(item)`` is awaited after a new item is stored (the service wakes the outbox there).
* ``on_decision(item)`` is awaited after an approval is approved, denied or expired: the hook
  sessions resume the paused session there (SPEC.md §5.4). ``item.status`` says which.

An exception in ``plan`` is logged and the item is stored without deliveries (an item nobody is
told of beats no item). An exception in another hook is logged and swallowed: the status change
is already stored, and the caller (an operator's HTTP request, a session's tool call) must not
see a failure for it.

A new item's reason and detail are stored with secrets masked, whoever wrote them (an agent,
a failed delivery's error, a proposed command): what the inbox shows is what is stored, and
an approved command runs as shown.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sentinel_hooks.clock import Clock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.core.envelope import new_callback_id
from sentinel_hooks.errors import Conflict, NotFound
from sentinel_hooks.inbox.transitions import (
    DECISIONS,
    RULES,
    Action,
    initial_status,
    kind_refusal,
    status_refusal,
)
from sentinel_hooks.store.base import InboxStore
from sentinel_hooks.store.records import (
    Delivery,
    InboxHistoryEntry,
    InboxItem,
    InboxKind,
    InboxStatus,
    Page,
    Severity,
)

log = logging.getLogger(__name__)

ItemHook = Callable[[InboxItem], Awaitable[None]]
"""An async callback receiving an inbox item (``notify``, ``on_decision``)."""
ItemPlan = Callable[[InboxItem], Awaitable[Sequence[Delivery]]]
"""What to enqueue with a new inbox item (``plan``)."""


class Inbox:
    """Escalations, approvals and delivery failures kept in ``store`` (SPEC.md §8)."""

    def __init__(
        self,
        store: InboxStore,
        clock: Clock,
        *,
        plan: ItemPlan | None = None,
        notify: ItemHook | None = None,
        on_decision: ItemHook | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.store = store
        self._plan = plan
        self._redactor = redactor or Redactor()
        self.clock = clock
        self._notify = notify
        self._on_decision = on_decision

    async def create(
        self,
        kind: InboxKind,
        *,
        severity: Severity,
        reason: str,
        watcher_id: str | None = None,
        callback_id: str | None = None,
        session_key: str | None = None,
        detail: dict[str, Any] | None = None,
        actor: str = "sentinel",
        item_id: str | None = None,
        escalate: bool = True,
    ) -> InboxItem:
        """Store a new ``open`` item (id: a fresh ULID) with what ``plan`` asks to enqueue, and
        hand it to ``notify``.

        Pass ``item_id`` to make creation idempotent (e.g. derived from a delivery key): when
        an item with that id exists, it is returned as stored and ``notify`` is not called again.
        ``escalate=False`` starts no escalation chain (a person is taking the item as it is made).
        """
        now = self.clock.now()
        item = InboxItem(
            id=item_id or new_callback_id(),
            kind=kind,
            status=initial_status(kind),
            severity=severity,
            reason=self._redactor.text(reason),
            watcher_id=watcher_id,
            callback_id=callback_id,
            session_key=session_key,
            created_at=now,
            updated_at=now,
            actor=actor,
            detail=self._redactor.data(detail or {}),
        )
        planned = await self._planned(item) if escalate else ()
        if not await self.store.create_inbox_item(item, planned):
            existing = await self.store.get_inbox_item(item.id)
            if existing is None:  # pragma: no cover - only if the id is deleted in between
                raise Conflict(f"inbox item {item.id} could not be created; try again")
            return existing
        await self._call("notify", self._notify, item)
        return item

    async def _planned(self, item: InboxItem) -> Sequence[Delivery]:
        if self._plan is None:
            return ()
        try:
            return await self._plan(item)
        except Exception:
            log.exception("planning the escalation of inbox item %s failed; it is stored without", item.id)
            return ()

    async def get(self, item_id: str) -> tuple[InboxItem, builtins.list[InboxHistoryEntry]]:
        """The item and its history (oldest first); ``NotFound`` for an unknown id."""
        item = await self._item(item_id)
        return item, await self.store.inbox_history(item_id)

    async def list(
        self,
        status: InboxStatus | None = None,
        kind: InboxKind | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[InboxItem]:
        """Items newest first, filtered; pass ``next_cursor`` back for the next page."""
        return await self.store.list_inbox(status=status, kind=kind, limit=limit, cursor=cursor)

    async def ack(self, item_id: str, *, actor: str, note: str | None = None) -> InboxItem:
        """``open → acked`` (escalations and delivery failures)."""
        return await self._apply(item_id, "ack", actor=actor, note=note)

    async def resolve(self, item_id: str, *, actor: str, note: str | None = None) -> InboxItem:
        """``open | acked → resolved`` (escalations and delivery failures)."""
        return await self._apply(item_id, "resolve", actor=actor, note=note)

    async def approve(self, item_id: str, *, actor: str, note: str | None = None) -> InboxItem:
        """``open → approved`` (approvals only); then ``on_decision``."""
        return await self._apply(item_id, "approve", actor=actor, note=note)

    async def deny(self, item_id: str, *, actor: str, note: str | None = None) -> InboxItem:
        """``open → denied`` (approvals only); then ``on_decision``."""
        return await self._apply(item_id, "deny", actor=actor, note=note)

    async def expire(self, item_id: str, *, actor: str = "sentinel", note: str | None = None) -> InboxItem:
        """``open → expired`` for an approval nobody decided in time; then ``on_decision``."""
        return await self._apply(item_id, "expire", actor=actor, note=note)

    async def _item(self, item_id: str) -> InboxItem:
        item = await self.store.get_inbox_item(item_id)
        if item is None:
            raise NotFound(f"inbox item {item_id!r} not found; `sentinel inbox list` shows the items")
        return item

    async def _apply(self, item_id: str, action: Action, *, actor: str, note: str | None) -> InboxItem:
        """Check the kind, then compare-and-set the status; explain a refusal with ``Conflict``."""
        item = await self._item(item_id)
        wrong_kind = kind_refusal(item.id, item.kind, action)
        if wrong_kind is not None:
            raise Conflict(wrong_kind)
        rule = RULES[action]
        moved = await self.store.transition_inbox_item(
            item_id,
            from_statuses=rule.from_statuses,
            to_status=rule.to_status,
            actor=actor,
            note=note,
            at=self.clock.now(),
        )
        if moved is None:
            current = await self._item(item_id)
            reason = status_refusal(current.id, current.status, action)
            raise Conflict(reason or f"item {item_id} changed while it was being {rule.to_status}; retry")
        log.info("inbox item %s %s by %s", moved.id, moved.status, actor)
        if action in DECISIONS:
            await self._call("on_decision", self._on_decision, moved)
        return moved

    async def _call(self, name: str, hook: ItemHook | None, item: InboxItem) -> None:
        if hook is None:
            return
        try:
            await hook(item)
        except Exception:
            log.exception("inbox %s hook failed for item %s (the item is stored)", name, item.id)


ITEM_PAGE = 200
ITEM_PAGES = 25  # items searched per status for one callback's (5,000)


async def callback_items(
    store: InboxStore, callback_id: str, statuses: Sequence[InboxStatus | None]
) -> builtins.list[InboxItem]:
    """The escalation items of ``callback_id`` in each of ``statuses`` (None: any), newest first
    within each status (bounded: ``ITEM_PAGES`` pages of ``ITEM_PAGE`` per status)."""
    found: builtins.list[InboxItem] = []
    for status in statuses:
        cursor: str | None = None
        for _ in range(ITEM_PAGES):
            page = await store.list_inbox(status=status, kind="escalation", limit=ITEM_PAGE, cursor=cursor)
            found.extend(item for item in page.items if item.callback_id == callback_id)
            cursor = page.next_cursor
            if not cursor:
                break
    return found
