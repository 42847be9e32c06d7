"""The records a Store keeps, as pydantic models whose JSON form is the API's shape (SPEC §9).

Python attributes are snake_case, JSON keys camelCase. Every instant is timezone-aware UTC,
truncated to whole milliseconds on construction: that is the precision the API shows and the
stores keep, so a record read back from any backend equals the one written. JSON dumps render
instants with :func:`sentinel_hooks.clock.iso` (``2026-01-01T00:00:00.000Z``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, Literal, TypeVar, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, model_validator
from pydantic.alias_generators import to_camel

from sentinel_hooks.clock import from_ms, iso, to_ms
from sentinel_hooks.core.contract_states import ContractState as ContractState
from sentinel_hooks.core.envelope import Priority, TriggerKind
from sentinel_hooks.errors import StoreError


def to_epoch_ms(at: datetime) -> int:
    """``clock.to_ms`` (exact, no float rounding), and ValueError for a naive datetime:
    Sentinel's instants are always UTC."""
    if at.tzinfo is not UTC and (at.tzinfo is None or at.utcoffset() is None):
        raise ValueError(f"datetime {at.isoformat()} must be timezone-aware (UTC)")
    return to_ms(at)


from_epoch_ms = from_ms  # the aware UTC datetime ``ms`` milliseconds after the epoch


def utc_ms(at: datetime) -> datetime:
    """``at`` in UTC truncated to whole milliseconds; ValueError for a naive datetime.

    Every record's instants pass through here on validation, so an instant that already is
    one (UTC, whole milliseconds) is returned as it is without arithmetic.
    """
    if at.tzinfo is not UTC:
        if at.tzinfo is None or at.utcoffset() is None:
            raise ValueError(f"datetime {at.isoformat()} must be timezone-aware (UTC)")
        at = at.astimezone(UTC)
    extra_us = at.microsecond % 1000
    return at.replace(microsecond=at.microsecond - extra_us) if extra_us else at


UtcMs = Annotated[datetime, AfterValidator(utc_ms), PlainSerializer(iso, when_used="json")]
"""An aware UTC instant at millisecond precision, dumped to JSON as ISO 8601 with ``Z``."""

SettledState = Literal["fulfilled", "fallback_sent", "expired"]
Severity = Literal["info", "warning", "critical"]
InboxKind = Literal["escalation", "approval", "delivery_failure"]
InboxStatus = Literal["open", "acked", "resolved", "approved", "denied", "expired"]
BaseDeliveryKind = Literal["notify", "fallback", "fanout", "resolved", "escalation"]
_NUMBERED_KIND = re.compile(r"(notify\.[1-9][0-9]{0,5}|escalation\.[0-9]{1,6}|joined\.[1-9][0-9]{0,5})")


def check_delivery_kind(kind: str) -> str:
    """``kind`` when it is a delivery kind of SPEC §6.2: a base kind, ``notify.N`` (the N-th notify
    of one callback), ``escalation.N`` (step N of an escalation policy) or ``joined.N`` (a group's
    N-th follow-up gathering the fires that joined it after its page, §19); ValueError otherwise."""
    if kind in _BASE_KINDS or _NUMBERED_KIND.fullmatch(kind):
        return kind
    raise ValueError(f"unknown delivery kind {kind!r}; use one of {', '.join(sorted(_BASE_KINDS))}")


_BASE_KINDS: frozenset[str] = frozenset({"notify", "fallback", "fanout", "resolved", "escalation"})
DeliveryKind = Annotated[str, AfterValidator(check_delivery_kind)]
"""A delivery kind (``check_delivery_kind``): the last part of a delivery's key."""


def escalation_kind(step: int) -> str:
    """The kind of step ``step`` (from 0) of an inbox item's escalation chain: ``escalation.N``."""
    if step < 0:
        raise ValueError(f"an escalation step counts from 0, got {step}")
    return f"escalation.{step}"


def escalation_step(kind: str) -> int | None:
    """The step number of an ``escalation.N`` kind; None for any other kind (``escalation`` alone,
    the unnumbered kind of older versions, included)."""
    family, _, number = kind.partition(".")
    return int(number) if family == "escalation" and number.isdigit() else None


