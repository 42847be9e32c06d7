"""The relay owns every response contract (SPEC.md §6.1): its state machine and its deadline.

Every transition goes through here, each one atomic store step (the rules are
``core.contract_states``; docs/relay.md draws them): a notify is handed to delivery with
``notify`` (``pending`` → ``notifying``, deliveries enqueued in the same step); the outbox
records each delivery's outcome, and a notify's final outcome moves its contract in that same
write (``fulfilled``, or back to ``pending`` when every delivery of it failed for good), which
the outbox reports back here (``moved``); an approval pauses the contract
(``approval_requested``) and its decision gives the agent a fresh deadline
(``approval_decided``); a deadline passing settles it with the fallback; the source reporting
the fire over before its page settles it ``resolved`` (``resolve``), with no fallback.

Deadlines live in the store. The relay claims due contracts (``claim_due``, atomic, with a
lease so a crashed claimer's contracts come back), and settles each one with a
compare-and-set that enqueues the fallback deliveries in the same step
(``settle_contracts``): a fulfilment racing the deadline yields one final state, and a
fallback is enqueued at most once, across restarts and replicas. On start it settles
whatever became overdue while the service was down.

A group's contract (SPEC §19) is one of them: its fallback is the group's (``relay.groups``),
each pass also sends the follow-ups of fires that joined a group after its page
(``send_joins``), and a member's resolution speaks for its group only once every member resolved
(``speaks_for``).

It wakes at the earliest deadline it knows of (contracts accepted by this process), at most
every ``BATCH_WINDOW_S`` and at least every ``MAX_SLEEP_S``, so a fallback leaves well within a
second of its deadline. Each pass settles everything due in a few store calls (``settle_due``).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from sentinel_hooks.background import BackgroundTask
from sentinel_hooks.clock import Clock, iso
from sentinel_hooks.core.contract_states import after_resolved, takes_notify
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.delivery.dispatch import Dispatcher
from sentinel_hooks.delivery.targets.base import Message, details_payload
from sentinel_hooks.events import Events
from sentinel_hooks.outages import Outage
from sentinel_hooks.relay.fallback import fallback_text, resolved_before_page
from sentinel_hooks.relay.groups import group_fallback, send_joins
from sentinel_hooks.store.base import CheckpointStore, ContractStore, GroupStore, OutboxStore, TransitionStore
from sentinel_hooks.store.records import (
    Contract,
    ContractState,
    Delivery,
    Moved,
    NotifyStart,
    Recorded,
    Settlement,
    utc_ms,
)
from sentinel_hooks.store.shortcuts import get_envelope

log = logging.getLogger(__name__)

MAX_SLEEP_S = 0.5
# Passes are at least this far apart, so deadlines that fall close together (hundreds a second)
# are settled in one batch instead of one pass each; a fallback leaves at most this much later.
BATCH_WINDOW_S = 0.02
CLAIM_BATCH = 500
# Settling is one compare-and-set, so a claim only needs to outlive a few store round trips;
# a short lease lets another process (or this one after a crash) take over within a second.
# Two settlers of one contract are harmless: exactly one CAS wins.
CLAIM_LEASE_MS = 1_000
# A notify is offered as the page, then as a follow-up, then as the page again: the contract can
# move once in between (its notify in flight failed for good), never back and forth unboundedly.
HAND_OVER_TRIES = 3


def escalation_key(callback_id: str) -> str:
    """Where a session's escalation of a callback is remembered (for the fallback text)."""
    return f"escalation:{callback_id}"


def progress_key(callback_id: str) -> str:
    """Where a callback's hook session records its progress (``status``: running, paused, done…):
    written by the session, read here to tell whether the agent still investigates."""
    return f"session:{callback_id}"


STILL_RUNNING = frozenset({"running", "resuming"})


def stop_key(callback_id: str) -> str:
    """Where the reason a session stopped before any page is remembered (for the fallback text)."""
    return f"stopped:{callback_id}"


def delivery_targets(envelope: Envelope | None, contract: Contract) -> list[str]:
    """The contract's targets, or the console only for ``environment: test``."""
    if envelope is not None and envelope.mode.environment == "test":
        return ["console"]
    return list(contract.targets)


