"""Messages the service sends on its own: fan-out on fire and resolved lines (a fire resolved
before its page is settled by the relay, ``Relay.resolve``).

Each becomes deliveries in the outbox (so they get retries and dead letters like the rest),
routed to the console only for ``environment: test`` watchers. Inbox items are announced by
their escalation chain (``relay.escalation``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sentinel_hooks.clock import Clock
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.core.envelope import Envelope, new_callback_id
from sentinel_hooks.delivery.dispatch import Dispatcher
from sentinel_hooks.delivery.targets.base import Message
from sentinel_hooks.relay.fallback import Fanout
from sentinel_hooks.relay.relay import Relay, delivery_targets
from sentinel_hooks.store.records import Contract, Delivery


class Notices:
    """Turns service events into outbox deliveries."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        relay: Relay,
        clock: Clock,
    ) -> None:
        self._dispatcher = dispatcher
        self._relay = relay
        self._clock = clock

    def deliveries(self, envelope: Envelope, contract: Contract, fanout: Fanout) -> list[Delivery]:
        """The fan-out line of a new pending contract as deliveries (none in mode ``none``), which
        the intake stores with the contract (``Store.accept_contract``): a fire that is deduped
        or refused sends none. In mode ``debug`` the line carries the envelope's wire text."""
        if fanout.mode == "none":
            return []
        data = envelope.to_json() if fanout.mode == "debug" else None
        text = fanout.text if data is None else f"{fanout.text}\n{envelope.wire_text()}"
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
        return self._dispatcher.new_deliveries(message, targets, "fanout", at=self._clock.now())

    def accepted(self, contract: Contract, deliveries: Sequence[Delivery]) -> None:
        """A new pending contract was stored: wake the relay for its deadline, and the outbox
        for its fan-out line's ``deliveries`` (stored with it)."""
        self._relay.expect(contract.deadline)
        if deliveries:
            self._dispatcher.wake()

    async def resolved(
        self, watcher: AnyWatcher, text: str | None, callback_id: str | None = None, *, settle: bool = True
    ) -> None:
        """The source reports a fire over: settle it ``resolved`` before its page, else send
        the one-line resolved message (notifyResolved; ``text`` None when it is off) as a
        follow-up to the watcher's targets.

        With ``callback_id``, the fire whose episode ended, the relay first tries to settle its
        contract ``resolved`` (nothing paged yet, SPEC §6.4), whose page is then its own line
        (or nothing). Otherwise the line carries ``callback_id``, so it joins that fire's Slack
        thread and is keyed ``{callbackId}:{target}:resolved``; with none known (a probe episode)
        it gets a callback id of its own. ``settle`` false (a momentary fire, ``changed``) skips
        the settling: the line, if any, only joins the thread. A fire of a group (SPEC §19) is
        over for people once every member of its group is: until then nothing is said, and then
        the group's contract is the one settled or followed up (``Relay.speaks_for``).
        """
        if callback_id is not None:
            speaking = await self._relay.speaks_for(callback_id)
            if speaking is None:
                return
            callback_id = speaking
        if (
            settle
            and callback_id is not None
            and await self._relay.resolve(callback_id, notify=text is not None)
        ):
            return
        if text is None:
            return
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