def is_escalation_kind(kind: object) -> bool:
    """Whether a delivery kind is an escalation's (``escalation``, ``escalation.N``)."""
    return isinstance(kind, str) and kind.split(".", 1)[0] == "escalation"


def notify_kind(ordinal: int) -> str:
    """The kind of a callback's ``ordinal``-th notify: ``notify``, then ``notify.2``, ``notify.3``…"""
    if ordinal < 1:
        raise ValueError(f"a notify's ordinal counts from 1, got {ordinal}")
    return "notify" if ordinal == 1 else f"notify.{ordinal}"


DeliveryState = Literal["pending", "delivered", "failed", "cancelled"]
"""``cancelled``: final, never sent because a gate refused it when it came due (an escalation step
of an inbox item that is no longer open): neither a send nor a dead letter."""

_CONTRACT_STATES: dict[str, ContractState] = {state: state for state in get_args(ContractState)}


def stored_state(text: str) -> ContractState:
    """A contract state read back from a store, typed; StoreError for one Sentinel does not know
    (a store written by a newer version, or damaged)."""
    try:
        return _CONTRACT_STATES[text]
    except KeyError:
        raise StoreError(f"stored contract state {text!r} is not one this Sentinel knows") from None


SETTLED_STATES: frozenset[str] = frozenset(get_args(SettledState))


class Record(BaseModel):
    """Base of every stored record: frozen, camelCase JSON, unknown keys refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")


class Trigger(Record):
    """Why a callback was fired."""

    kind: TriggerKind
    priority: Priority
    matched_at: UtcMs


class GroupInfo(Record):
    """What a group's contract carries (SPEC §19): its key, the values of its ``by`` paths (``[path,
    value]`` pairs, for the fallback's ``grouped by``), how many fires it holds and their callback
    ids, its own first. ``fires`` and ``members`` are its last keys: the Redis store appends a
    member to the record's text in place."""

    key: str
    by: list[tuple[str, Any]] = Field(default_factory=list)
    fires: int = 1
    members: list[str] = Field(default_factory=list)


class Contract(Record):
    """The response contract of one accepted (or deduped) callback (SPEC §6.1)."""

    callback_id: str
    watcher_id: str
    dedupe_key: str
    session_key: str
    state: ContractState
    trigger: Trigger
    created_at: UtcMs
    deadline: UtcMs
    settled_at: UtcMs | None = None
    targets: list[str]
    silenced_by: str | None = None  # ``silenced``: the silence id or maintenance window's name
    # the agent's notifies after the page (SPEC §6.4), counted from the deliveries when a
    # callback is shown (``Operations.callback``); stores keep 0
    follow_ups: int = 0
    # the fire's trace (SPEC §22; None without telemetry.otlpEndpoint): its id and the fire
    # span's, the parent of the session, relay and delivery spans wherever they run
    trace_id: str | None = None
    trace_parent: str | None = None
    # grouping (SPEC §19): a ``grouped`` member names its group's contract; a group's contract
    # carries the group. Last keys of the record (the Redis store edits them in its text).
    group_id: str | None = None
    group: GroupInfo | None = None


class Observation(Record):
    """One observed value of a watcher (JSON), kept for ``changed`` and ``sentinel_history``."""

    at: UtcMs
    value: Any


class TranscriptEntry(Record):
    """One entry of a hook session's transcript; ``seq`` counts from 1 per session."""

    seq: int
    at: UtcMs
    entry: dict[str, Any]


class InboxItem(Record):
    """An escalation, approval or dead-lettered delivery waiting for a human (SPEC §8)."""

    id: str
    kind: InboxKind
    status: InboxStatus
    severity: Severity
    reason: str
    watcher_id: str | None = None
    callback_id: str | None = None
    session_key: str | None = None
    created_at: UtcMs
    updated_at: UtcMs
    actor: str
    note: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class InboxHistoryEntry(Record):
    """One status change of an inbox item: who, when, from what, to what (the audit trail)."""

    at: UtcMs
    actor: str
    from_status: InboxStatus | None = Field(alias="from")
    to_status: InboxStatus = Field(alias="to")
    note: str | None = None


def delivery_key(callback_id: str, target: str, kind: DeliveryKind) -> str:
    """The idempotency key of a delivery: ``{callbackId}:{target}:{kind}`` (SPEC §6.2)."""
    return f"{callback_id}:{target}:{kind}"


