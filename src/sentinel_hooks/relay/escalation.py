"""Escalation chains (SPEC.md §15): who hears of an open inbox item, when, and in what words.

Each step of an item's chain is a delivery in the outbox, kind ``escalation.N`` (steps numbered
from 0, keyed ``{itemId}:{target}:escalation.N``), due when the step's ``afterMs`` has passed
since the item was created. So the steps ride on the relay's one durable deadline mechanism:
the outbox's due index, claimed atomically with a lease by whichever replica polls first.

* A new item is stored with the deliveries of its first step in one atomic step
  (``first_step``, given to ``Inbox`` as its planner): a crash right after cannot lose them.
* When the outbox is about to send a step, it asks ``admit`` (this object is the dispatcher's
  ``DeliveryGate``): an item no longer ``open`` (acked, resolved, approved, denied, expired)
  gets the delivery ``cancelled``, which ends the chain; an open one first has the NEXT step's
  deliveries enqueued (idempotent by key, so a crash and a second claim add nothing), then the
  step is sent. A step is thus sent at most once per target (receivers drop a repeat after a
  crash mid-send by its Idempotency-Key) and the chain goes on exactly as long as the item is open.

Which chain an item follows: its watcher's ``escalationPolicy``, else ``defaultEscalationPolicy``,
else ``escalationTargets`` as a one-step policy at ``afterMs: 0``; with none of these an approval
still goes to its callback's targets (SPEC §6.1), as a one-step chain. A delivery_failure item
about an escalation delivery starts no chain (it would tell the same broken target again).

With ``repeatAfterMs`` step numbers continue: step ``n`` is step ``n mod len(steps)`` of round
``n div len(steps)``, and each round starts ``repeatAfterMs`` after the previous round's last
step. After downtime only the latest overdue round of reminders is sent, not every round missed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from sentinel_hooks.clock import Clock, iso
from sentinel_hooks.config.escalation import EscalationPolicySpec, EscalationStep
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.delivery.targets.base import Message
from sentinel_hooks.inbox.severity import message_priority
from sentinel_hooks.metrics import Metrics
from sentinel_hooks.relay.relay import delivery_targets
from sentinel_hooks.store.base import ContractStore, InboxStore, OutboxStore
from sentinel_hooks.store.records import (
    Delivery,
    InboxItem,
    escalation_kind,
    escalation_step,
    is_escalation_kind,
)
from sentinel_hooks.store.shortcuts import get_envelope

log = logging.getLogger(__name__)

SHORTHAND = "escalationTargets"
"""The policy name of the ``escalationTargets`` shorthand (one step at afterMs 0)."""
CALLBACK_TARGETS = "callbackTargets"
"""The policy name of an approval sent to its callback's targets (no policy applies)."""


