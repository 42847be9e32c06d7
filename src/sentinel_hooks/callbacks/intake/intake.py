"""Accepting a callback: dedupe window, durable response contract, hand-off to the session queue.

Every fire — a watcher's, a manual one, or an envelope POSTed to /hooks/sentinel — goes
through ``CallbackIntake.accept``, so silences, dedupe and the contract work the same everywhere.
A fire that a silence or maintenance window matches (``callbacks.intake.silences``) is recorded as a
``silenced`` contract naming it, and goes no further: no session, fan-out, fallback or escalation.
The contract is stored *before* the callback is handed on: if anything after that
crashes, the relay still finds the pending contract and delivers the fallback.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol

from sentinel_hooks.callbacks.intake.groups import (
    GroupStarts,
    OpenGroups,
    group_contract,
    group_request,
)
from sentinel_hooks.callbacks.intake.silences import Silences
from sentinel_hooks.clock import Clock
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.grouping import GroupRule
from sentinel_hooks.errors import CallbackExists
from sentinel_hooks.events import Events
from sentinel_hooks.relay.fallback import Fanout, fired_on
from sentinel_hooks.store.base import ContractStore, GroupStore
from sentinel_hooks.store.records import (
    Contract,
    Delivery,
    GroupRequest,
    MemberJoin,
    NoOpenGroup,
    Trigger,
    as_member,
)
from sentinel_hooks.tracing import fire_trace

log = logging.getLogger(__name__)


class IntakeRoles(ContractStore, GroupStore, Protocol):
    """The store roles the intake calls: fires accepted, and a storm's fires joining their groups."""


class _Ask(enum.Enum):
    ASK = "ask"


ASK_SILENCES: Final = _Ask.ASK
"""``accept(silenced_by=…)``'s default: the intake asks its ``Silences`` whether the fire is muted."""


class CallbackSink(Protocol):
    """Where accepted callbacks go next (the hook-session queue).

    ``submit`` is called once per pending contract, after the contract is stored; ``requeue``
    hands back a session that paused for an approval, once the approval is decided. Neither
    may raise for a callback it cannot process: the contract's deadline covers that case.
    """

    async def submit(self, envelope: Envelope, contract: Contract) -> None: ...

    async def requeue(self, contract: Contract) -> None: ...


class LoggingSink:
    """A sink that only records the hand-off in the log (until hook sessions run)."""

    async def submit(self, envelope: Envelope, contract: Contract) -> None:
        log.info(
            "%s fired on %s (%s) — callback %s",
            envelope.watcher.event_name,
            contract.watcher_id,
            contract.trigger.priority,
            contract.callback_id,
            extra={"callbackId": contract.callback_id, "watcherId": contract.watcher_id},
        )

    async def requeue(self, contract: Contract) -> None:
        log.info("approval decided for callback %s", contract.callback_id)