class Delivery(Record):
    """One message to one target for one callback, tracked through its retries (the outbox)."""

    key: str
    callback_id: str
    target: str
    kind: DeliveryKind
    message: dict[str, Any]
    state: DeliveryState
    attempts: int = 0
    next_attempt_at: UtcMs
    created_at: UtcMs
    updated_at: UtcMs
    last_error: str | None = None

    @model_validator(mode="after")
    def _key_matches(self) -> Delivery:
        expected = delivery_key(self.callback_id, self.target, self.kind)
        if self.key != expected:
            raise ValueError(f"delivery key {self.key!r} must be {expected!r}")
        return self

    @classmethod
    def new(
        cls,
        callback_id: str,
        target: str,
        kind: DeliveryKind,
        message: dict[str, Any],
        *,
        at: datetime,
        due: datetime | None = None,
    ) -> Delivery:
        """A pending delivery with no attempts yet, made at ``at`` and due then (or at ``due``).

        Built without re-validation (the relay makes thousands a second): the arguments are
        typed, the key is derived here and the times are normalised as validation would.
        """
        at = utc_ms(at)
        return cls.model_construct(
            key=delivery_key(callback_id, target, kind),
            callback_id=callback_id,
            target=target,
            kind=kind,
            message=dict(message),
            state="pending",
            attempts=0,
            next_attempt_at=at if due is None else utc_ms(due),
            created_at=at,
            updated_at=at,
        )


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a listing; pass ``next_cursor`` back to get the next page (None: no more)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    items: list[T]
    next_cursor: str | None = None


def check_settled_state(state: str) -> None:
    """Raise ValueError unless ``state`` is one a contract can be settled to."""
    if state not in SETTLED_STATES:
        allowed = ", ".join(sorted(SETTLED_STATES))
        raise ValueError(f"cannot settle a contract to {state!r}; use one of {allowed}")


def settle(contract: Contract, state: str, *, at: datetime) -> Contract:
    """``contract`` in final ``state``, settled at ``at``; ValueError for a non-final state.

    A copy with two checked fields changed, not a re-validation: the relay settles thousands a
    second and every other field is already valid.
    """
    check_settled_state(state)
    return contract.model_copy(update={"state": state, "settled_at": utc_ms(at)})


def transition(
    item: InboxItem, *, to_status: InboxStatus, actor: str, note: str | None, at: datetime
) -> tuple[InboxItem, InboxHistoryEntry]:
    """``item`` moved to ``to_status`` and the history entry recording the move."""
    kept_note = item.note if note is None else note
    changes = {"status": to_status, "updated_at": at, "actor": actor, "note": kept_note}
    moved = InboxItem.model_validate({**item.model_dump(), **changes})
    entry = InboxHistoryEntry(at=at, actor=actor, from_status=item.status, to_status=to_status, note=note)
    return moved, entry


def first_history_entry(item: InboxItem) -> InboxHistoryEntry:
    """The history entry recording an item's creation (from None to its status)."""
    return InboxHistoryEntry(
        at=item.created_at,
        actor=item.actor,
        from_status=None,
        to_status=item.status,
        note=item.note,
    )


def attempted(
    delivery: Delivery,
    *,
    state: DeliveryState,
    attempts: int,
    next_attempt_at: datetime,
    last_error: str | None,
    at: datetime,
) -> Delivery:
    """``delivery`` after an attempt: its new state, counters and schedule."""
    check_delivery_state(state)
    changes = {
        "state": state,
        "attempts": attempts,
        "next_attempt_at": utc_ms(next_attempt_at),
        "last_error": last_error,
        "updated_at": utc_ms(at),
    }
    return delivery.model_copy(update=changes)


_DELIVERY_STATES: frozenset[str] = frozenset(get_args(DeliveryState))


def check_delivery_state(state: str) -> None:
    """Raise ValueError unless ``state`` is a delivery state."""
    if state not in _DELIVERY_STATES:
        allowed = ", ".join(sorted(_DELIVERY_STATES))
        raise ValueError(f"unknown delivery state {state!r}; use one of {allowed}")


