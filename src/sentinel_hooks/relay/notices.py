"""Messages the service sends on its own: fan-out on fire, resolved lines, new inbox items.

Each becomes deliveries in the outbox (so they get retries and dead letters like the rest),
routed to the console only for ``environment: test`` watchers.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sentinel_hooks.clock import Clock
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.core.envelope import Envelope, new_callback_id
from sentinel_hooks.delivery.dispatch import Dispatcher
from sentinel_hooks.delivery.target import Message
from sentinel_hooks.relay.fallback import Fanout
from sentinel_hooks.relay.relay import Relay, delivery_targets
from sentinel_hooks.store.base import Store
from sentinel_hooks.store.records import Contract, InboxItem
from sentinel_hooks.store.shortcuts import get_envelope

if TYPE_CHECKING:
    from collections.abc import Sequence

FIRST_STEP = "escalation.0"  # the delivery kind of an escalation policy's first step


def is_escalation_kind(kind: object) -> bool:
    """Whether a delivery kind is an escalation's (``escalation``, ``escalation.N``)."""
    return isinstance(kind, str) and kind.split(".", 1)[0] == "escalation"


class Notices:
    """Turns service events into outbox deliveries."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        relay: Relay,
        clock: Clock,
        escalation_targets: Sequence[str],
        store: Store,
    ) -> None:
        self._store = store
        self._dispatcher = dispatcher
        self._relay = relay
        self._clock = clock
        self._escalation_targets = list(escalation_targets)

    async def accepted(self, envelope: Envelope, contract: Contract, fanout: Fanout) -> None:
        """A new pending contract: wake the relay for its deadline, send the fan-out line.

        (The fire's message for the session was stored with the contract, by the intake.)
        """
        self._relay.expect(contract.deadline)
        if fanout.mode == "none":
            return
        data = envelope.to_json() if fanout.mode == "debug" else None
        text = fanout.text
        if data is not None:
            text = f"{text}\n{json.dumps(data, ensure_ascii=False, separators=(',', ':'))}"
        message = Message(
            callback_id=contract.callback_id,
            watcher_id=contract.watcher_id,
            event_name=envelope.watcher.event_name,
            priority=contract.trigger.priority,
            kind="fanout",
            text=text,
            envelope=data,
        )
        targets = delivery_targets(envelope, contract)
        await self._dispatcher.enqueue(
            self._dispatcher.new_deliveries(message, targets, "fanout", at=self._clock.now())
        )

    async def resolved(self, watcher: AnyWatcher, text: str, callback_id: str | None = None) -> None:
        """notifyResolved: the one-line resolved message to the watcher's targets.

        It carries ``callback_id``, the fire whose episode ended, so it joins that fire's Slack
        thread and is keyed ``{callbackId}:{target}:resolved``; with none known (a probe episode)
        it gets a callback id of its own.
        """
        targets = ["console"] if watcher.environment == "test" else list(watcher.delivery_targets)
        message = Message(
            callback_id=callback_id or new_callback_id(),
            watcher_id=watcher.id,
            event_name=watcher.event_name,
            priority=watcher.fire.priority,
            kind="resolved",
            text=text,
        )
        await self._dispatcher.enqueue(
            self._dispatcher.new_deliveries(message, targets, "resolved", at=self._clock.now())
        )

    async def inbox_item(self, item: InboxItem) -> None:
        """A new inbox item: tell the escalationTargets (never about their own failed deliveries).

        An approval request reaches people at once even without escalationTargets: it goes to
        its callback's targets (SPEC §6.1), since the contract waits for it and no fallback
        will tell anyone in the meantime.

        ``escalationTargets`` is a one-step escalation policy (SPEC §15): each target gets step
        0, keyed ``{itemId}:{target}:escalation.0`` (one key per item, even for several items
        of one callback), and the message names the item's callback, as every other message does.
        """
        failed_kind = item.detail.get("delivery", {}).get("kind")
        if item.kind == "delivery_failure" and is_escalation_kind(failed_kind):
            return
        targets = list(self._escalation_targets)
        if not targets and item.kind == "approval":
            targets = await self._callback_targets(item)
        if not targets:
            return
        text = f"Sentinel inbox: new {item.kind} ({item.severity}) — {item.reason}"
        if item.watcher_id:
            text += f" [watcher {item.watcher_id}]"
        if item.kind == "approval":
            text += (
                f"\nApprove: sentinel approvals approve {item.id} · deny: sentinel approvals deny {item.id}"
            )
        message = Message(
            callback_id=item.callback_id or item.id,
            watcher_id=item.watcher_id or "",
            event_name=item.kind,
            priority="high" if item.severity == "critical" else "normal",
            kind=FIRST_STEP,
            text=text,
            extra={"inboxItemId": item.id, "callbackId": item.callback_id},
        )
        deliveries = self._dispatcher.new_deliveries(
            message, targets, FIRST_STEP, at=self._clock.now(), key_id=item.id
        )
        await self._dispatcher.enqueue(deliveries)

    async def _callback_targets(self, item: InboxItem) -> list[str]:
        """The targets of the item's callback (the console only for ``environment: test``)."""
        if item.callback_id is None:
            return []
        contract = await self._store.get_contract(item.callback_id)
        envelope = await get_envelope(self._store, item.callback_id)
        if contract is None or envelope is None:
            return []
        return delivery_targets(envelope, contract)