def _held_won(settlements: Sequence[Settlement], won: set[str], held: set[str]) -> list[Delivery]:
    """The deliveries stored held (their keys ``held``: ``Relay._held``) of the settlements that won."""
    return [d for s in settlements if s.callback_id in won for d in s.deliveries if d.key in held]


@dataclass(frozen=True)
class NotifyOutcome:
    """What became of one notify: whether the contract took it, the contract's state after it,
    and its deliveries by target (accepted, being retried, failed for good)."""

    accepted: bool
    state: ContractState | None
    delivered: list[str] = field(default_factory=list)
    retrying: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    follow_up: bool = False  # handed over after the page (SPEC §6.4)
    left_out: list[str] = field(default_factory=list)  # targets that take no follow-ups


class RelayRoles(TransitionStore, ContractStore, CheckpointStore, OutboxStore, GroupStore, Protocol):
    """The store roles the relay calls: the contracts' moves, a callback's contract and envelope,
    its escalation note (for the fallback), what became of a notify's deliveries, and the joins
    of groups after their page (SPEC §19)."""


class Relay:
    """Owns the contracts' transitions; settles overdue ones with the fallback (mode concise) or
    ``expired`` (mode none)."""

    def __init__(
        self, *, store: RelayRoles, clock: Clock, dispatcher: Dispatcher, events: Events | None = None
    ) -> None:
        self._events = events
        # the hook sessions' ``rejoin``: a group's ended session runs again for joins after its page
        self.rejoin: Callable[[Contract], Awaitable[None]] | None = None
        self._store = store
        self._clock = clock
        self._dispatcher = dispatcher
        self._deadlines: list[datetime] = []
        self._claimed_until = datetime.min.replace(tzinfo=UTC)  # the last claim took what was due by then
        self._wake = asyncio.Event()
        self._loop = BackgroundTask()
        self._settling = Outage(log, "settling due contracts", clock=clock)
        self.settled = 0

    def expect(self, deadline: datetime) -> None:
        """A contract with this deadline was just created: wake in time for it."""
        heapq.heappush(self._deadlines, deadline)
        if self._deadlines[0] == deadline:
            self._wake.set()

    # -- the agent's side -------------------------------------------------------------------

    async def notify(self, contract: Contract, message: Message, targets: Sequence[str]) -> NotifyOutcome:
        """Hand the agent's message to delivery and try each target at once.

        While no page candidate is in flight the message may be its page (SPEC §6.4):
        ``begin_notify`` makes the contract ``notifying`` and enqueues the deliveries in one
        step, so from then on no fallback is due while the message may still get through; the
        outbox retries what fails and moves the contract on each delivery's final outcome. When
        the store's step refuses it as a page (another notify is in flight, on this replica or
        another, or the contract settled: fulfilled, fallback_sent, expired) it is handed over
        again as a follow-up (``page`` false), to the targets that take follow-ups: delivered
        durably, the contract left as it is. Each step is a compare-and-set on the contract's
        state, so the page is decided once, atomically (``_hand_over``). A notify tried again
        (the same kind, after a crash) adds nothing and reports what became of the first try.
        Refused (``accepted`` False, nothing sent) by a contract that takes no notify
        (resolved, deduped, silenced).
        """
        now = self._clock.now()
        handed = self._hand_over_and_try(contract.callback_id, message, targets, now)
        start, deliveries, inserted, accepted, left_out = await self._dispatcher.outliving(handed)
        if start is None or not start.accepted:
            return NotifyOutcome(False, None if start is None else start.after)
        if not start.follow_up and len(inserted) == len(deliveries) and accepted and all(accepted):
            # Every delivery was new and a target took each one: its recorded outcome moved the
            # open contract to fulfilled, so there is nothing to read back.
            return NotifyOutcome(True, "fulfilled", [d.target for d in deliveries])
        outcome = await self._notify_outcome(contract.callback_id, deliveries)
        return replace(outcome, follow_up=start.follow_up, left_out=left_out)

    async def _hand_over_and_try(
        self, callback_id: str, message: Message, targets: Sequence[str], now: datetime
    ) -> tuple[NotifyStart | None, list[Delivery], list[Delivery], list[bool], list[str]]:
        """``_hand_over``, then the immediate attempt of the deliveries it stored (held for it):
        ``(start, deliveries offered, those stored, accepted per stored one, targets left out)``.
        One piece of work for ``Dispatcher.outliving``: a hook session cancelled between the two
        steps (stopped with its service) left its page held until the lease ran out, 20 s."""
        start, deliveries, left_out = await self._hand_over(callback_id, message, targets, now)
        if start is None or not start.accepted:
            return start, deliveries, [], [], left_out
        inserted = [d for d in deliveries if d.key in start.inserted]
        accepted = await self._dispatcher.attempt(inserted)  # in this task, which outlives the caller
        return start, deliveries, inserted, accepted, left_out

    async def _hand_over(
        self, callback_id: str, message: Message, targets: Sequence[str], now: datetime
    ) -> tuple[NotifyStart | None, list[Delivery], list[str]]:
        """``begin_notify`` as the page candidate, else as a follow-up: the store's answer, the
        deliveries offered and the targets a follow-up leaves out. The contract may move between
        the two steps (a notify in flight failed for good: ``pending`` again), so the two are
        tried in turn while it takes notifies at all, at most ``HAND_OVER_TRIES`` times."""
        start: NotifyStart | None = None
        deliveries: list[Delivery] = []
        left_out: list[str] = []
        for attempt in range(HAND_OVER_TRIES):
            follow_up = attempt % 2 == 1
            sent_to = self._dispatcher.follow_up_targets(targets) if follow_up else list(targets)
            left_out = [t for t in targets if t not in sent_to]
            shaped = replace(message, page=not follow_up, follow_up=follow_up)
            deliveries = self._dispatcher.held_deliveries(shaped, sent_to, message.kind, at=now)
            start = await self._store.begin_notify(callback_id, deliveries, at=now, follow_up=follow_up)
            if start is None or start.accepted or not takes_notify(start.before):
                break
        return start, deliveries, left_out

    async def _notify_outcome(self, callback_id: str, deliveries: Sequence[Delivery]) -> NotifyOutcome:
        states = {d.key: d.state for d in await self._store.list_deliveries(callback_id)}
        # cancelled: not sent and never to be (a resolve withdrew it, SPEC §16): in no list
        by_state: dict[str, list[str]] = {"delivered": [], "pending": [], "failed": [], "cancelled": []}
        for delivery in deliveries:
            by_state[states.get(delivery.key, "pending")].append(delivery.target)
        current = await self._store.get_contract(callback_id)
        return NotifyOutcome(
            True,
            None if current is None else current.state,
            by_state["delivered"],
            by_state["pending"],
            by_state["failed"],
        )

    async def approval_requested(self, callback_id: str) -> Moved | None:
        """The session waits for an approval: no fallback is due while it is open (the request
        itself reaches people at once, see ``Notices.inbox_item``)."""
        return await self._store.pause_contract(callback_id)

    async def approval_decided(self, callback_id: str) -> Moved | None:
        """The approval was decided (or timed out): the agent gets a fresh deadline to report,
        ``hookResponseTimeoutMs`` (the envelope's ``delivery.timeoutMs``) from now."""
        envelope = await get_envelope(self._store, callback_id)
        if envelope is None:
            return None
        deadline = self._clock.now() + timedelta(milliseconds=envelope.delivery.timeout_ms)
        moved = await self._store.resume_contract(callback_id, deadline=deadline)
        if moved is not None and moved.after == "pending":
            self.expect(deadline)
        return moved

    async def fallback_now(self, callback_id: str, reason: str) -> bool:
        """The session stopped before any page (SPEC §20: its budget ran out): the fallback is due
        now rather than at the deadline, and says ``reason`` (kept in a checkpoint the fallback
        reads). Only a ``pending`` contract moves: its deadline becomes now, through the two
        compare-and-set steps an approval takes (out of the deadline index, back in due now), so
        a notify or a settlement racing it wins or loses whole. True when it was moved."""
        current = await self._store.get_contract(callback_id)
        if current is None or current.state != "pending":
            return False
        await self._store.put_checkpoint(stop_key(callback_id), {"reason": reason})
        paused = await self._store.pause_contract(callback_id)
        if paused is None or paused.before != "pending":
            return False
        now = self._clock.now()
        moved = await self._store.resume_contract(callback_id, deadline=now)
        if moved is None or moved.after != "pending":
            return False
        self.expect(now)
        return True

    async def speaks_for(self, callback_id: str) -> str | None:
        """The callback whose contract speaks for fire ``callback_id`` when its source reports it
        over: the fire's own; for a member of a group (its first fire included, SPEC §19) the
        group's once every member resolved (the group then closes), and None before: other members
        still fire, so there is nothing to settle or say yet."""
        contract = await self._store.get_contract(callback_id)
        if contract is None:
            return callback_id
        group_id = contract.group_id or (callback_id if contract.group is not None else None)
        if group_id is None:
            return callback_id
        return group_id if await self._store.member_resolved(group_id, callback_id) else None

    async def resolve(self, callback_id: str, *, notify: bool) -> bool:
        """The source reports the fire of ``callback_id`` over (SPEC §6.4): whether that settled
        its contract ``resolved``.

        Only before its page: a ``pending`` contract (no notify handed over yet) becomes
        ``resolved`` in one store step that enqueues, when ``notify`` (notifyResolved), the line
        ``… fired at {matchedAt} and resolved {duration} later, before the agent answered.`` as
        its page; no fallback is due any more and the session's later notifies are refused.
        False when the contract is unknown, already paged or notifying (the resolution is then a
        follow-up, the caller's ordinary resolved line) or waits for an approval.
        """
        contract = await self._store.get_contract(callback_id)
        if contract is None or after_resolved(contract.state) is None:
            return False
        now = self._clock.now()
        deliveries: list[Delivery] = []
        if notify:
            envelope = await get_envelope(self._store, callback_id)
            event_name = contract.watcher_id if envelope is None else envelope.watcher.event_name
            matched_at = contract.trigger.matched_at
            seconds = max(0.0, (now - matched_at).total_seconds())
            message = Message(
                callback_id=callback_id,
                watcher_id=contract.watcher_id,
                event_name=event_name,
                priority=contract.trigger.priority,
                kind="resolved",
                text=resolved_before_page(event_name, contract.watcher_id, iso(matched_at), seconds),
                page=True,  # the fire's one page (SPEC §6.4)
            )
            targets = delivery_targets(envelope, contract)
            deliveries = self._dispatcher.new_deliveries(message, targets, "resolved", at=now)
        moved = await self._store.resolve_contract(callback_id, deliveries, at=now)
        if moved is None or not moved.changed:
            return False
        self._dispatcher.wake()
        if self._events is not None:
            self._events.settled(
                callback_id, "resolved", at=now, watcher_id=contract.watcher_id, contract=contract
            )
        log.info(
            "%s resolved at its source before its page: no fallback",
            callback_id,
            extra={"callbackId": callback_id, "watcherId": contract.watcher_id},
        )
        return True

    def moved(self, recorded: Recorded) -> None:
        """The outbox recorded outcomes that moved contracts: report fulfilments, and wake for a
        contract back to ``pending`` (its notify failed for good): its fallback may be due now."""
        for callback_id, state in recorded.moved.items():
            if state == "pending":
                self._wake.set()
            elif state == "fulfilled" and self._events is not None:
                self._events.settled(callback_id, "fulfilled", watcher_id=recorded.watchers.get(callback_id))

    # -- the deadlines -----------------------------------------------------------------------

    def start(self) -> None:
        self._loop.start(self._run)

    async def stop(self) -> None:
        await self._loop.stop()

    async def _run(self) -> None:
        while True:
            wait_s = None
            try:
                while await self.settle_due() == CLAIM_BATCH:
                    pass
                while await self.send_joins() == CLAIM_BATCH:
                    pass
                self._settling.succeeded()
            except Exception as exc:  # keep relaying through a store outage: back off and retry
                wait_s = self._settling.failed(exc)
            await self._sleep(wait_s)

    async def _sleep(self, wait_s: float | None = None) -> None:
        """Until the next deadline (``next_wait_s``), or ``wait_s`` after a failed pass, or a wake."""
        timeout = self.next_wait_s() if wait_s is None else wait_s
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=timeout)

    def next_wait_s(self) -> float:
        """How long to sleep after a pass: until the next known deadline, at least
        ``BATCH_WINDOW_S`` and at most ``MAX_SLEEP_S``.

        Only deadlines the last claim covered are forgotten: one that fell due while that pass
        was settling is still ahead of the relay, so it wakes for it after the batch window
        instead of sleeping ``MAX_SLEEP_S``.
        """
        while self._deadlines and self._deadlines[0] <= self._claimed_until:
            heapq.heappop(self._deadlines)
        if not self._deadlines:
            return MAX_SLEEP_S
        until_next = (self._deadlines[0] - self._clock.now()).total_seconds()
        return min(MAX_SLEEP_S, max(BATCH_WINDOW_S, until_next))

    async def settle_due(self) -> int:
        """Claim and settle every contract due now; the number claimed.

        A claimed batch costs three store calls whatever its size: the claim (which returns the
        envelopes too), one read of the escalation and session-progress checkpoints, and one
        ``settle_contracts`` (a compare-and-set per contract that enqueues its fallbacks in the
        same step; it is given the claimed contracts, so it need not read them again).
        """
        now = self._claimed_until = self._clock.now()
        claimed = await self._store.claim_due(now, limit=CLAIM_BATCH, lease_ms=CLAIM_LEASE_MS)
        if not claimed:
            return 0
        keys = [k(c.callback_id) for c, _ in claimed for k in (escalation_key, progress_key, stop_key)]
        checkpoints = await self._store.get_checkpoints(keys)
        members = [m for c, _ in claimed if c.group is not None for m in c.group.members]
        grouped = await self._store.get_envelopes(members) if members else {}
        settlements = [
            self._settlement(
                c,
                envelope,
                checkpoints.get(escalation_key(c.callback_id)),
                now,
                investigating=(checkpoints.get(progress_key(c.callback_id)) or {}).get("status")
                in STILL_RUNNING,
                stopped=checkpoints.get(stop_key(c.callback_id)),
                members=grouped,
            )
            for c, envelope in claimed
        ]
        settlements, held = self._held(settlements, now)
        reserved = len(held)
        try:
            won = await self._store.settle_contracts(settlements, at=now)
        except BaseException:
            self._dispatcher.start_held([], reserved)
            raise
        self._dispatcher.start_held(_held_won(settlements, won, held), reserved)
        if reserved < sum(len(s.deliveries) for s in settlements):
            self._dispatcher.wake()  # the rest are stored due now, for the worker's claim
        self._report([c for c, _ in claimed], settlements, won, now)
        return len(claimed)

    def _held(self, settlements: list[Settlement], now: datetime) -> tuple[list[Settlement], set[str]]:
        """``settlements`` with as many of their deliveries as the outbox has free slots for
        stored held by this process (due after the outbox's lease, as a claim would leave them),
        and the keys of those (one promised slot each): ``settle_due`` starts those of the contracts that won
        at once (``Dispatcher.start_held``), so a fallback needs no claim and no re-read. The
        rest are stored due now and go out through the worker's claim. A crash before the send
        leaves a held fallback to be sent after the lease, as a crash after a claim would."""
        wanted = sum(len(s.deliveries) for s in settlements)
        reserved = self._dispatcher.reserve(wanted) if wanted else 0
        left = reserved
        held_until = utc_ms(now + timedelta(milliseconds=self._dispatcher.lease_ms))
        out: list[Settlement] = []
        held: set[str] = set()
        for settlement in settlements:
            if left and settlement.deliveries:
                take = settlement.deliveries[:left]
                left -= len(take)
                held.update(d.key for d in take)
                kept = settlement.deliveries[len(take) :]
                settlement = replace(
                    settlement,
                    deliveries=(*(d.model_copy(update={"next_attempt_at": held_until}) for d in take), *kept),
                )
            out.append(settlement)
        return out, held

    def _settlement(
        self,
        contract: Contract,
        envelope: Envelope | None,
        escalation: dict[str, Any] | None,
        now: datetime,
        *,
        investigating: bool = False,
        stopped: dict[str, Any] | None = None,
        members: Mapping[str, Envelope] | None = None,
    ) -> Settlement:
        """The fallback (mode concise) or ``expired`` (mode none) of one overdue contract (one
        stored without its envelope gets the fallback, told from the contract alone); it says so
        when the session is ``investigating`` still (its findings follow, SPEC §6.4). A group's
        contract gets the group's fallback (SPEC §19), its members' envelopes read from ``members``."""
        if envelope is not None and envelope.delivery.fallback_mode == "none":
            return Settlement(contract.callback_id, "expired", claimed=contract)
        event_name = contract.watcher_id if envelope is None else envelope.watcher.event_name
        escalated = (
            None
            if escalation is None
            else (str(escalation.get("severity", "warning")), str(escalation.get("reason", "")))
        )
        ran_out = None if stopped is None else str(stopped.get("reason", ""))
        priority: str = contract.trigger.priority
        if contract.group is not None:
            text, priority = group_fallback(
                contract,
                contract.group,
                event_name,
                members or {},
                escalation=escalated,
                investigating=investigating,
                stopped=ran_out,
            )
        else:
            text = fallback_text(
                event_name=event_name,
                watcher_id=contract.watcher_id,
                priority=priority,
                timeout_ms=0 if envelope is None else envelope.delivery.timeout_ms,
                payload=None if envelope is None else envelope.payload,
                escalation=escalated,
                investigating=investigating,
                stopped=ran_out,
            )
        message = Message(
            callback_id=contract.callback_id,
            watcher_id=contract.watcher_id,
            event_name=event_name,
            priority=priority,
            kind="fallback",
            text=text,
            payload=None if envelope is None else details_payload(envelope.payload),
            page=True,
        )
        deliveries = self._dispatcher.new_deliveries(
            message, delivery_targets(envelope, contract), "fallback", at=now
        )
        return Settlement(contract.callback_id, "fallback_sent", tuple(deliveries), claimed=contract)

    async def send_joins(self) -> int:
        """Send the follow-ups of groups whose joins after the page are due (``relay.groups``);
        the number of groups claimed."""
        now = self._clock.now()
        sent = await send_joins(self._store, self._dispatcher, now, CLAIM_BATCH, CLAIM_LEASE_MS, self.rejoin)
        if sent:
            self._dispatcher.wake()
        return sent

    def _report(
        self, claimed: list[Contract], settlements: list[Settlement], won: set[str], now: datetime
    ) -> None:
        """Events per settled contract, one DEBUG line per fallback and one INFO line per batch."""
        fallbacks = 0
        worst_ms = 0.0
        for contract, settlement in zip(claimed, settlements, strict=True):
            if contract.callback_id not in won:
                continue
            late_ms = (now - contract.deadline).total_seconds() * 1000
            worst_ms = max(worst_ms, late_ms)
            if self._events is not None:
                self._events.settled(
                    contract.callback_id,
                    settlement.state,
                    deadline=contract.deadline,
                    at=now,
                    watcher_id=contract.watcher_id,
                    contract=contract,
                )
            if settlement.state == "fallback_sent":
                fallbacks += 1
                log.debug(
                    "fallback for %s sent %.0f ms after its deadline",
                    contract.callback_id,
                    late_ms,
                    extra={"callbackId": contract.callback_id, "watcherId": contract.watcher_id},
                )
        self.settled += fallbacks
        if won:
            log.info(
                "relay settled %d overdue contract(s) (%d fallback(s)), at most %.0f ms after a deadline",
                len(won),
                fallbacks,
                worst_ms,
            )
