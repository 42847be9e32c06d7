"""The Store contract: everything Sentinel must remember across restarts, crashes and replicas.

A Store owns durable state and nothing else: it never schedules, retries, delivers or reads the
clock (every instant is passed in). Two implementations share one contract test suite
(tests/contract/): ``SqliteStore`` (one process; in memory for tests) and ``RedisStore``
(replicas). The contract is one method per step a caller takes; where a caller wants a single
record of a batch step, ``store.shortcuts`` spells it once for every backend.

It is cut by who calls it: role Protocols of at most eight members each, what one kind of
consumer calls (docs/architecture.md, "The Store's roles"), and ``Store``, their union, which
every backend implements. A consumer is typed on the roles it calls, never on ``Store`` (only the
composition root names it: ``service``, ``store.backends``, the contract suite), so a fake or a
new backend for one consumer implements only those; a consumer of several roles names a Protocol
of its own that inherits them and adds nothing. tests/test_store_roles.py pins each role's members.

Guarantees every implementation gives:

* Each method is atomic: concurrent callers (tasks, other processes on the same SQLite file,
  other replicas on the same Redis) see it fully applied or not at all, and for the durable
  stores a crash (kill -9) after it returns loses nothing.
* Records go in and come out equal (instants are kept at millisecond precision, see ``records``);
  so do callback envelopes (``Envelope``: the store alone turns them into their wire JSON and
  back); dicts are stored as JSON, so what comes back is a fresh copy a caller may mutate freely.
* Failures are raised as ``StoreError``; ``StoreUnavailable`` when the backend cannot be
  reached or opened (bad URL, server down, unwritable file). Nothing else escapes, except
  ``InvalidCursor`` (a ``StoreError`` and ``ValueError``) for a cursor the store did not issue
  and ``ValueError`` for arguments no caller should pass (a state outside the contract, a
  ``limit``, ``keep``, ``lease_ms`` or ``ttl_ms`` below 1, a naive datetime).
* Methods called before ``open()`` or after ``close()`` raise ``StoreUnavailable``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.usage import Usage
from sentinel_hooks.errors import StoreError
from sentinel_hooks.store.audit import AuditEntry
from sentinel_hooks.store.feedback import Feedback
from sentinel_hooks.store.pruning import PruneBefore, Pruned
from sentinel_hooks.store.records import (
    Contract,
    ContractState,
    Delivery,
    DeliveryOutcome,
    GroupRequest,
    InboxHistoryEntry,
    InboxItem,
    InboxKind,
    InboxStatus,
    JoinBatch,
    MemberJoin,
    Moved,
    NotifyStart,
    Observation,
    Page,
    Recorded,
    Settlement,
    TranscriptEntry,
)
from sentinel_hooks.store.silences import Silence, SilenceState


class InvalidCursor(StoreError, ValueError):
    """A listing cursor that this store did not issue (an API client's mistake: answer 400)."""


@dataclass(frozen=True)
class SharedState:
    """Where the replicas sharing a store's state meet (``LifecycleStore.shared``): the server at
    ``url``, whose scheme names its kind, and the ``key_prefix`` the deployment's keys go under.

    The store offers it and says nothing more of it: ``cluster/`` keeps its leases, membership
    and watcher changes there, and the hook-session queue its stream, each through an
    implementation of its own for that kind of server (Redis: ``cluster.connection``).
    """

    url: str
    key_prefix: str


@dataclass(frozen=True)
class TranscriptTail:
    """Transcript entries ``SessionStore.read_callback`` reads with the rest: those of ``session_key``
    after the seq that checkpoint ``checkpoint_key`` holds under ``field`` (a plain member
    name; 0 when the checkpoint or an integer there is missing). A reader that keeps its place
    in a checkpoint (a session's memory, ``callbacks.sessions.memory``) needs no second round trip."""

    session_key: str
    checkpoint_key: str
    field: str

    def __post_init__(self) -> None:
        if not self.field.isidentifier():
            raise ValueError(f"a transcript tail's field is a plain member name, got {self.field!r}")


@dataclass(frozen=True)
class UsageCount:
    """A model call's ``usage`` to add to the counters ``keys`` (as ``UsageStore.add_usage``, kept
    for ``ttl_ms``): given to ``SessionStore.append_transcript``, it is counted in the step that
    records the call's reply."""

    keys: tuple[str, ...]
    usage: Usage
    ttl_ms: int


@dataclass(frozen=True)
class CallbackView:
    """``SessionStore.read_callback``'s answer: what a hook session starts from. ``transcript`` is
    None when no ``TranscriptTail`` was asked for, ``envelope`` when it was not asked for."""

    contract: Contract | None
    envelope: Envelope | None
    checkpoints: dict[str, dict[str, Any]]
    transcript: list[TranscriptEntry] | None = None


class LifecycleStore(Protocol):
    """Opening, closing and checking the store, and where replicas sharing it meet: what the
    service calls around everything else (``store.health`` asks ``ping``)."""

    @property
    def shared(self) -> SharedState | None:
        """Where replicas sharing this store's state meet; None when no other process can share
        it (then this process is the only replica)."""

    async def open(self) -> None:
        """Connect (or create the file and schema); ``StoreUnavailable`` names what failed."""

    async def close(self) -> None:
        """Release connections and threads; idempotent. Data written before stays durable."""

    async def ping(self) -> None:
        """Return when the backend answers and takes a write; raise ``StoreUnavailable`` when not.

        The write is one tiny record of its own (a counter), so a store that still reads but can
        no longer write (a full disk, a read-only file, a Redis over its memory limit) fails it.
        """


class WatcherStore(Protocol):
    """Watchers' runtime state (opaque JSON, one writer per watcher: its runner) and their
    observation history: the manager, runners, firing pipeline and write-back, and the hook
    session's observations tool. Single-record forms are ``store.shortcuts``'
    (``get_watcher_state``, ``put_watcher_state``, ``last_observation``)."""

    async def list_watcher_states(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """Every state whose key starts with ``prefix`` (every watcher's, by default), by key:
        with a prefix, what the service reads at start (API-created definitions), not 10,000 states."""

    async def get_watcher_states(self, watcher_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The states of those of ``watcher_ids`` that have one, by watcher id (others are left
        out), read in one round trip: what a replica restores for the leases it just took."""

    async def last_observations(self, watcher_ids: Sequence[str]) -> dict[str, Observation]:
        """The most recently recorded observation of each of ``watcher_ids`` that has one (others
        are left out), read in one round trip: what starting runners compare their first poll to."""

    async def observations(
        self, watcher_id: str, *, limit: int = 100, since: datetime | None = None
    ) -> list[Observation]:
        """Up to ``limit`` observations, newest (last recorded) first, only those at ≥ ``since``;
        never more than the ``keep`` of the latest ``write_watcher_batch`` of this store object."""

    async def write_watcher_batch(
        self,
        observations: Sequence[tuple[str, Observation]],
        states: Mapping[str, dict[str, Any] | None],
        *,
        keep: int = 500,
    ) -> None:
        """Append ``(watcher_id, observation)`` pairs in order and put ``states``, in one round trip,
        applied all or nothing.

        Each watcher keeps its newest ``keep`` observations, and ``observations`` returns no
        more than that from then on. A state replaces the watcher's whole state (the store does
        not merge or interpret it); None forgets it (no error when there is none). SQLite trims
        a watcher's history at its first batched write and then every 32nd, so its table may
        hold up to ``keep + 31`` rows between trims, which no read returns.
        """


class ContractStore(Protocol):
    """A callback's record as the intake stores it, its contract and envelope, read back by
    whatever handles the callback: hook sessions and their queues, the relay, escalations, alert
    streams, the API (``get_envelope``: ``store.shortcuts``)."""

    async def accept_contract(
        self,
        contract: Contract,
        envelope: Envelope,
        *,
        dedupe_key: str | None = None,
        dedupe_ttl_ms: int = 0,
        checkpoints: Mapping[str, dict[str, Any]] | None = None,
        deliveries: Sequence[Delivery] = (),
        group: GroupRequest | None = None,
    ) -> Contract | None:
        """Store a new callback's contract, its envelope, ``checkpoints`` and ``deliveries`` in
        one atomic step; the contract as stored, or None (nothing written) when its callback id
        exists (so a retried or replayed callback cannot create a second contract).

        ``contract`` is normally pending. With a ``dedupe_key`` live at ``contract.created_at`` the
        contract is stored ``deduped`` (settled at its creation, no deadline) and neither the
        ``checkpoints`` nor the ``deliveries`` are written; otherwise the key is set until
        ``created_at + dedupe_ttl_ms`` (a key refused inside its window keeps its expiry), the
        contract is stored pending, in the deadline index, each checkpoint is put and the
        deliveries are enqueued in the outbox (a key already there is left as is): the fire's
        fan-out line goes out only with a contract that took it.

        A ``silenced`` contract (SPEC §14: a silence or maintenance window, named by
        ``silenced_by``, matched the fire) is stored as it is: final from the start, outside the
        deadline index, with no dedupe key, checkpoints or deliveries. Raises ``ValueError`` for a
        contract that is neither pending nor silenced, a silenced one with a dedupe key,
        checkpoints, deliveries or no ``silenced_by``, or a ``dedupe_ttl_ms`` below 1 with a key.

        With ``group`` (SPEC §19; the pending ``contract`` carries ``group`` with that key and
        itself as its only member), after the dedupe check and in the same atomic step: when a
        group of the key is open (not closed, below its ``max_fires``, its last fire less than its
        ``interval_ms`` before ``created_at``) the fire joins it: stored ``grouped``
        (``records.as_member``: the group's callback id as ``group_id``, no deadline, neither
        checkpoints nor deliveries), and the group's contract counts and lists it; a join after
        the group's page (its contract neither pending nor awaiting approval) waits for the next
        follow-up (``GroupStore.claim_joins``). A group reaching ``max_fires`` closes, and so does
        one found quiet. Otherwise the fire opens a group of the key with its contract, stored
        pending as above. Two racing fires of one key (replicas on one Redis) never open two
        groups. Returns the member's contract for a fire that joined.
        """

    async def get_contract(self, callback_id: str) -> Contract | None:
        """The contract, or None."""

    async def get_contracts(self, callback_ids: Sequence[str]) -> dict[str, Contract]:
        """The contracts that exist, by callback id (unknown ids are left out): one read for a
        batch (a notification's alerts looking up their fires)."""

    async def get_envelopes(self, callback_ids: Sequence[str]) -> dict[str, Envelope]:
        """The envelopes of the contracts that exist, by callback id (unknown ids are left out)."""

    async def trigger_priorities(self, callback_ids: Sequence[str]) -> set[str]:
        """The priorities the contracts that exist among ``callback_ids`` fired with (each one's
        ``trigger.priority``), read without making the records: a group's page asks it of its
        members, a thousand in a storm."""

    async def list_contracts(
        self,
        *,
        watcher_id: str | None = None,
        state: ContractState | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Contract]:
        """Contracts newest first (``created_at`` desc, then ``callback_id`` desc), filtered.

        ``cursor`` is an opaque ``next_cursor`` from a previous page of the same listing;
        paging visits every matching contract once, with no gaps or repeats.
        Raises ``InvalidCursor`` for a cursor this store did not issue.
        """


class GroupStore(Protocol):
    """Groups (SPEC §19) after their fires: the follow-ups that gather the fires that joined a
    group after its page, at most one per group every ``interval_ms`` (the relay sends them), and
    the members' resolutions (a group whose every member resolved closes). Fires open and join
    groups in ``ContractStore.accept_contract``; a storm's fires that join one already written
    out, in ``join_members``."""

    async def join_members(self, group: GroupRequest, members: Sequence[MemberJoin]) -> list[str | None]:
        """``members`` (fires of ``group.key``'s group, each as ``accept_contract`` would store it
        as a member) join the open group of the key, in order, in one atomic step, with no dedupe
        key: each is stored ``grouped`` (its record naming the group) unless its callback id
        exists (nothing written for it), and the group counts and lists it as ``accept_contract``'s
        join would (after the page it waits for a follow-up; at ``max_fires`` the group closes).

        The answers, in order: the group each member joined, or None when its callback id
        exists. They stop at the first member no group took (none open, or it filled): that one
        and every one after it are left for the caller to offer whole (``accept_contract``), none
        of them written. Raises ``ValueError`` for members of more than one watcher."""

    async def claim_joins(self, now: datetime, *, limit: int = 100, lease_ms: int = 30000) -> list[JoinBatch]:
        """Atomically claim up to ``limit`` groups whose joins' follow-up is due at ``now``, hidden
        from other claimers until ``now + lease_ms`` (as ``claim_due``); each with the members
        waiting, in join order, and the ordinal of the follow-up that will carry them."""

    async def joins_reported(self, batch: JoinBatch, deliveries: Sequence[Delivery], *, at: datetime) -> bool:
        """In one atomic step: ``batch``'s members leave the group's waiting joins, ``deliveries``
        (its follow-up, kind ``joined.N``) are enqueued, and joins after them are due
        ``interval_ms`` after ``at``. False, writing nothing, when the batch was recorded already
        (another claimer, a retry) or is not the group's waiting head any more."""

    async def member_resolved(self, group_id: str, member_id: str) -> bool:
        """The source reported member ``member_id`` of group ``group_id`` over (the group's own
        first fire is a member too), in one atomic step: True once every member of the group was
        (the group closes: the next fire of its key opens a new one), or for a group the store
        does not know (pruned); False while others still fire. A member reported twice counts once."""


class TransitionStore(Protocol):
    """The contract's moves after intake, each one atomic step under the rules of
    ``core.contract_states``: the relay's deadlines, notifies and approval pauses."""

    async def claim_due(
        self, now: datetime, *, limit: int = 100, lease_ms: int = 30000
    ) -> list[tuple[Contract, Envelope | None]]:
        """Atomically claim up to ``limit`` pending contracts whose deadline is ≤ ``now``; each
        with its envelope (None for a contract stored without one).

        A claimed contract is hidden from other claimers until ``now + lease_ms``; if it is
        still pending then (its claimer crashed before settling it) it is due again. Two
        concurrent callers never receive the same contract within a lease. Contracts are
        taken in order of due time (the deadline; for a lapsed claim, the lease's end) and
        returned in that order.
        """

    async def settle_contracts(self, settlements: Sequence[Settlement], *, at: datetime) -> set[str]:
        """Compare-and-set each settlement's pending contract to its final state, settled at
        ``at``; the callback ids that won. The whole batch is one atomic step.

        A settled contract leaves the deadline index (and any claim) and its settlement's
        deliveries are enqueued in the outbox (a key already there is left as is). A contract
        that does not exist or is not pending is left alone and its deliveries are not enqueued:
        of two racing settlers exactly one wins, so a fallback is enqueued at most once; the
        same id twice in a batch is settled by the first. A settlement's ``claimed`` copy spares
        the store a read. Raises ``ValueError``, writing nothing, for a settlement
        ``check_settlement`` refuses (a state that is not a settled state, a wrong copy).
        """

    async def begin_notify(
        self, callback_id: str, deliveries: Sequence[Delivery], *, at: datetime, follow_up: bool = False
    ) -> NotifyStart | None:
        """Hand a notify to delivery: in one atomic step, the contract takes it
        (``contract_states.after_notify``: ``pending`` → ``notifying``, leaving the deadline
        index) and ``deliveries`` are enqueued (a key already there is left as is, so a notify
        tried again after a crash is not sent twice). The page is decided here, atomically across
        replicas (SPEC §6.4): a page candidate (``follow_up`` False) is taken only while no other
        candidate is in flight, a follow-up only by a contract that has one in flight or settled
        (``after_notify``); a contract that refuses it is left alone and nothing is enqueued, and
        the caller tries the other kind. None for an unknown id.
        """

    async def resolve_contract(
        self, callback_id: str, deliveries: Sequence[Delivery], *, at: datetime
    ) -> Moved | None:
        """The source reports the fire over before its page (SPEC §6.4): in one atomic step a
        ``pending`` contract becomes ``resolved`` (``core.contract_states.after_resolved``),
        settled at ``at``, out of the deadline index (and any claim), and ``deliveries`` (its
        resolved line, if any) are enqueued. Any other state is left alone and nothing is
        enqueued. None for an unknown id."""

    async def pause_contract(self, callback_id: str) -> Moved | None:
        """The session waits for an approval: ``pending``/``notifying`` → ``awaiting_approval``,
        out of the deadline index (``contract_states.after_approval_requested``). None for an
        unknown id."""

    async def resume_contract(self, callback_id: str, *, deadline: datetime) -> Moved | None:
        """The approval was decided: ``awaiting_approval`` → ``pending`` due at ``deadline`` (the
        contract's new deadline), or ``notifying`` with that deadline while a notify delivery of
        the callback is still pending (``contract_states.after_approval_decided``). Other
        states are left alone. None for an unknown id."""


class SessionStore(Protocol):
    """A hook session's transcript (one per session key, shared by the key's callbacks) and the
    one read a session starts from."""

    async def append_transcript(
        self,
        session_key: str,
        entries: Sequence[dict[str, Any]],
        *,
        at: datetime,
        checkpoints: Mapping[str, dict[str, Any]] | None = None,
        usage: UsageCount | None = None,
    ) -> list[int]:
        """Append ``entries`` with consecutive ``seq`` numbers (1 for a session's first entry),
        put ``checkpoints`` (each replacing the one of its key, as ``put_checkpoint``) and add
        ``usage`` to its counters (as ``UsageStore.add_usage`` at ``at``), in one atomic step: a
        session's progress is recorded with the entries it speaks of, and a model call is
        counted with its reply (one write instead of two; ``ValueError`` for a ``ttl_ms`` below 1).

        Concurrent appends to one session never share or skip a number; each call's entries
        stay contiguous. Numbers continue after entries pruned from the transcript's head
        (``prune``); a session pruned whole starts again at 1. Returns the entries' seq
        numbers (not the entries read back: no caller needs them, and decoding and validating
        each entry just written was CPU spent on every append of every hook session).
        """

    async def get_transcript(
        self, session_key: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[TranscriptEntry]:
        """Entries with ``seq > after_seq`` in ``seq`` order, at most ``limit`` (None: all)."""

    async def read_callback(
        self,
        callback_id: str,
        checkpoint_keys: Sequence[str],
        *,
        tail: TranscriptTail | None = None,
        envelope: bool = True,
    ) -> CallbackView:
        """The callback's contract and envelope (None for an unknown id), those of
        ``checkpoint_keys`` that have a checkpoint, by key, and the transcript entries ``tail``
        names (in ``seq`` order), read in one round trip: what a hook session reads before it
        starts (``get_contract``, ``get_envelopes``, ``get_checkpoints`` and ``get_transcript``
        in one). With ``envelope=False`` the envelope is neither read nor decoded (the view's is
        None): the caller holds it already (handed over in memory by the intake)."""


class CheckpointStore(Protocol):
    """Small JSON documents by key, each replaced whole: a hook session's progress and memory,
    and what other stages keep per callback (escalation notes, approvals' progress, Slack threads)
    (``get_checkpoint``: ``store.shortcuts``)."""

    async def put_checkpoint(self, session_key: str, data: dict[str, Any]) -> None:
        """Replace the session's checkpoint (what a restarted session resumes from)."""

    async def get_checkpoints(self, session_keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The checkpoints that exist, by session key (keys without one are left out)."""


class InboxStore(Protocol):
    """The operator inbox's items and their audit trail (``inbox.items``; alert streams,
    approvals, escalations and the API read it)."""

    async def create_inbox_item(self, item: InboxItem, deliveries: Sequence[Delivery] = ()) -> bool:
        """Store ``item`` with a first history entry (from None to ``item.status`` by
        ``item.actor`` at ``item.created_at``) and enqueue ``deliveries``, in one atomic step (a
        key already in the outbox is left as is). Returns False, writing nothing, when the id
        exists (so a retried dead letter cannot appear twice).

        The deliveries are the first step of the item's escalation chain: stored with the item,
        a crash right after creating it cannot lose them."""

    async def get_inbox_item(self, item_id: str) -> InboxItem | None:
        """The item, or None."""

    async def list_inbox(
        self,
        *,
        status: InboxStatus | None = None,
        kind: InboxKind | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[InboxItem]:
        """Items newest first (``created_at`` desc, then ``id`` desc), filtered; cursors as in
        ``list_contracts``."""

    async def transition_inbox_item(
        self,
        item_id: str,
        *,
        from_statuses: Collection[InboxStatus],
        to_status: InboxStatus,
        actor: str,
        note: str | None,
        at: datetime,
    ) -> InboxItem | None:
        """Compare-and-set the status and append the history entry in one atomic step.

        The item gets ``to_status``, ``updated_at = at``, ``actor`` and ``note`` (the previous
        note is kept when ``note`` is None). Returns the updated item, or None (writing
        nothing) when the item does not exist or its status is not in ``from_statuses``.
        """

    async def inbox_history(self, item_id: str) -> list[InboxHistoryEntry]:
        """Every status change of the item, oldest first ([] for an unknown id)."""


class OutboxStore(Protocol):
    """The outbox of deliveries (``delivery.dispatch``; the relay and escalations enqueue and
    read it)."""

    async def enqueue_delivery(self, delivery: Delivery) -> bool:
        """Add a delivery; False (nothing written) when its key exists (idempotent by key)."""

    async def claim_deliveries(
        self, now: datetime, *, limit: int = 100, lease_ms: int = 30000
    ) -> list[Delivery]:
        """Atomically claim pending deliveries with ``next_attempt_at ≤ now``, like ``claim_due``.

        A claimer that crashes releases them when the lease ends, so a delivery may be
        attempted again: delivery is at least once, receivers drop repeats by its key.
        """

    async def list_deliveries(self, callback_id: str) -> list[Delivery]:
        """The callback's deliveries, oldest first (``created_at``, then key)."""

    async def record_outcomes(self, outcomes: Sequence[DeliveryOutcome]) -> Recorded:
        """Record attempts' outcomes in one atomic step, in order; the keys that were updated
        (unknown keys are skipped) and the contracts a notify's outcome moved.

        Each delivery gets the outcome's state, attempts, next attempt, error and ``updated_at``
        and its claim is released: a pending one is due again at ``next_attempt_at``, delivered
        or failed ones leave the queue. A notify delivery (kind ``notify``, ``notify.N``) that
        goes from pending to delivered or failed moves its contract in the same step
        (``contract_states.after_notify_delivered``, ``after_notify_failed``; a contract back to
        ``pending`` is due at its deadline), so a notify's outcome and its contract can never
        disagree, even across a crash. Stores change the attempt's fields in place (or build
        the record from an outcome's ``claimed`` copy) instead of loading and re-writing every
        record. Raises ``ValueError``, writing nothing, for an outcome ``check_outcome`` refuses.
        """


class SilenceStore(Protocol):
    """Silences (SPEC §14), put, read and listed by ``callbacks.silences``."""

    async def put_silence(self, silence: Silence) -> None:
        """Store ``silence`` whole, replacing the one with its id (expiring a silence is putting it
        again with ``ends_at`` = now: ``Silence.expired_at``)."""

    async def get_silence(self, silence_id: str) -> Silence | None:
        """The silence, or None."""

    async def list_silences(
        self,
        *,
        now: datetime,
        state: SilenceState | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[Silence]:
        """Silences newest first (``created_at`` desc, then ``id`` desc), only those whose state at
        ``now`` is ``state`` (``Silence.state_at``; None: any); cursors as in ``list_contracts``."""


class RetentionStore(Protocol):
    """Deleting what the retention settings let go (``retention``)."""

    async def prune(self, before: PruneBefore, *, limit: int = 500) -> Pruned:
        """Delete what ``before`` lets go (the rules are ``store.pruning``'s), in bounded steps.

        One call deletes at most ``limit`` contracts (with their envelopes, deliveries,
        checkpoints and leading transcript entries), ``limit`` inbox items (with their history),
        ``limit`` sessions and ``limit`` silences, each kind in one atomic step, oldest first;
        ``more`` says a kind had more to delete. Racing callers (replicas) delete each record
        once: a record already gone is skipped. Raises ``ValueError`` for a ``limit`` below 1.
        """


class UsageStore(Protocol):
    """Model usage counters (SPEC.md §20): what a fire, a watcher's day, the service's day and a
    model's day spent, by key (``core.usage``: ``fire:{callbackId}``, ``service-day:{day}``, …),
    shared by replicas and kept across restarts. Hook sessions and judges add to them after
    each model call and read them before the next; ``sentinel status`` reads a day's."""

    async def add_usage(self, keys: Sequence[str], usage: Usage, *, at: datetime, ttl_ms: int) -> None:
        """Add ``usage`` to each counter of ``keys`` (one made at zero when missing), in one atomic
        step; a key given twice counts twice. A counter not added to for ``ttl_ms`` after ``at``
        may be gone (the store forgets old days by itself). ``ValueError`` for ``ttl_ms`` below 1."""

    async def get_usage(self, keys: Sequence[str]) -> dict[str, Usage]:
        """The counters of ``keys`` that exist, by key (a missing one has spent nothing)."""


class FeedbackStore(Protocol):
    """People's 👍/👎 on fires (SPEC.md §22), from the API, the web page and Slack's buttons;
    read by ``callbacks show``, the callback's API view and the report."""

    async def put_feedback(self, feedback: Feedback) -> None:
        """Keep ``feedback``, replacing what the same person gave earlier on the same callback (the
        latest per person counts), in one atomic step. Feedback goes when its contract is pruned."""

    async def get_feedback(self, callback_ids: Sequence[str]) -> dict[str, list[Feedback]]:
        """Each callback's feedback, one per person, oldest first; a callback without any is absent."""


class PaceStore(Protocol):
    """Pacing shared by replicas (SPEC.md §16: at most 120 PagerDuty events in any 60 s per routing
    key). The slots live in the store, so every replica and every restart counts the same sends;
    a caller told to wait leaves its delivery pending in the outbox until its reserved slot."""

    async def take_pace_slot(
        self, key: str, *, holder: str, limit: int, window_ms: int, at: datetime
    ) -> datetime | None:
        """For ``holder`` (one delivery), in one atomic step: None when it may send at ``at`` (a slot
        free now is taken, or the slot reserved for it earlier has come), else the instant of the
        slot reserved for it, to call again then with the same ``holder``. Slots are handed out in
        the order asked, ``limit`` at most in any ``window_ms``; a reservation never used lapses
        with its window. ``key`` is a name the caller derived (never a secret). ``ValueError`` for
        ``limit`` or ``window_ms`` below 1."""


class AuditStore(Protocol):
    """The audit trail (SPEC.md §21): every change people and agents make, with who and how; read by
    ``GET /api/v1/audit``, ``sentinel audit`` and the web page's Audit view."""

    async def add_audit(self, entry: AuditEntry) -> None:
        """Keep ``entry`` (its ``id`` is new: ids are never reused)."""

    async def list_audit(
        self,
        *,
        since: datetime | None = None,
        actor: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[AuditEntry]:
        """Entries at or after ``since`` (None: any) whose actor is ``actor`` (None: any), newest first
        by ``(at, id)``; ``InvalidCursor`` for a cursor this store did not issue, ``ValueError`` for a
        ``limit`` below 1."""

    async def prune_audit(self, before: datetime, *, limit: int = 500) -> int:
        """Delete up to ``limit`` entries older than ``before``, oldest first, in one atomic step;
        the number deleted (racing replicas delete each entry once)."""


@runtime_checkable
class Store(
    LifecycleStore,
    WatcherStore,
    ContractStore,
    GroupStore,
    TransitionStore,
    SessionStore,
    CheckpointStore,
    InboxStore,
    OutboxStore,
    SilenceStore,
    RetentionStore,
    UsageStore,
    FeedbackStore,
    PaceStore,
    AuditStore,
    Protocol,
):
    """Durable state of a Sentinel deployment: every role, which each backend implements. See the
    module docstring for the guarantees they share; outside the composition root, name a role."""
