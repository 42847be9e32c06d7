"""The outbox worker: sends pending deliveries, retries with backoff, dead-letters the rest.

Deliveries live in the store (``enqueue_delivery``/``claim_deliveries``), so pending ones
survive restarts and, with Redis, are shared between replicas. Each delivery keeps its
key (``{callbackId}:{target}:{kind}``) as the Idempotency-Key on every attempt. A delivery
that still fails after ``delivery.maxAttempts`` attempts (or ``maxElapsedMs``) becomes a
``delivery_failure`` inbox item holding the message, so nothing is lost.

Escalation steps (kind ``escalation.N``) pass a ``DeliveryGate`` just before each attempt: the
layer above decides there whether the step is still wanted (its inbox item still open) and
queues the next step; a refused one ends ``cancelled``. So a step's deadline is the outbox's own
due time, claimed across replicas like every other delivery.

A target may also answer ``DeferredDelivery(until)`` (a receiver's pace, SPEC §16: PagerDuty's
events per minute): the delivery goes back to pending until then, no attempt counted and no
``maxElapsedMs`` check, so the wait lives in the store; or ``CancelledDelivery(reason)`` (a trigger
whose alert was resolved meanwhile): the delivery ends ``cancelled`` with the reason as its last
error.

Secrets are masked here, before anything is stored, sent or shown: in each message as it
becomes deliveries, and in each failure's text (a receiver's error page may echo the URL it
was asked for, and that URL may carry a key from the environment).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from sentinel_hooks.background import BackgroundTask
from sentinel_hooks.clock import Clock
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import DeliverySpec
from sentinel_hooks.core.retry import Backoff, call_with_retries, retry_after_of
from sentinel_hooks.delivery.outcomes import OutcomeWriter
from sentinel_hooks.delivery.targets.base import (
    CancelledDelivery,
    DeferredDelivery,
    DeliveryError,
    Message,
    Target,
    TransientDeliveryError,
    takes_follow_ups,
)
from sentinel_hooks.errors import StoreError, TransientError
from sentinel_hooks.events import Events
from sentinel_hooks.outages import Outage
from sentinel_hooks.store.base import OutboxStore
from sentinel_hooks.store.records import (
    Delivery,
    DeliveryKind,
    DeliveryOutcome,
    DeliveryState,
    Recorded,
    is_escalation_kind,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

DeadLetter = Callable[[Delivery, str], Awaitable[None]]


class DeliveryGate(Protocol):
    """Decides, just before each attempt, whether an escalation delivery (kind ``escalation``,
    ``escalation.N``) is still wanted; implemented above the outbox (``relay.escalation``).

    ``admit`` may do work of its own first (enqueue the chain's next step: idempotently, since
    after a crash the same delivery is claimed and admitted again). A delivery it refuses ends
    ``cancelled``: not sent, not a dead letter. An exception counts as a failed attempt that is
    tried again. ``sent`` is told of each escalation delivery a target accepted (for metrics).
    """

    async def admit(self, delivery: Delivery) -> bool: ...

    def sent(self, delivery: Delivery) -> None: ...


POLL_S = 0.25
CONCURRENCY = 128  # sends in flight at most (the HTTP client's pool holds 256 connections)
CLAIM_AT_LEAST = 32  # free slots before claiming again while sends are in flight
# Recording a send the target accepted, while the store fails: three tries within half a second.
RECORD_SENT_BACKOFF = Backoff(base_s=0.2, cap_s=0.4, jitter="equal", max_attempts=3)


def delivery_backoff(spec: DeliverySpec) -> Backoff:
    """``delivery`` as a policy: after failed attempt n wait a draw from [c / 2, c] ("equal
    jitter"), c = min(maxMs, baseMs * 2^(n-1)), or as long as a Retry-After asks; at most
    ``maxAttempts`` attempts (``maxElapsedMs`` is checked by the dispatcher)."""
    return Backoff(
        base_s=spec.base_ms / 1000, cap_s=spec.max_ms / 1000, jitter="equal", max_attempts=spec.max_attempts
    )


class Dispatcher:
    """Works the outbox of one service.

    A claimed delivery is hidden from other workers for ``lease_ms`` (longer than one send
    may take); if its worker dies, the delivery is sent again after that, with the same
    Idempotency-Key, so receivers can drop the repeat.
    """

    def __init__(
        self,
        *,
        store: OutboxStore,
        clock: Clock,
        targets: dict[str, Target],
        spec: DeliverySpec,
        dead_letter: DeadLetter,
        on_moved: Callable[[Recorded], None] | None = None,
        lease_ms: int = 20_000,
        rng: random.Random | None = None,
        events: Events | None = None,
        redactor: Redactor | None = None,
        gate: DeliveryGate | None = None,
    ) -> None:
        self._events = events
        self._gate = gate
        self._redactor = redactor or Redactor()
        self._store = store
        self._clock = clock
        self._targets = targets
        self._spec = spec
        self._backoff = delivery_backoff(spec)
        self._dead_letter = dead_letter
        self._rng = rng or random.Random()
        self._lease_ms = lease_ms
        self._wake = asyncio.Event()
        self._loop = BackgroundTask()
        self._claims = Outage(log, "claiming due deliveries", clock=clock)
        self._inflight: set[asyncio.Task[bool]] = set()
        # ``outliving``'s work (``attempt_now``'s attempts among it): outside the slots, awaited by ``stop``
        self._attempting: set[asyncio.Task[Any]] = set()
        self._reserved = 0  # slots promised to deliveries stored held (``reserve``), not yet started
        self._room = asyncio.Event()  # set when enough slots are free to claim again
        self._on_moved = on_moved
        self._outcomes = OutcomeWriter(store, on_moved=self._moved)

    # -- enqueueing --------------------------------------------------------------------------

    def new_deliveries(
        self,
        message: Message,
        targets: Sequence[str],
        kind: DeliveryKind,
        *,
        at: datetime,
        key_id: str | None = None,
        due: datetime | None = None,
    ) -> list[Delivery]:
        """One pending delivery of ``message`` per target (not yet stored), secrets masked, keyed
        ``{key_id}:{target}:{kind}``; ``key_id`` is the message's callback id unless given (an
        inbox item's id for its escalation steps); due at ``at`` unless ``due`` is given."""
        body = message.to_json()
        if self._redactor.found_in(body):  # else the fresh dict as it is: no masked copy per fire
            body = self._redactor.data(body)
        first = key_id or message.callback_id
        return [Delivery.new(first, target, kind, body, at=at, due=due) for target in dict.fromkeys(targets)]

    def held_deliveries(
        self, message: Message, targets: Sequence[str], kind: DeliveryKind, *, at: datetime
    ) -> list[Delivery]:
        """``new_deliveries`` that the worker leaves alone for ``lease_ms``: the caller stores them
        and tries them at once (``attempt_now``). Otherwise a worker (here or on another
        replica) could claim one while that attempt is under way and send it twice; if the
        process dies mid-attempt, the worker sends it after the lease, with the same key."""
        held_until = at + timedelta(milliseconds=self._lease_ms)
        return self.new_deliveries(message, targets, kind, at=at, due=held_until)

    def follow_up_targets(self, targets: Sequence[str]) -> list[str]:
        """Those of ``targets`` that get follow-ups (SPEC §6.4; an unknown name is kept, so its
        delivery is dead-lettered as any other's)."""
        known = self._targets
        return [t for t in targets if t not in known or takes_follow_ups(known[t])]

    async def enqueue(self, deliveries: Sequence[Delivery]) -> None:
        """Store deliveries (a key already there is left alone) and wake the worker."""
        for delivery in deliveries:
            await self._store.enqueue_delivery(delivery)
        self.wake()

    def wake(self) -> None:
        self._wake.set()

    def _moved(self, recorded: Recorded) -> None:
        """Outcomes just recorded moved contracts (a notify delivered or failed for good): tell
        their owner, the relay (``on_moved``)."""
        if self._on_moved is not None:
            self._on_moved(recorded)

    @property
    def lease_ms(self) -> int:
        """How long one attempt may take at most (a claim lasts this long)."""
        return self._lease_ms

    async def attempt_now(self, deliveries: Sequence[Delivery]) -> list[bool]:
        """``attempt`` in a task of the dispatcher's that the caller awaits shielded
        (``outliving``): a caller cancelled mid-send (a hook session stopped with its service)
        leaves the attempts to finish and record their outcomes, and ``stop`` waits for them.
        Cancelled with the caller, a message the receiver already had stayed unrecorded and
        went out again once its lease ran out, its contract settled only then."""
        return await self.outliving(self.attempt(deliveries))

    async def attempt(self, deliveries: Sequence[Delivery]) -> list[bool]:
        """Attempt stored ``held_deliveries`` at once, in parallel, in the caller's task; True per
        delivery accepted. Each outcome is recorded like any other (a failed one is retried by
        the worker). For work already running ``outliving``; others call ``attempt_now``."""
        if len(deliveries) == 1:  # the common case (a notify to one target): no gather
            return [await self._attempt(deliveries[0])]
        return list(await asyncio.gather(*(self._attempt(delivery) for delivery in deliveries)))

    async def outliving(self, work: Coroutine[Any, Any, T]) -> T:
        """``work``'s result, run in a task of the dispatcher's that the caller awaits shielded:
        a caller cancelled meanwhile leaves ``work`` to finish, and ``stop`` waits for it. The
        relay hands a notify over this way, its store step and its attempts in one piece
        (cancelled between the two, deliveries stored held for the attempt waited out their
        lease before anyone sent them)."""
        return await asyncio.shield(self._detached(work))

    def _detached(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(work)
        self._attempting.add(task)
        task.add_done_callback(self._attempting.discard)
        return task

    def reserve(self, wanted: int) -> int:
        """Promise up to ``wanted`` of the worker's free slots to deliveries the caller is about
        to store held (``held_deliveries``) and then start here (``start_held``); the number
        promised. The relay hands its fallbacks over this way: stored already claimed by this
        process, they need no claim and no re-read, and the worker does not claim past the
        promised slots meanwhile, so every held delivery starts at once (none waits out its
        lease in a local queue). Release what is not started with ``start_held([], n)``."""
        granted = max(0, min(wanted, CONCURRENCY - len(self._inflight) - self._reserved))
        self._reserved += granted
        return granted

    def start_held(self, deliveries: Sequence[Delivery], reserved: int) -> None:
        """Start stored held deliveries on ``reserved`` slots promised by ``reserve`` (at most
        that many are given); the slots not used are free again."""
        self._reserved -= reserved
        for delivery in deliveries:
            self._start(delivery)
        if self._free() >= CLAIM_AT_LEAST or not self._inflight:
            self._room.set()

    def _free(self) -> int:
        return CONCURRENCY - len(self._inflight) - self._reserved

    def _start(self, delivery: Delivery) -> None:
        task = asyncio.get_running_loop().create_task(self._attempt(delivery))
        self._inflight.add(task)
        task.add_done_callback(self._done)

    async def drain_due(self) -> int:
        """One pass of the worker, awaited: claim what is due now and attempt it all; the number
        attempted. For callers that drive the outbox themselves (tests, a model of the relay)."""
        claimed = await self._store.claim_deliveries(
            self._clock.now(), limit=CONCURRENCY, lease_ms=self._lease_ms
        )
        await self.attempt_now(claimed)
        return len(claimed)

    # -- the worker --------------------------------------------------------------------------

    def start(self) -> None:
        self._loop.start(self._run)

    async def stop(self, *, timeout_s: float = 5.0) -> None:
        """Stop claiming; give the attempts under way ``timeout_s`` to finish and record their
        outcomes, then cancel the rest (what a crash does: each is sent again after its lease,
        with the same key). None runs once this returns, so the store can close behind it."""
        await self._loop.stop()
        running = self._inflight | self._attempting
        if not running:
            return
        _, late = await asyncio.wait(running, timeout=timeout_s) if timeout_s > 0 else (set(), running)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    async def _run(self) -> None:
        """Claim only as many deliveries as there are free slots, so each claimed one starts at
        once: a claim that waited in a local queue could outlive its lease and be sent twice.

        While sends are in flight it claims again only once ``CLAIM_AT_LEAST`` slots are free,
        so a busy outbox claims in batches instead of one delivery per finished send. The wake
        flag is cleared before claiming, so a wake-up during a claim is never lost.
        """
        while True:
            if (self._inflight or self._reserved) and self._free() < CLAIM_AT_LEAST:
                self._room.clear()
                await self._room.wait()
                continue
            self._wake.clear()
            free = self._free()
            wait_s = POLL_S
            try:
                claimed = await self._store.claim_deliveries(
                    self._clock.now(), limit=free, lease_ms=self._lease_ms
                )
                self._claims.succeeded()
            except Exception as exc:  # the worker must outlive a store outage: it backs off and retries
                wait_s = self._claims.failed(exc)
                claimed = []
            for delivery in claimed:
                self._start(delivery)
            if claimed and len(claimed) == free:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=wait_s)

    def _done(self, task: asyncio.Task[bool]) -> None:
        self._inflight.discard(task)
        if not self._inflight or self._free() >= CLAIM_AT_LEAST:
            self._room.set()

    async def _attempt(self, delivery: Delivery) -> bool:
        """One attempt; records the outcome; True when the target accepted the message."""
        attempts = delivery.attempts + 1
        target = self._targets.get(delivery.target)
        if target is None:
            await self._give_up(delivery, attempts, f"target {delivery.target!r} is not configured")
            return False
        gate = self._gate if is_escalation_kind(delivery.kind) else None
        if gate is not None and not await self._admitted(gate, delivery, attempts):
            return False
        try:
            await target.send(Message.from_json(delivery.message), idempotency_key=delivery.key)
        except DeliveryError as exc:
            return await self._failed(delivery, attempts, exc)
        except DeferredDelivery as exc:
            await self._defer(delivery, exc)
            return False
        except CancelledDelivery as exc:
            await self._cancel(delivery, self._redactor.text(str(exc)))
            return False
        except Exception as exc:  # a target bug must not kill the worker; treat as transient
            log.exception("target %s raised", delivery.target)
            return await self._failed(delivery, attempts, TransientDeliveryError(str(exc)))
        await self._mark_delivered(delivery, attempts)
        self._report(delivery, "delivered", attempts, None)
        if gate is not None:
            gate.sent(delivery)
        return True

    async def _admitted(self, gate: DeliveryGate, delivery: Delivery, attempts: int) -> bool:
        """Ask ``gate``; a refused delivery is recorded ``cancelled`` (its attempts unchanged)."""
        try:
            admitted = await gate.admit(delivery)
        except Exception as exc:  # the store may be down: try again like a failed send
            log.warning("checking escalation %s failed: %s", delivery.key, exc)
            await self._failed(
                delivery, attempts, TransientDeliveryError(f"checking the inbox item failed: {exc}")
            )
            return False
        if not admitted:
            await self._cancel(delivery, None)
        return admitted

    async def _cancel(self, delivery: Delivery, reason: str | None) -> None:
        """Record ``delivery`` ``cancelled`` (not sent, not a dead letter; attempts unchanged),
        with ``reason`` as its last error when a target gave one."""
        now = self._clock.now()
        await self._record(
            delivery,
            state="cancelled",
            attempts=delivery.attempts,
            next_attempt_at=now,
            last_error=reason,
            at=now,
        )
        self._report(delivery, "cancelled", delivery.attempts, reason)

    async def _defer(self, delivery: Delivery, deferred: DeferredDelivery) -> None:
        """Put ``delivery`` back as pending until ``deferred.until`` (a receiver's pace, SPEC §16):
        no attempt counted and no ``maxElapsedMs`` check, so a storm's deliveries wait their
        turn in the outbox instead of becoming dead letters."""
        now = self._clock.now()
        log.debug("delivery %s waits until %s: %s", delivery.key, deferred.until.isoformat(), deferred)
        self._report(delivery, "deferred", delivery.attempts, None)
        await self._record(
            delivery,
            state="pending",
            attempts=delivery.attempts,
            next_attempt_at=max(deferred.until, now),
            last_error=delivery.last_error,
            at=now,
        )

    async def _record(
        self,
        delivery: Delivery,
        *,
        state: DeliveryState,
        attempts: int,
        next_attempt_at: datetime,
        last_error: str | None,
        at: datetime,
    ) -> None:
        """Store an attempt's outcome (batched with others that arrive meanwhile); ``delivery`` is
        the claimed copy, so the store need not read the record again."""
        await self._outcomes.record(
            DeliveryOutcome(delivery.key, state, attempts, next_attempt_at, last_error, at, claimed=delivery)
        )

    async def _mark_delivered(self, delivery: Delivery, attempts: int) -> None:
        """Record an accepted send, retrying a failing store briefly (``RECORD_SENT_BACKOFF``): a
        send left marked pending would go out again once its claim lapses (the receiver sees the
        same Idempotency-Key)."""

        async def record() -> None:
            now = self._clock.now()
            await self._record(
                delivery, state="delivered", attempts=attempts, next_attempt_at=now, last_error=None, at=now
            )

        async def failed(exc: BaseException, delay_s: float) -> None:
            log.warning(
                "recording delivery %s as sent failed: %s; again in %.1f s", delivery.key, exc, delay_s
            )

        try:
            await call_with_retries(
                record, RECORD_SENT_BACKOFF, retry_if=StoreError, rng=self._rng, before_sleep=failed
            )
        except StoreError as exc:
            log.error(
                "delivery %s was sent but could not be recorded (%s); it may be sent again", delivery.key, exc
            )

    def _report(self, delivery: Delivery, outcome: str, attempts: int, error: str | None) -> None:
        if self._events is not None:
            message = delivery.message
            self._events.delivery(
                delivery.key,
                delivery.target,
                delivery.kind,
                outcome=outcome,
                attempts=attempts,
                error=error,
                watcher_id=message.get("watcher_id") or None,
                callback_id=message.get("callback_id") or delivery.callback_id,
                follow_up=bool(message.get("follow_up")),
            )

    async def _failed(self, delivery: Delivery, attempts: int, exc: DeliveryError) -> bool:
        now = self._clock.now()
        error = self._redactor.text(str(exc))
        elapsed = now - delivery.created_at
        delay = timedelta(seconds=self._backoff.delay_s(attempts, self._rng, retry_after_of(exc)))
        within = elapsed + delay <= timedelta(milliseconds=self._spec.max_elapsed_ms)
        if isinstance(exc, TransientError) and not self._backoff.exhausted(attempts) and within:
            log.warning("delivery %s failed (attempt %d): %s", delivery.key, attempts, error)
            self._report(delivery, "retry", attempts, error)
            await self._record(
                delivery,
                state="pending",
                attempts=attempts,
                next_attempt_at=now + delay,
                last_error=error,
                at=now,
            )
            return False
        await self._give_up(delivery, attempts, error)
        return False

    async def _give_up(self, delivery: Delivery, attempts: int, error: str) -> None:
        """Record the dead letter first (idempotently), then mark the delivery failed.

        If recording fails, the delivery stays pending and is tried again later, so a
        message is never dropped between the two steps.
        """
        now = self._clock.now()
        log.error("delivery %s failed for good after %d attempt(s): %s", delivery.key, attempts, error)
        try:
            await self._dead_letter(delivery, error)
        except Exception:
            log.exception("recording the failed delivery %s in the inbox failed; will retry", delivery.key)
            retry_at = now + timedelta(milliseconds=self._spec.max_ms)
            await self._record(
                delivery,
                state="pending",
                attempts=attempts,
                next_attempt_at=retry_at,
                last_error=error,
                at=now,
            )
            return
        await self._record(
            delivery, state="failed", attempts=attempts, next_attempt_at=now, last_error=error, at=now
        )
        self._report(delivery, "failed", attempts, error)
