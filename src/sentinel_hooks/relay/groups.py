"""The relay's part of grouping (SPEC §19): a group's fallback, and the follow-ups that gather the
fires that joined a group after its page.

A group's contract is settled like any other (``Relay.settle_due``); its fallback names the group
and lists its first members (``group_fallback``). Fires that join after the page wait in the store
(``GroupStore``) until their follow-up is due, at most one per group every ``intervalMs``;
``send_joins`` claims those batches, builds one ``{K} more fires: …`` message per group, and
records it with the joins it carries in one store step, so a retry after a crash or a replica
racing this one sends it once (its delivery keys end ``joined.N``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Protocol

from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.grouping import MEMBER_LINES, group_fallback_text, highest_priority, joined_text
from sentinel_hooks.delivery.dispatch import Dispatcher
from sentinel_hooks.delivery.targets.base import Message
from sentinel_hooks.relay.fallback import after_payload, budget_ran_out, member_line
from sentinel_hooks.store.base import ContractStore, GroupStore
from sentinel_hooks.store.records import Contract, Delivery, GroupInfo, JoinBatch


class JoinRoles(GroupStore, ContractStore, Protocol):
    """The store roles follow-ups of joins need: the batches, and the group's contract and envelopes."""


def group_fallback(
    contract: Contract,
    group: GroupInfo,
    event_name: str,
    members: Mapping[str, Envelope],
    *,
    escalation: tuple[str, str] | None = None,
    investigating: bool = False,
    stopped: str | None = None,
) -> tuple[str, str]:
    """The group's fallback and the priority it pages with: the most urgent of its members'
    (SPEC §19; watchers sharing a group ``name`` may differ), as its first line says. The lines
    after the members' are a single fire's (``fallback.after_payload``), and a budget that
    stopped the session is named on the first line as for a single fire."""
    found = [members[m] for m in group.members if m in members]
    priority = highest_priority([contract.trigger.priority, *(e.trigger.priority for e in found)])
    first = group_fallback_text(
        fires=group.fires,
        event_name=event_name,
        watcher_id=contract.watcher_id,
        by=[path for path, _ in group.by],
        values=[value for _, value in group.by],
        priority=priority,
        timeout_ms=(contract.deadline - contract.created_at) // timedelta(milliseconds=1),
        lines=[member_line(e) for e in found[:MEMBER_LINES]],
    ).split("\n")
    lines = [budget_ran_out(first[0], stopped), *first[1:], *after_payload(escalation, investigating)]
    return "\n".join(lines), priority


def joins_message(
    group: Contract, first: Envelope | None, batch: JoinBatch, members: Mapping[str, Envelope]
) -> Message:
    """The follow-up carrying ``batch``: ``{K} more fires:`` and the first members' lines, with the
    most urgent priority of the group's first fire and the members it lists."""
    listed = [members[m] for m in batch.members[:MEMBER_LINES] if m in members]
    return Message(
        callback_id=group.callback_id,
        watcher_id=group.watcher_id,
        event_name=group.watcher_id if first is None else first.watcher.event_name,
        priority=highest_priority([group.trigger.priority, *(e.trigger.priority for e in listed)]),
        kind=f"joined.{batch.ordinal}",
        text=joined_text(len(batch.members), [member_line(e) for e in listed]),
        follow_up=True,
    )


async def send_joins(
    store: JoinRoles,
    dispatcher: Dispatcher,
    now: datetime,
    limit: int,
    lease_ms: int,
    rejoin: Callable[[Contract], Awaitable[None]] | None = None,
) -> int:
    """Claim the groups whose joins' follow-up is due at ``now`` and record each one's follow-up
    (to the group's targets that take follow-ups; ``environment: test``: the console); the number
    claimed. A group whose contract is gone (pruned) has its joins recorded with no message.
    ``rejoin`` is handed each group whose follow-up this call recorded: the hook sessions run the
    group's session again if it had ended, so it gets the joins as a new message (SPEC §19)."""
    batches = await store.claim_joins(now, limit=limit, lease_ms=lease_ms)
    for batch in batches:
        group = await store.get_contract(batch.group_id)
        envelopes = await store.get_envelopes([batch.group_id, *batch.members[:MEMBER_LINES]])
        first = envelopes.get(batch.group_id)
        deliveries: list[Delivery] = []
        if group is not None:
            message = joins_message(group, first, batch, envelopes)
            test = first is not None and first.mode.environment == "test"
            targets = dispatcher.follow_up_targets(["console"] if test else group.targets)
            deliveries = dispatcher.new_deliveries(message, targets, message.kind, at=now)
        if await store.joins_reported(batch, deliveries, at=now) and group is not None and rejoin is not None:
            await rejoin(group)
    return len(batches)