def _parse_instant(text: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def message_key(callback_id: str) -> str:
    """Where the fire's rendered message (and any messageTemplate error) is kept for the session,
    with the conditions that matched and their actual values (``sentinel callbacks show``)."""
    return f"message:{callback_id}"


def session_key(service: ServiceConfig, watcher_id: str, group: str | None = None) -> str:
    """``{hookSessionPrefix}:watcher:{id}``, or ``{hookSessionPrefix}:group:{group}`` when a group
    applies: the watcher's own ``fire.sessionGroup`` (``group``), else ``hookSessionGroup`` (SPEC §5.1).

    The one place a session key is made: the intake stores it in the contract, and everything
    after (queues, transcripts, memory, inbox items) reads it from there.
    """
    group = group or service.hook_session_group
    prefix = service.hook_session_prefix
    return f"{prefix}:group:{group}" if group else f"{prefix}:watcher:{watcher_id}"


class AcceptHook(Protocol):
    """What a new pending contract brings and sets off (``relay.notices.Notices``).

    ``deliveries`` makes its fan-out line's deliveries, which the store writes with the contract
    in one step (none are sent for a fire that is deduped or refused); ``accepted`` is told once
    the contract is stored pending, before the session sink (the relay's wake-up for its
    deadline, the outbox's for those deliveries). Neither may block on I/O.
    """

    def deliveries(self, envelope: Envelope, contract: Contract, fanout: Fanout) -> list[Delivery]: ...

    def accepted(self, contract: Contract, deliveries: Sequence[Delivery]) -> None: ...


class CallbackIntake:
    """Dedupe, store the contract, hand the callback on.

    The dedupe window, the contract, the fire's message (``message_key``) and its fan-out line's
    deliveries are written in one store step (``Store.accept_contract``): one round trip per
    callback.
    """

    def __init__(
        self,
        *,
        store: IntakeRoles,
        clock: Clock,
        service: ServiceConfig,
        sink: CallbackSink,
        on_accepted: AcceptHook | None = None,
        events: Events | None = None,
        silences: Silences | None = None,
        wait_in_queue: bool = False,
    ) -> None:
        """``wait_in_queue``: ``sink`` is a queue in the store that any replica takes from (the
        Redis stream queue), so a group's contract is queued at once and its session waits out
        ``waitMs`` there (``groups.GroupStarts``)."""
        self._store = store
        self._silences = silences
        self._clock = clock
        self._service = service
        self._sink = sink
        self._on_accepted = on_accepted
        self._events = events
        self._starts = GroupStarts(clock=clock, sink=sink, in_queue=wait_in_queue)
        self._open_groups = OpenGroups()

    async def accept(
        self,
        envelope: Envelope,
        *,
        session_group: str | None = None,
        bypass_dedupe: bool = False,
        fanout: Fanout | None = None,
        silenced_by: str | _Ask | None = ASK_SILENCES,
        conditions: list[dict[str, Any]] | None = None,
        group: GroupRule | None = None,
        details: Callable[[], tuple[Fanout | None, list[dict[str, Any]] | None]] | None = None,
    ) -> Contract:
        """The contract for ``envelope``: pending (handed on), deduped (inside the window),
        silenced (a silence or maintenance window matched it: recorded, not handed on) or, with a
        ``group`` rule (SPEC §19), grouped (it joined the open group of its key).

        A grouped fire's contract opens the group (``groups.group_contract``: the group's session
        key, its deadline ``waitMs`` later) and is handed on when ``waitMs`` ends
        (``GroupStarts``); a fire that joins an open group gets no session, deadline or fan-out of
        its own (the group's session is handed it before its next model call).

        ``silenced_by`` is what the caller already knows (the firing pipeline asks first, to keep
        a silenced watcher's edge): a silence id or window name, or None for "not silenced";
        by default the intake asks its ``Silences``. A silenced fire is never deduped and sets no
        dedupe key, so the same fire after the silence goes through.

        A callback id that is already taken raises ``CallbackExists`` (nothing is written or
        handed on): the store's ``accept_contract`` refuses it atomically, so two racing
        accepts of one id cannot both succeed.
        ``fanout`` defaults to the service's notificationPayloadMode with the default line.
        The contract's session key is ``session_key`` of the envelope's watcher and
        ``session_group`` (a watcher's ``fire.sessionGroup``; None for an external envelope).
        ``conditions`` (each leaf's path, op, value, actual value and result, for a match) is kept
        with the fire's message, so the callback can be explained later.

        ``details`` makes ``fanout`` and ``conditions`` when they are needed (they replace those
        arguments): a grouped fire whose key's group this process saw open is first offered as a
        join only (``_join``), which needs neither (a member has no message or fan-out line of
        its own); they are made when the store refuses it (the group closed) or the fire is
        silenced or traced.
        """
        pending = self._pending(envelope, session_group)
        if silenced_by is ASK_SILENCES:
            silenced_by = await self.silenced_by(envelope)
        traced = self._events is not None and self._events.tracing is not None
        if details is not None and (traced or silenced_by is not None or group is None):
            fanout, conditions = details()
            details = None
        if (trace := fire_trace(self._events, pending, conditions, silenced_by)) is not None:
            pending = pending.model_copy(update=trace)
        if silenced_by is not None:  # a silence acts on each fire before grouping (SPEC §19)
            return await self._silenced(envelope, pending, silenced_by)
        if group is not None:
            pending = group_contract(pending, envelope, group, self._service.hook_session_prefix)
        if details is not None and pending.group is not None:
            joined = await self._join(envelope, pending, group, bypass_dedupe)
            if joined is not None:
                return joined
            fanout, conditions = details()
        line = fired_on(envelope.watcher.event_name, envelope.watcher.id)
        chosen = fanout or Fanout(self._service.notification_payload_mode, line)
        window = self._service.hook_response_dedupe_window_ms
        deliveries = self._fanout(envelope, pending, chosen)
        # one store step: dedupe window, contract, the fire's message for the session, fan-out line
        stored = await self._store.accept_contract(
            pending,
            envelope,
            dedupe_key=f"dedupe:{pending.dedupe_key}" if not bypass_dedupe and window > 0 else None,
            dedupe_ttl_ms=window,
            checkpoints={
                message_key(pending.callback_id): {
                    "text": chosen.rendered,
                    "error": chosen.error,
                    "conditions": conditions,
                }
            },
            deliveries=deliveries,
            group=None if group is None or pending.group is None else group_request(pending.group, group),
        )
        contract = await self._recorded(stored, envelope.callback_id)
        if pending.group is not None:
            self._open_groups.saw(pending.group.key, contract)
        if contract.state == "pending":
            if self._on_accepted is not None:
                self._on_accepted.accepted(contract, deliveries)
            if group is not None and group.wait_ms > 0:
                await self._starts.later(envelope, contract, group.wait_ms)
            else:
                await self._sink.submit(envelope, contract)
        return contract

    async def _join(
        self, envelope: Envelope, pending: Contract, rule: GroupRule | None, bypass_dedupe: bool
    ) -> Contract | None:
        """The lean path of a fire that joins its key's open group (SPEC §19): the member (its
        envelope, state ``grouped`` and ``groupId``) and its dedupe key, with no message,
        explanation or fan-out line; None (nothing written) when this process has not seen the
        group open or the store found it closed."""
        group = pending.group
        if rule is None or group is None or not self._open_groups.has(group.key):
            return None
        window = self._service.hook_response_dedupe_window_ms
        request = replace(group_request(group, rule), join_only=True)
        try:
            stored = await self._store.accept_contract(
                pending,
                envelope,
                dedupe_key=f"dedupe:{pending.dedupe_key}" if not bypass_dedupe and window > 0 else None,
                dedupe_ttl_ms=window,
                group=request,
            )
        except NoOpenGroup:
            self._open_groups.forget(group.key)
            return None
        return await self._recorded(stored, envelope.callback_id)

    async def may_join_written(self) -> bool:
        """Whether fires may join their groups written out now (``join_written``): only while no
        silence or maintenance window is active (each fire would be matched) and fires are not
        traced (each would start a trace)."""
        if self._events is not None and self._events.tracing is not None:
            return False
        if self._silences is None:
            return True
        muting = await self._silences.snapshot()
        return not muting.silences and not muting.windows

    def group_open(self, key: str) -> bool:
        """Whether this process last saw the group of ``key`` open (a hint: the store decides)."""
        return self._open_groups.has(key)

    def member_record(
        self, envelope: Envelope, rule: GroupRule, session_group: str | None, *, now: datetime
    ) -> Contract:
        """The record ``accept`` stores for ``envelope``'s fire, created at ``now``, when it joins its
        key's group (its ``group_id`` left empty for the store): what ``join_written``'s members
        are written out from."""
        pending = group_contract(
            self._pending(envelope, session_group, now=now), envelope, rule, self._service.hook_session_prefix
        )
        return as_member(pending, "")

    async def join_written(self, request: GroupRequest, members: Sequence[MemberJoin]) -> list[str | None]:
        """Fires written out beforehand (``member_record``, the envelope's wire text) join the open
        group of ``request.key``, in one store step (``GroupStore.join_members``): each answer the
        group joined, or None for a callback id that exists (a repeat). The answers stop at the
        first fire no group took; the group is then forgotten as open, and the caller offers
        that fire and the ones after it whole (``accept``)."""
        answers = await self._store.join_members(request, members)
        if len(answers) < len(members):
            self._open_groups.forget(request.key)
        if self._events is not None:
            for member, group_id in zip(members, answers, strict=False):
                if group_id is not None:
                    self._events.fire(member.watcher_id, member.callback_id, state="grouped", kind="match")
        return answers

    async def close(self) -> None:
        """Stop waiting to start groups' sessions (a restart's queue resumes them: their contracts
        are pending)."""
        await self._starts.close()

    def _pending(
        self, envelope: Envelope, session_group: str | None, *, now: datetime | None = None
    ) -> Contract:
        """The pending contract of ``envelope``, created ``now`` (default: the clock's), due
        ``delivery.timeoutMs`` later."""
        now = now or self._clock.now()
        return Contract(
            callback_id=envelope.callback_id,
            watcher_id=envelope.watcher.id,
            dedupe_key=envelope.trigger.dedupe_key or envelope.callback_id,
            session_key=session_key(self._service, envelope.watcher.id, session_group),
            state="pending",
            trigger=Trigger(
                kind=envelope.trigger.kind,
                priority=envelope.trigger.priority,
                matched_at=_parse_instant(envelope.trigger.matched_at) or now,
            ),
            created_at=now,
            deadline=now + timedelta(milliseconds=envelope.delivery.timeout_ms),
            targets=list(envelope.delivery.targets),
        )

    def _fanout(self, envelope: Envelope, pending: Contract, fanout: Fanout) -> list[Delivery]:
        """The fan-out line's deliveries, to store with the contract; none when making them
        fails (the contract is stored all the same: its session and the relay still reach people)."""
        if self._on_accepted is None:
            return []
        try:
            return self._on_accepted.deliveries(envelope, pending, fanout)
        except Exception:
            log.exception("making the fan-out line of %s failed", pending.callback_id)
            return []

    async def silenced_by(self, envelope: Envelope) -> str | None:
        """The silence id or window name that mutes ``envelope``'s fire now, else None."""
        return None if self._silences is None else await self._silences.silenced_by(envelope)

    async def _silenced(self, envelope: Envelope, pending: Contract, silenced_by: str) -> Contract:
        """Record the muted fire: a final contract naming what muted it, nothing handed on."""
        silenced = pending.model_copy(
            update={"state": "silenced", "settled_at": pending.created_at, "silenced_by": silenced_by}
        )
        contract = await self._recorded(
            await self._store.accept_contract(silenced, envelope), envelope.callback_id
        )
        log.info(
            "%s on %s silenced by %s — callback %s",
            envelope.watcher.event_name,
            contract.watcher_id,
            silenced_by,
            contract.callback_id,
            extra={"callbackId": contract.callback_id, "watcherId": contract.watcher_id},
        )
        return contract

    async def _recorded(self, stored: Contract | None, callback_id: str) -> Contract:
        """``accept_contract``'s answer, reported as a fire; ``CallbackExists`` when the id was taken."""
        if stored is None:
            existing = await self._store.get_contract(callback_id)
            raise CallbackExists(callback_id, existing.state if existing is not None else None)
        if self._events is not None:
            self._events.fire(
                stored.watcher_id, stored.callback_id, state=stored.state, kind=stored.trigger.kind
            )
        return stored