# -- batched steps (the relay's and the outbox's hot paths) ------------------------------------


@dataclass(frozen=True)
class Settlement:
    """One contract's compare-and-set in ``Store.settle_contracts``: the final ``state`` and the
    deliveries enqueued with it if it wins.

    ``claimed`` is the contract as the caller claimed it (pending), when it has it: a pending
    contract's record never changes, so a store may build the settled record from it instead
    of reading it again. The compare-and-set on the stored state is done either way.
    """

    callback_id: str
    state: SettledState
    deliveries: tuple[Delivery, ...] = ()
    claimed: Contract | None = None


@dataclass(frozen=True)
class DeliveryOutcome:
    """One attempt's outcome for ``Store.record_outcomes``: the delivery's new state, attempts,
    next attempt and error, recorded at ``at``.

    ``claimed`` is the delivery as the attempt's sender claimed it, when it has it: while the
    claim holds nobody else changes the record, and an outcome overwrites every field an attempt
    changes, so a store may build the new record from it instead of reading it again.
    """

    key: str
    state: DeliveryState
    attempts: int
    next_attempt_at: datetime
    last_error: str | None
    at: datetime
    claimed: Delivery | None = None


def apply_outcome(delivery: Delivery, outcome: DeliveryOutcome) -> Delivery:
    """``delivery`` after ``outcome`` (see ``attempted``)."""
    return attempted(
        delivery,
        state=outcome.state,
        attempts=outcome.attempts,
        next_attempt_at=outcome.next_attempt_at,
        last_error=outcome.last_error,
        at=outcome.at,
    )


def check_outcome(outcome: DeliveryOutcome) -> None:
    """Raise ValueError for an outcome no caller should pass (bad state, naive instants, a
    claimed copy of another delivery)."""
    check_delivery_state(outcome.state)
    to_epoch_ms(outcome.next_attempt_at)
    to_epoch_ms(outcome.at)
    if outcome.claimed is not None and outcome.claimed.key != outcome.key:
        raise ValueError(f"outcome of {outcome.key!r} carries the claimed delivery {outcome.claimed.key!r}")


def check_settlement(settlement: Settlement) -> None:
    """Raise ValueError for a settlement no caller should pass (a state that is not final, a
    claimed copy of another contract or of one that was not pending)."""
    check_settled_state(settlement.state)
    claimed = settlement.claimed
    if claimed is not None and (claimed.callback_id != settlement.callback_id or claimed.state != "pending"):
        raise ValueError(
            f"settlement of {settlement.callback_id!r} carries the {claimed.state} contract "
            f"{claimed.callback_id!r}; pass the pending contract as claimed"
        )


class NoOpenGroup(Exception):
    """A ``join_only`` fire found no open group of its key: nothing was written."""


@dataclass(frozen=True)
class GroupRequest:
    """``accept_contract``'s grouping of a fire (SPEC §19): the group ``key``; a group of it open at
    the fire (not closed, below ``max_fires``, its last fire less than ``interval_ms`` ago) takes the
    fire as a ``grouped`` member, else the fire opens one. Pure data; the rules are the store's.

    ``join_only``: the fire only joins; when no group of ``key`` is open the store writes nothing
    and raises ``NoOpenGroup`` (the intake's lean path for a fire that joins, which leaves out the
    message and fan-out line only a group's first fire needs, then offers the fire again whole)."""

    key: str
    interval_ms: int
    max_fires: int
    join_only: bool = False

    def __post_init__(self) -> None:
        if self.interval_ms < 1 or self.max_fires < 1:
            raise ValueError("a group's interval_ms and max_fires are at least 1")


UNSET_GROUP_ID = '"groupId":""'
"""How a ``MemberJoin``'s record names its group until the store fills in the group it joined."""


@dataclass(frozen=True, slots=True)
class MemberJoin:
    """A fire offered to the open group of its key already written out (``GroupStore.join_members``,
    a storm's lean join, SPEC §19): what ``accept_contract`` would store for it as a member,
    without its models. ``doc`` is its contract record (``records.as_member``'s, as JSON text)
    naming its group as ``UNSET_GROUP_ID``, which the store fills in; ``envelope`` its wire text."""

    callback_id: str
    watcher_id: str
    created_ms: int
    doc: str
    envelope: str

    def __post_init__(self) -> None:
        if UNSET_GROUP_ID not in self.doc:
            raise ValueError(f"member {self.callback_id!r}: its record must name its group {UNSET_GROUP_ID}")

    def doc_in(self, group_id: str) -> str:
        """The record as stored in the group of ``group_id`` (a callback id: no character to escape)."""
        return self.doc.replace(UNSET_GROUP_ID, f'"groupId":"{group_id}"', 1)