@dataclass(frozen=True)
class Chain:
    """One item's policy: its name, steps and repeat (``EscalationPolicySpec`` with a name)."""

    name: str
    steps: tuple[EscalationStep, ...]
    repeat_after_ms: int | None = None

    @classmethod
    def of(cls, name: str, spec: EscalationPolicySpec) -> Chain:
        return cls(name, tuple(spec.steps), spec.repeat_after_ms)

    @classmethod
    def one_step(cls, name: str, targets: Sequence[str]) -> Chain:
        return cls(name, (EscalationStep.model_validate({"afterMs": 0, "targets": list(targets)}),))

    @property
    def _period_ms(self) -> int:
        """The time between a step and the same step of the next round."""
        first, last = self.steps[0].after_ms, self.steps[-1].after_ms
        return last - first + (self.repeat_after_ms or 0)

    def step(self, number: int) -> EscalationStep:
        """The policy step that step ``number`` repeats."""
        return self.steps[number % len(self.steps)]

    def offset_ms(self, number: int) -> int:
        """How long after the item's creation step ``number`` is due."""
        rounds, index = divmod(number, len(self.steps))
        return self.steps[index].after_ms + rounds * self._period_ms

    def next_after(self, number: int, *, elapsed_ms: int) -> int | None:
        """The step that follows step ``number`` when ``elapsed_ms`` have passed since the item
        was created; None at the end of a chain without repeat. Whole repeat rounds already
        overdue are skipped (only the latest overdue reminder of a step goes out)."""
        following = number + 1
        if following >= len(self.steps):
            if self.repeat_after_ms is None:
                return None
            late_ms = elapsed_ms - self.offset_ms(following)
            if late_ms > 0:
                following += (late_ms // self._period_ms) * len(self.steps)
        return following


def format_age(ms: int) -> str:
    """A step's age in words people read at a glance: ``45s``, ``1.5s``, ``15m``, ``1h30m``, ``2d3h``."""
    if ms < 60_000:
        return f"{ms / 1000:g}s"
    minutes = ms // 60_000
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    return "".join(parts[:2] if days else parts)


def item_link(public_url: str | None, item_id: str) -> str | None:
    """The web page's address of the item (``{publicUrl}/#inbox/{id}``), when publicUrl is set."""
    return None if public_url is None else f"{public_url}/#inbox/{item_id}"


def step_text(item: InboxItem, offset_ms: int, *, public_url: str | None = None) -> str:
    """What a step's targets read, SPEC §15's text for every step, the first one included (the
    first person paged must be able to ack from the message): ``Unacknowledged for {age}:
    {reason} ({kind}, {severity}, watcher {watcherId}) — ack: sentinel inbox ack {id}``, then the
    link to the item when ``publicUrl`` is set. An approval cannot be acked (only approved or
    denied), so its steps name those two commands in place of the ack."""
    watcher = f", watcher {item.watcher_id}" if item.watcher_id else ""
    if item.kind == "approval":
        how = f"approve: sentinel approvals approve {item.id} · deny: sentinel approvals deny {item.id}"
    else:
        how = f"ack: sentinel inbox ack {item.id}"
    age = format_age(offset_ms)
    text = f"Unacknowledged for {age}: {item.reason} ({item.kind}, {item.severity}{watcher}) — {how}"
    link = item_link(public_url, item.id)
    return text if link is None else f"{text}\n{link}"


def chain_status(item: InboxItem, deliveries: Sequence[Delivery]) -> dict[str, Any] | None:
    """Where an item's chain is, from its escalation deliveries (``list_deliveries(item.id)``):
    ``{policy, step, nextStep, nextAt}``; None when it has none.

    ``step`` is the highest step that came due and was attempted (None before the first),
    ``nextStep``/``nextAt`` the step waiting for its time (None once the item is closed or the
    chain has ended)."""
    steps = [(n, d) for d in deliveries if (n := escalation_step(d.kind)) is not None]
    if not steps:
        return None
    reached = [n for n, d in steps if d.state in ("delivered", "failed") or d.attempts > 0]
    waiting = sorted((d.next_attempt_at, n) for n, d in steps if d.state == "pending" and d.attempts == 0)
    open_next = waiting[0] if waiting and item.status == "open" else None
    return {
        "policy": _policy_of(steps[-1][1]),
        "step": max(reached) if reached else None,
        "nextStep": None if open_next is None else open_next[1],
        "nextAt": None if open_next is None else iso(open_next[0]),
    }


def _policy_of(delivery: Delivery) -> str | None:
    extra = delivery.message.get("extra")
    escalation = extra.get("escalation") if isinstance(extra, dict) else None
    policy = escalation.get("policy") if isinstance(escalation, dict) else None
    return policy if isinstance(policy, str) else None


class EscalationRoles(ContractStore, InboxStore, OutboxStore, Protocol):
    """The store roles escalations call: the item's callback and envelope, the item a step
    belongs to, and the outbox that takes the next step."""


class Escalations:
    """Plans, gates and counts the steps of inbox items' chains for one service."""

    def __init__(
        self,
        *,
        store: EscalationRoles,
        clock: Clock,
        service: ServiceConfig,
        watcher: Callable[[str], AnyWatcher | None],
        redactor: Redactor | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._policies: Mapping[str, EscalationPolicySpec] = service.escalation_policies
        self._default = service.default_escalation_policy
        self._shorthand = list(service.escalation_targets)
        self._public_url = service.server.public_url
        self._watcher = watcher
        self._redactor = redactor or Redactor()
        self._metrics = metrics

    # -- a new item: its chain and first step ---------------------------------------------------

    async def first_step(self, item: InboxItem) -> list[Delivery]:
        """The deliveries of the item's first step, to store with the item ([] when no chain)."""
        failed_kind = item.detail.get("delivery", {}).get("kind")
        if item.kind == "delivery_failure" and is_escalation_kind(failed_kind):
            return []
        chain = await self._chain_for(item)
        if chain is None:
            return []
        contract = await self._store.get_contract(item.callback_id) if item.callback_id else None
        priority = message_priority(item.severity, contract.trigger.priority if contract else None)
        return self.deliveries(item, chain, 0, priority=priority)

    async def _chain_for(self, item: InboxItem) -> Chain | None:
        watcher = self._watcher(item.watcher_id) if item.watcher_id else None
        name = (watcher.escalation_policy if watcher is not None else None) or self._default
        if name is not None and name in self._policies:
            return Chain.of(name, self._policies[name])
        if self._shorthand:
            return Chain.one_step(SHORTHAND, self._shorthand)
        if item.kind == "approval":
            targets = await self._callback_targets(item)
            return Chain.one_step(CALLBACK_TARGETS, targets) if targets else None
        return None

    async def _callback_targets(self, item: InboxItem) -> list[str]:
        """The targets of the item's callback (the console only for ``environment: test``)."""
        if item.callback_id is None:
            return []
        contract = await self._store.get_contract(item.callback_id)
        envelope = await get_envelope(self._store, item.callback_id)
        if contract is None or envelope is None:
            return []
        return delivery_targets(envelope, contract)

    def deliveries(self, item: InboxItem, chain: Chain, number: int, *, priority: str) -> list[Delivery]:
        """Step ``number``'s deliveries, one per target, due ``offset_ms(number)`` after the item's
        creation (their ``created_at`` too, so delivery retries count from then), as messages of
        ``priority`` (``message_priority``: the fire's, or more for a more severe item)."""
        offset_ms = chain.offset_ms(number)
        due = due_at(item, chain, number)
        kind = escalation_kind(number)
        message = Message(
            callback_id=item.callback_id or item.id,
            watcher_id=item.watcher_id or "",
            event_name=item.kind,
            priority=priority,
            kind=kind,
            text=step_text(item, offset_ms, public_url=self._public_url),
            extra={
                "inboxItemId": item.id,
                "callbackId": item.callback_id,
                "escalation": {"policy": chain.name, "step": number},
                **({"link": link} if (link := item_link(self._public_url, item.id)) else {}),
            },
        )
        body = self._redactor.data(message.to_json())
        targets = dict.fromkeys(chain.step(number).targets)
        return [Delivery.new(item.id, target, kind, body, at=due) for target in targets]

    # -- the outbox's gate ----------------------------------------------------------------------

    async def admit(self, delivery: Delivery) -> bool:
        """Whether the outbox may send this escalation delivery now (see the module docstring):
        False for an item no longer open; for an open one, the next step is enqueued first."""
        item = await self._store.get_inbox_item(delivery.callback_id)
        if item is None:  # pruned, or sent by a version before chains: send it as it was meant
            return True
        if item.status != "open":
            log.info("escalation %s not sent: inbox item %s is %s", delivery.key, item.id, item.status)
            return False
        number = escalation_step(delivery.kind)
        if number is not None:
            for following in self._next_step(item, delivery, number):
                await self._store.enqueue_delivery(following)
        return True

    def _next_step(self, item: InboxItem, delivery: Delivery, number: int) -> list[Delivery]:
        name = _policy_of(delivery)
        if name in (None, SHORTHAND, CALLBACK_TARGETS):
            return []  # one-step chains (and steps stored without a policy) end here
        spec = self._policies.get(name or "")
        if spec is None:
            log.warning(
                "inbox item %s: escalation policy %r is gone from the config; its chain ends", item.id, name
            )
            return []
        chain = Chain.of(name or "", spec)
        elapsed_ms = int((self._clock.now() - item.created_at) / timedelta(milliseconds=1))
        following = chain.next_after(number, elapsed_ms=elapsed_ms)
        if following is None:
            return []
        priority = message_priority(item.severity, delivery.message.get("priority"))
        return self.deliveries(item, chain, following, priority=priority)

    def sent(self, delivery: Delivery) -> None:
        """A target accepted an escalation step: count it by policy and policy step."""
        number = escalation_step(delivery.kind)
        if self._metrics is None or number is None:
            return
        name = _policy_of(delivery) or "unknown"
        spec = self._policies.get(name)
        index = number if spec is None else number % len(spec.steps)  # repeats count as their step
        self._metrics.escalation_steps.labels(name, str(index)).inc()


def due_at(item: InboxItem, chain: Chain, number: int) -> datetime:
    """When step ``number`` of ``chain`` is due for ``item``."""
    return item.created_at + timedelta(milliseconds=chain.offset_ms(number))
