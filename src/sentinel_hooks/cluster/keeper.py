"""The lease keeper: keeps this replica holding exactly the watcher leases it should hold.

Every ``lease_ms / 3`` one tick, in this order:

1. **renew** every lease held (one pipelined round trip); a lease that could not be renewed
   (expired after a long pause, or taken) is lost: ``on_lost`` is called at once;
2. read the live replicas and work out, by rendezvous hashing, which tracked watchers this
   replica should own (cached until the live set or the tracked set changes);
3. **hand off** held leases another live replica should own: ``on_lost`` first (the runner
   stops, an in-flight poll finishes), then release, so the new owner never overlaps; the leases
   whose runners stopped are released together, one round trip for all that stopped while the
   previous release was under way (not one per lease: thousands of them, each bounded by a third
   of the lease, queueing for the few lease connections, timed out on a busy replica);
4. **acquire** the free leases of watchers this replica should own, in the order they were
   tracked; ``on_acquired({id: token})`` once for the first ``FIRST_TAKEN`` of them and once per
   ``LATER_TAKEN`` of the rest (at a start: the watchers that poll first start after one small
   round trip, and the manager schedules the others while they run).

Between periods a tick also runs at once when another replica ``announce``s that leases may have
moved (it joined, is leaving, or released leases it handed off; ``wake``): a join settles in a
few round trips instead of two periods or more. Such a tick renews only when a renewal is due.

A lease is also dropped (``on_lost``) when it has not been renewed for ``lease_ms``, even when
Redis cannot be reached: then it may have expired on the server. Not before: ``holds`` refuses
polls in a lease's last tick, and a renewal answered late (a starved replica) that still found the
lease this replica's extends it. Callbacks run as tasks, chained per watcher (so a
watcher's ``on_acquired`` and ``on_lost`` never overlap or reorder: one ``on_acquired`` for many
watchers waits for each one's earlier callbacks and is the one their later callbacks wait for),
and never delay renewal. The leases one tick loses, or hands off, are one batch, one task: it
calls ``on_lost`` for ``STOPS_AT_ONCE`` of them at a time, so stopping tens of thousands of
runners is spread over many turns of the event loop instead of tens of thousands of tasks in
one, which stalled a busy replica for seconds, past its next renewal, and lost it every lease
again (docs/scaling.md).

Fencing (``holds``) is answered from what the ticks learnt, without a Redis round trip per
observation: a renewal (or acquisition) that began at ``t`` set the key's expiry on the server
to at least ``t + lease_ms``, so until then no other replica can hold the lease. ``holds`` trusts
a lease until one tick before that instant, which leaves the caller a tick to act on what it
observed; within that last tick (a renewal is overdue: Redis slow or unreachable, or this event
loop stalled) it waits for the next tick's verdict. A lease that ran out of time unrenewed (no
renewal before it could expire, or dropped locally for want of one) cannot be vouched for either
way: ``holds`` raises ``StoreUnavailable``. A lease another replica holds (the renewal said so)
or one released after a hand-off is not held: ``holds`` is False.

Orphans: a tracked watcher whose lease stays free for ``ADOPT_AFTER_TICKS`` ticks while another
replica should own it (that replica does not know the watcher: a rolling deploy, a watcher just
created through another replica's API) is adopted; adopted leases are kept until the live set
changes, then rebalanced like the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial

from sentinel_hooks.background import BackgroundTask
from sentinel_hooks.clock import Clock
from sentinel_hooks.cluster.leases import Leases
from sentinel_hooks.cluster.membership import Membership
from sentinel_hooks.cluster.rendezvous import owned_by
from sentinel_hooks.errors import StoreError, StoreUnavailable
from sentinel_hooks.outages import Outage

log = logging.getLogger(__name__)

Acquired = Callable[[Mapping[str, int]], Awaitable[None]]
"""The leases one tick took: watcher id → fencing token."""
Lost = Callable[[str], Awaitable[None]]
Announce = Callable[[str], Awaitable[None]]
"""Tell the other replicas that leases may have moved (``"joined"``, ``"leaving"``, ``"released"``)."""

ADOPT_AFTER_TICKS = 4  # > lease_ms: longer than a normal hand-off or a dead owner's expiry takes
FIRST_TAKEN = 256  # leases taken, and started, before the rest of a tick's (see _acquire)
LATER_TAKEN = 2_048  # the rest, per round trip: preparing each is a few ms the started ones wait
STOPS_AT_ONCE = 128  # runners stopped at a time for a batch of leases lost or handed off (see _each)
STOPS_AT_ONCE_LEAVING = 1_024  # the same in a graceful stop, where no poll waits behind them (see stop)
WOKEN_GAP_TICKS = 0.1  # woken ticks are at least this share of a tick apart (bursts of announcements)


class LeaseKeeper:
    """Holds, renews, hands off and acquires this replica's watcher leases."""

    def __init__(
        self,
        leases: Leases,
        membership: Membership,
        *,
        clock: Clock,
        on_acquired: Acquired,
        on_lost: Lost,
        announce: Announce | None = None,
    ) -> None:
        if leases.replica_id != membership.replica_id:
            raise ValueError("leases and membership must belong to the same replica")
        self.replica_id = membership.replica_id
        self._leases = leases
        self._membership = membership
        self._clock = clock
        self._on_acquired = on_acquired
        self._on_lost = on_lost
        self._announce = announce
        self._lease = timedelta(milliseconds=leases.lease_ms)
        self.tick_s = leases.lease_ms / 3000
        self._tracked: dict[str, None] = {}  # in the order tracked: the order leases are taken in
        self._owned: dict[str, int] = {}
        self._valid_until: dict[str, datetime] = {}
        self._leaving: set[str] = set()
        self._adopted: set[str] = set()
        self._free_ticks: dict[str, int] = {}
        self._replicas: tuple[str, ...] = ()
        self._desired: set[str] = set()
        self._desired_key: tuple[tuple[str, ...], int] | None = None
        self._version = 0
        self._chains: dict[str, asyncio.Task[None]] = {}
        self._loop = BackgroundTask()
        self._ticked = asyncio.Event()  # set (and replaced) at the end of every tick
        self._woken = asyncio.Event()  # another replica joined, left or released leases: tick now
        self._unrenewed: dict[str, int] = {}  # leases dropped for want of a renewal: id → token
        self._handed: dict[str, tuple[int, datetime | None]] = {}  # to release: id → (token, valid until)
        self._releasing = False  # a batch of ``_handed`` is being released
        self._renewed_at: datetime | None = None  # when the last renewal began
        self._ticks = Outage(log, "lease keeper", clock=clock)  # ticks keep their period: see ``tick``

    # -- what the manager asks -----------------------------------------------------------------

    def track(self, watcher_id: str) -> int | None:
        """Consider ``watcher_id`` for a lease; its token when this replica holds it right now."""
        if watcher_id not in self._tracked:
            self._tracked[watcher_id] = None
            self._version += 1
        return self.token(watcher_id)

    async def untrack(self, watcher_id: str) -> None:
        """Stop considering ``watcher_id`` (its runner is gone) and release its lease if held."""
        if watcher_id in self._tracked:
            del self._tracked[watcher_id]
            self._version += 1
        self._free_ticks.pop(watcher_id, None)
        self._unrenewed.pop(watcher_id, None)
        token = self._forget(watcher_id)
        if token is not None:
            await self._release({watcher_id: token})

    def token(self, watcher_id: str) -> int | None:
        """The fencing token of a lease held and not being handed off, else None."""
        return None if watcher_id in self._leaving else self._owned.get(watcher_id)

    def owned(self) -> dict[str, int]:
        """Every lease held now (handing-off ones included): watcher id → token."""
        return dict(self._owned)

    async def holds(self, watcher_id: str, token: int) -> bool:
        """The fencing check, from this replica's own renewals (see the module docstring).

        True while ``watcher_id`` is held with ``token`` (a hand-off under way included: the
        runner stops before the lease is released) and valid for more than one tick. False when
        it is not held with ``token``. Raises ``StoreUnavailable`` when it ran out of time
        without a renewal.
        """
        while True:
            if self._owned.get(watcher_id) != token:
                if self._unrenewed.get(watcher_id) == token:
                    raise self._unrenewed_error(watcher_id)
                return False
            until = self._valid_until.get(watcher_id)
            left_s = (until - self._clock.now()).total_seconds() if until is not None else 0.0
            if left_s > self.tick_s:
                return True
            if left_s > 0:
                ticked = self._ticked
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left_s):
                        await ticked.wait()
                        continue  # the tick renewed the lease, lost it, or could not reach Redis
            raise self._unrenewed_error(watcher_id)

    def _unrenewed_error(self, watcher_id: str) -> StoreUnavailable:
        return StoreUnavailable(
            f"the lease of watcher {watcher_id} was not renewed within "
            f"{self._lease.total_seconds():g} s (Redis slow or unreachable, or this process stalled)"
        )

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Run the first tick now (so owned watchers start at once), then every ``lease_ms / 3``,
        and at once when woken (``wake``)."""
        await self.tick()
        self._loop.start(self._tick_forever)

    def wake(self) -> None:
        """Tick now rather than at the next period: another replica joined, is leaving, or released
        leases (it ``announce``d so), so this replica's share, or the free leases, changed. Without
        it a join waited a period for the holders to see the newcomer and another for the newcomer
        to see the released leases; wakes that come while a tick runs make one more tick."""
        self._woken.set()

    async def halt(self) -> None:
        """Stop ticking, keeping the leases (they expire unless renewed); what a pause looks like."""
        await self._loop.stop()

    async def stop(self) -> None:
        """Graceful stop: stop ticking, ``on_lost`` for every held lease, then release them all.

        The leases count as held until their runners stopped (``holds`` stays True for an
        in-flight poll), as in a hand-off, and are renewed once first so that polls in flight
        have a whole lease to finish; ``token`` no longer offers them meanwhile.
        """
        await self.halt()
        await self.drain()
        try:
            await self._renew(self._clock.now())
        except StoreError as exc:
            log.warning("lease keeper: could not renew before stopping: %s", exc)
        held = dict(self._owned)
        self._leaving.update(held)
        # released as their runners stop, a batch at a time (as a hand-off), not all after the last
        # one stopped: stopping tens of thousands takes a capped replica seconds. More at a time
        # than a hand-off: the service starts no poll any more, so nothing waits behind them, and
        # each runner's stop waits for its state's write: 128 at a time, a 60,000-watcher replica
        # took 469 round trips (past ``sentinel run``'s time limit at 0.5 CPU)
        steps = [partial(self._give_back, w, t) for w, t in held.items()]
        await asyncio.gather(_each(steps, at_once=STOPS_AT_ONCE_LEAVING), self.drain())

    async def drain(self) -> None:
        """Wait until every callback queued so far (and any they queue) has run."""
        while self._chains:
            await asyncio.gather(*set(self._chains.values()), return_exceptions=True)

    async def _tick_forever(self) -> None:
        while True:
            due = self._clock.now() + timedelta(seconds=self.tick_s)
            while (left_s := (due - self._clock.now()).total_seconds()) > 0 and await self._woken_within(
                left_s
            ):
                await self._tick_logged(regular=False)
                await self._clock.sleep(min(left_s, self.tick_s * WOKEN_GAP_TICKS))
            await self._tick_logged(regular=True)

    async def _woken_within(self, seconds: float) -> bool:
        """Wait ``seconds`` or until woken, whichever is first; True when woken."""
        woken = asyncio.ensure_future(self._woken.wait())
        slept = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait((woken, slept), return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            slept.cancel()
        if not self._woken.is_set():
            return False
        self._woken.clear()
        return True

    async def _tick_logged(self, *, regular: bool) -> None:
        try:
            await self.tick(regular=regular)
        except Exception:  # a bug in one tick must not end ownership; the next tick retries
            log.exception("lease keeper tick failed")

    # -- one tick ------------------------------------------------------------------------------

    async def tick(self, *, regular: bool = True) -> None:
        """Renew, rebalance, acquire (see the module docstring); Redis trouble waits for next tick.

        A tick that is not ``regular`` (woken: leases may have moved) renews only when a renewal
        is due and leaves the orphans to the regular ticks, whose count times their adoption.
        Ticks do not back off while Redis is away: a third of a lease apart, they are what takes
        the leases back the moment it returns. Their log does (``outages``): the first failure,
        a summary now and then, the recovery."""
        started = self._clock.now()
        try:
            if regular:
                await self._renew(started)
            else:
                await self._renew_if_due()
            desired = self._desired_set(await self._live())
            self._hand_off(desired)
            await self._acquire(desired, orphans_too=regular)
        except StoreError as exc:
            self._ticks.failed(exc)
        else:
            self._ticks.succeeded()
        finally:
            self._expire(self._clock.now())
            ticked, self._ticked = self._ticked, asyncio.Event()
            ticked.set()

    async def _renew(self, started: datetime) -> None:
        """Renew every lease held. The answer is awaited until the last of them could expire on
        the server, not only a command's usual bound: on a replica short of CPU the answer comes
        late, and a late answer that still found the leases this replica's extends them (from
        ``started``: no renewal sets an expiry earlier than that), where giving up on it lost
        every lease to one slow round trip."""
        self._renewed_at = started
        held = dict(self._owned)
        if not held:
            return
        latest = max(self._valid_until.values(), default=started)
        bound_s = max(self._leases.timeout_s, (latest - started).total_seconds())
        kept = await self._leases.renew(held, timeout_s=bound_s)
        current = [w for w, token in held.items() if self._owned.get(w) == token]  # not handed off meanwhile
        until = started + self._lease
        for watcher_id in current:
            if watcher_id in kept:
                self._valid_until[watcher_id] = until
        self._lose([w for w in current if w not in kept], "expired or taken by another replica")

    async def _live(self) -> tuple[str, ...]:
        replicas = tuple(sorted({*await self._membership.live(), self.replica_id}))
        if replicas != self._replicas:
            log.info("live replicas: %s", ", ".join(replicas))
            self._replicas = replicas
            self._adopted.clear()
        return replicas

    def _desired_set(self, replicas: tuple[str, ...]) -> set[str]:
        key = (replicas, self._version)
        if key != self._desired_key:
            self._desired = owned_by(self.replica_id, self._tracked, replicas)
            self._desired_key = key
        return self._desired

    def _hand_off(self, desired: Collection[str]) -> None:
        kept = self._leaving | self._adopted
        leaving = {w: t for w, t in self._owned.items() if w not in desired and w not in kept}
        if leaving:
            self._leaving.update(leaving)
            steps = [partial(self._give_back, w, t) for w, t in leaving.items()]
            self._chain(list(leaving), partial(_each, steps))

    async def _give_back(self, watcher_id: str, token: int) -> None:
        await self._call_lost(watcher_id)
        if self._owned.get(watcher_id) == token:  # not lost while the runner stopped
            until = self._valid_until.get(watcher_id)
            self._forget(watcher_id)
            self._handed[watcher_id] = (token, until)
            await self._release_handed()

    async def _release_handed(self) -> None:
        """Release every handed-off lease queued so far in one batch, and again for those queued
        meanwhile; a caller that finds a batch under way leaves its lease to that one. Each batch
        is ``announce``d, so the replicas that should own them take them at once."""
        if self._releasing:
            return
        self._releasing = True
        try:
            await asyncio.sleep(0)  # runners that stopped in the same turn of the loop join the batch
            while self._handed:
                batch, self._handed = self._handed, {}
                await self._release(
                    {w: token for w, (token, _) in batch.items()},
                    valid_until={w: until for w, (_, until) in batch.items() if until is not None},
                )
                await self.announce("released")
        finally:
            self._releasing = False

    async def announce(self, what: str) -> None:
        """Tell the other replicas leases may have moved (they tick at once); best effort: their
        regular ticks see the same change, a period later."""
        if self._announce is None:
            return
        try:
            await self._announce(what)
        except StoreError as exc:
            log.debug("could not announce %r to the other replicas: %s", what, exc)

    async def _acquire(self, desired: Collection[str], *, orphans_too: bool = True) -> None:
        """Take the free leases this replica should own, and the orphans, in the order tracked.

        The first ``FIRST_TAKEN`` go to ``on_acquired`` before the rest are asked for: the
        manager tracks watchers in the order of their first polls, so a replica starting with
        10,000 leases to take polls after one small round trip, not after all of them. The rest
        are taken ``LATER_TAKEN`` at a time: packing one request for thousands of leases holds
        the event loop, and the runners just started are waiting on their first store reads.

        Between two parts, the held leases are renewed when a tick has passed since the last
        renewal: on a replica short of CPU (busy starting the runners of the leases it just took)
        taking tens of thousands took longer than the local deadline, and every lease it held,
        and those it had just taken, were dropped unrenewed at the end of the tick, tick after tick.
        """
        orphans: set[str] = set()
        if orphans_too:
            others = [w for w in self._tracked if w not in desired and w not in self._owned]
            free = await self._leases.free(others) if others else set()
            self._free_ticks = {w: self._free_ticks.get(w, 0) + 1 for w in others if w in free}
            orphans = {w for w, ticks in self._free_ticks.items() if ticks >= ADOPT_AFTER_TICKS}
        wanted = [w for w in self._tracked if w in desired and w not in self._owned] + sorted(orphans)
        got: dict[str, int] = {}
        parts = [wanted[:FIRST_TAKEN]] + [
            wanted[begin : begin + LATER_TAKEN] for begin in range(FIRST_TAKEN, len(wanted), LATER_TAKEN)
        ]
        for part in parts:
            if part:
                await self._renew_if_due()
                got.update(await self._take(part, orphans))
        if got:
            adopted = len(orphans & got.keys())
            log.info("acquired %d watcher lease(s), %d of them orphans adopted", len(got), adopted)

    async def _renew_if_due(self) -> None:
        """Renew now when the last renewal began a tick ago or more (a long acquisition)."""
        now = self._clock.now()
        if self._renewed_at is not None and (now - self._renewed_at).total_seconds() >= self.tick_s:
            await self._renew(now)

    async def _take(self, wanted: list[str], orphans: set[str]) -> dict[str, int]:
        """Acquire ``wanted`` and hand the leases taken to ``on_acquired``; what the server gave.

        Each lease is valid until ``lease_ms`` after this round trip began (when its ``PX`` was
        set at the latest), not after the tick began: a tick's later parts come seconds later on
        a busy replica."""
        began = self._clock.now()
        got = await self._leases.acquire(wanted)
        stray = {w: t for w, t in got.items() if w not in self._tracked}  # untracked meanwhile
        taken = {w: t for w, t in got.items() if w not in stray}
        until = began + self._lease
        for watcher_id, token in taken.items():
            self._owned[watcher_id] = token
            self._valid_until[watcher_id] = until
            self._free_ticks.pop(watcher_id, None)
            self._unrenewed.pop(watcher_id, None)
            if watcher_id in orphans:
                self._adopted.add(watcher_id)
        if taken:
            self._chain(list(taken), partial(self._call_acquired, taken))
        if stray:
            await self._release(stray)
        return got

    def _expire(self, now: datetime) -> None:
        """Drop the leases that may have expired on the server. Not earlier: ``holds`` refuses
        their polls from a tick before that instant anyway, and a renewal late on a starved
        replica that still finds them this replica's keeps them (dropping them a tick early
        stopped every runner of such a replica and let its leases go)."""
        late = [w for w, until in self._valid_until.items() if now >= until]
        self._unrenewed.update((w, self._owned[w]) for w in late if w in self._owned)
        lease_s = self._lease.total_seconds()
        self._lose(late, f"not renewed for {lease_s:g} s: they may have expired on the server")

    # -- bookkeeping ---------------------------------------------------------------------------

    def _forget(self, watcher_id: str) -> int | None:
        """Drop a lease from the local view; its token, or None when it was not held."""
        self._valid_until.pop(watcher_id, None)
        self._leaving.discard(watcher_id)
        self._adopted.discard(watcher_id)
        return self._owned.pop(watcher_id, None)

    def _lose(self, watcher_ids: list[str], why: str) -> None:
        """Leases that are gone: forget them and call ``on_lost`` (unless a hand-off already did)."""
        if not watcher_ids:
            return
        log.warning("lost %d watcher lease(s) (%s): %s", len(watcher_ids), _shown(watcher_ids), why)
        stopping = [w for w in watcher_ids if w not in self._leaving]  # a hand-off stops the others
        for watcher_id in watcher_ids:
            self._forget(watcher_id)
        if stopping:
            self._chain(stopping, partial(_each, [partial(self._call_lost, w) for w in stopping]))

    async def _release(
        self, held: dict[str, int], *, valid_until: Mapping[str, datetime] | None = None
    ) -> None:
        """Release ``held`` in one round trip; one log line for the batch when something went wrong,
        naming the cause: a release answered late because this replica was (its event loop busy,
        short of CPU) is not blamed on Redis, and leases that were no longer this replica's say how
        late it came (``valid_until``: until when each was known to be held)."""
        if not held:
            return
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            released = await self._leases.release(held)
        except StoreError as exc:
            log.warning(
                "could not release %d watcher lease(s) (%s; they expire within the lease): %s",
                len(held),
                _shown(held),
                self._late_cause(loop.time() - began) or exc,
            )
            return
        gone = [w for w in held if w not in released]
        if gone:
            now = self._clock.now()
            late_ms = max(
                ((now - until).total_seconds() * 1000 for w in gone if (until := (valid_until or {}).get(w))),
                default=0.0,
            )
            log.warning(
                "%d watcher lease(s) (%s) were no longer this replica's to release: %s",
                len(gone),
                _shown(gone),
                f"they expired {late_ms:.0f} ms before this replica, late, released them (its "
                "renewals delayed: the process was busy or short of CPU); another replica may hold them"
                if late_ms > 0
                else "another replica took them",
            )

    def _late_cause(self, took_s: float) -> str | None:
        """When a command failed only because this replica looked at its answer late: why, else None.

        A command is bounded by ``Leases.timeout_s``; one whose failure came well after that bound
        (half of it again) was held up in this process (an event loop busy with other work, a
        starved CPU, a queue for the few lease connections), not by Redis."""
        bound_s = self._leases.timeout_s
        if took_s < 1.5 * bound_s:
            return None
        return (
            f"no answer within {bound_s:g} s, but this replica came back to it after {took_s * 1000:.0f} ms: "
            f"it was {(took_s - bound_s) * 1000:.0f} ms late itself (its event loop busy, or short of CPU), "
            "so Redis may well be fine"
        )

    def _chain(self, watcher_ids: list[str], step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step()`` once every earlier callback of these watchers finished (per-watcher
        order); their later callbacks wait for it."""
        previous = {self._chains[w] for w in watcher_ids if w in self._chains}

        async def run() -> None:
            if previous:  # ``wait``, not ``gather``: cancelling this step must not cancel them, or a
                # stop cancelled with thousands of steps chained on one batch cancels that batch
                # (and walks its thousands of children) once per step, seconds of CPU
                await asyncio.wait(previous)
            await step()

        task = asyncio.get_running_loop().create_task(run())
        for watcher_id in watcher_ids:
            self._chains[watcher_id] = task
        task.add_done_callback(lambda done: self._chain_done(watcher_ids, done))

    def _chain_done(self, watcher_ids: list[str], task: asyncio.Task[None]) -> None:
        for watcher_id in watcher_ids:
            if self._chains.get(watcher_id) is task:
                del self._chains[watcher_id]

    async def _call_acquired(self, tokens: Mapping[str, int]) -> None:
        """``on_acquired``; when it fails, the leases are given back (runners stopped, leases
        released) so that the next tick takes them again: a lease held and renewed with no runner
        started would leave its watcher unpolled for as long as this replica lives."""
        try:
            await self._on_acquired(tokens)
        except StoreError as exc:  # e.g. the runners' stored states could not be read in time
            log.warning(
                "could not start %d watcher(s) whose lease(s) this replica took (%s), so it gives the "
                "leases back to take them again at its next tick: %s",
                len(tokens),
                _shown(tokens),
                exc,
            )
        except Exception:  # the callback's failure is the manager's; keep the others running
            log.exception("on_acquired(%d lease(s)) failed; the leases are given back", len(tokens))
        else:
            return
        held = {w: t for w, t in tokens.items() if self._owned.get(w) == t and w not in self._leaving}
        self._leaving.update(held)
        await _each([partial(self._call_lost, w) for w in held])
        await self._release({w: t for w, t in held.items() if self._forget(w) == t})

    async def _call_lost(self, watcher_id: str) -> None:
        try:
            await self._on_lost(watcher_id)
        except Exception:  # the callback's failure is the manager's; keep the others running
            log.exception("on_lost(%s) failed", watcher_id)


async def _each(steps: Sequence[Callable[[], Awaitable[None]]], *, at_once: int = STOPS_AT_ONCE) -> None:
    """Run ``steps`` (each handles its own errors), ``at_once`` at a time, a new one as one
    ends: a turn of the event loop starts at most that many, and a step that waits (a runner's
    in-flight poll) holds up only its own place."""
    running: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()
    try:
        for step in steps:
            if len(running) >= at_once:
                _, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            running.add(loop.create_task(_run(step)))
        if running:
            await asyncio.wait(running)
    finally:
        for task in running:  # cancelled (a stop past its time limit): so are the steps under way
            task.cancel()


async def _run(step: Callable[[], Awaitable[None]]) -> None:
    await step()


def _shown(watcher_ids: Collection[str]) -> str:
    """Up to ten ids for a log line, then an ellipsis."""
    ids = sorted(watcher_ids)
    return ", ".join(ids[:10]) + (", …" if len(ids) > 10 else "")