def check_one_watcher(members: Sequence[MemberJoin]) -> None:
    """Raise ValueError for ``join_members`` members of more than one watcher."""
    watchers = {member.watcher_id for member in members}
    if len(watchers) > 1:
        raise ValueError(f"members of one group step come from one watcher, not {sorted(watchers)}")


@dataclass(frozen=True)
class JoinBatch:
    """Fires that joined a group after its page and have not reached people yet
    (``GroupStore.claim_joins``): the group's contract, the members in join order, and the
    ordinal of the follow-up that will carry them (``joined.N``)."""

    group_id: str
    members: tuple[str, ...]
    ordinal: int


def as_member(contract: Contract, group_id: str) -> Contract:
    """``contract`` joined the group of ``group_id``: ``grouped``, settled when it was created,
    with no deadline of its own (its deadline is its creation) and no group of its own."""
    return contract.model_copy(
        update={
            "state": "grouped",
            "settled_at": contract.created_at,
            "deadline": contract.created_at,
            "group_id": group_id,
            "group": None,
        }
    )


def as_deduped(contract: Contract) -> Contract:
    """``contract`` refused by the dedupe window: ``deduped``, settled when it was created."""
    return contract.model_copy(update={"state": "deduped", "settled_at": contract.created_at})


def check_acceptable(
    contract: Contract,
    dedupe_key: str | None,
    dedupe_ttl_ms: int,
    checkpoints: Mapping[str, Any] | None = None,
    deliveries: Sequence[Delivery] = (),
    group: GroupRequest | None = None,
) -> None:
    """Raise ValueError for ``accept_contract`` arguments no caller should pass."""
    if contract.state == "silenced":
        if dedupe_key is not None or checkpoints or deliveries or group or contract.silenced_by is None:
            raise ValueError(
                "a silenced contract names its silence (silenced_by) and takes no dedupe key, "
                "checkpoints, deliveries or group"
            )
        return
    if contract.state != "pending":
        raise ValueError(f"accept_contract takes a pending or silenced contract, not {contract.state!r}")
    if dedupe_key is not None and dedupe_ttl_ms < 1:
        raise ValueError(f"dedupe_ttl_ms must be at least 1, got {dedupe_ttl_ms}")
    if group is not None and (contract.group is None or contract.group.key != group.key):
        raise ValueError("a grouped fire's contract carries its group (group.key = the request's key)")
    if group is not None and contract.group is not None and contract.group.members != [contract.callback_id]:
        raise ValueError("a group's contract lists its own callback id as its only member when it opens")


# -- contract steps (the relay's, see ``contract_states``) --------------------------------------


@dataclass(frozen=True)
class Moved:
    """What one contract step did: the state it found and the state after (the same when the
    step left the contract as it was)."""

    before: ContractState
    after: ContractState

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True)
class NotifyStart:
    """``Store.begin_notify``'s answer: the contract's step, and the keys of the deliveries it
    enqueued (those already there, from an earlier try of the same notify, are left out);
    ``follow_up`` is what the notify was handed over as; ``accepted`` whether the contract took
    it (its deliveries are in the outbox: ``contract_states.after_notify``, decided in the step)."""

    before: ContractState
    after: ContractState
    inserted: frozenset[str] = frozenset()
    follow_up: bool = False
    accepted: bool = True


@dataclass(frozen=True)
class Recorded:
    """``Store.record_outcomes``' answer: the delivery keys updated, and the contracts that a
    notify's final outcome moved (callback id → state after). ``watchers`` names the watcher of
    a moved contract when the outcome writer knows it (for telemetry; stores leave it empty)."""

    keys: frozenset[str]
    moved: dict[str, ContractState] = field(default_factory=dict)
    watchers: dict[str, str] = field(default_factory=dict)
