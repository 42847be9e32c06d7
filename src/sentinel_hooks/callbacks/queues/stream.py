"""The hook-session queue on Redis: any replica runs any session, one replica per session key at a time.

With a Redis store, accepted callbacks do not wait in one process's memory (``LocalSessionQueue``)
but in Redis, so another replica can take over (SPEC.md §11, docs/scaling.md "Hook sessions"):

* **enqueue** appends the callback id to the key's list and, when the list was empty, adds a
  "key has work" entry to the ``session-work`` stream, in one Lua call (``stream_scripts.py``
  describes the keys and why a busy key needs no new entry);
* each replica reads the stream in the consumer group ``sessions`` as consumer ``<replica id>``,
  one entry per free slot (``hookConcurrency`` slots per replica); a handler whose next session
  waits to start (a group's ``waitMs``, ``Runs.wait_to_start``) gives its slot back meanwhile,
  holding the key's lock, and takes a slot again to run it;
* for an entry, the replica **takes the key's lock** (``SET NX PX``); if another replica holds it,
  the entry is acknowledged at once: the holder drains the list;
* the holder **drains** the key's list in order, from the head the lock's script answered: run
  the head's session (``SessionRunner.run`` resumes from the transcript checkpoint), pop it once
  it reached a final status (the pop answers the next head), repeat; the pop that leaves the
  list empty also releases the lock and acknowledges the entry, in the same script — a callback
  pushed before it keeps the holder draining, one pushed after announces the key afresh, so
  none is left behind;
* a callback submitted on this replica waits with its contract and envelope in memory
  (``HANDED_MAX`` at most): when this replica drains it, its session starts from them instead
  of reading them back from the store; drained elsewhere, they are forgotten as newer ones come;
* the lock is **renewed** every ``lease_ms / 3`` together with the entry's idle time; a holder
  whose renewal fails, or that could not renew for ``lease_ms`` minus one tick, cancels the
  session at its next await (before its next write or tool call) and hands the key back;
* a read whose reply comes too late (a busy event loop) is given up, and the entries Redis
  delivered to it meanwhile are taken back at once from this consumer's pending list;
* a replica that died holding a lock leaves its entry pending: once idle for ``2 * lease_ms``
  (the lock has expired by then), another replica **reclaims** it (XAUTOCLAIM) and resumes the
  session from its checkpoint. A tool call whose result was recorded is not repeated.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from sentinel_hooks.background import cancel_and_wait
from sentinel_hooks.callbacks.queues.base import (
    QueueContext,
    QueueRoles,
    Runs,
    run_counted,
    sessions_to_resume,
)
from sentinel_hooks.callbacks.queues.stream_scripts import SOURCES
from sentinel_hooks.clock import Clock
from sentinel_hooks.cluster.connection import bounded, command_timeout_s, first_command, open_client
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.errors import StoreError
from sentinel_hooks.events import Events
from sentinel_hooks.outages import Outage
from sentinel_hooks.store.records import Contract
from sentinel_hooks.store.redis.keys import RedisKeys

log = logging.getLogger(__name__)

GROUP = "sessions"
BLOCK_MS = 1000  # how long one read waits for new entries (stop is not delayed by it: reads are cancelled)
FORGET_CONSUMERS_AFTER_LEASES = 10  # consumers with nothing pending, idle this long, are removed
HANDED_MAX = 1024  # submitted callbacks held in memory for this replica's drains (oldest forgotten first)


@dataclass(frozen=True)
class StreamSettings:
    """Where the queue lives and who this replica is (from the cluster wiring in ``service.py``)."""

    redis_url: str
    key_prefix: str
    replica_id: str
    lease_ms: int


class LockLost(Exception):
    """This replica no longer holds the session key's lock; it must stop touching the session."""


class StreamSessionQueue:
    """The hook-session queue shared by every replica on one Redis (a ``SessionQueue``)."""

    def __init__(
        self,
        runner: Runs,
        *,
        store: QueueRoles,
        clock: Clock,
        settings: StreamSettings,
        concurrency: int,
        events: Events | None = None,
        resume_window_ms: int = 0,
    ) -> None:
        self._resume_window_ms = resume_window_ms
        self._runner = runner
        self._store = store
        self._clock = clock
        self._events = events
        self.settings = settings
        self.replica_id = settings.replica_id
        self._keys = RedisKeys(settings.key_prefix)
        self._lease_ms = settings.lease_ms
        self.tick_s = settings.lease_ms / 3000
        self._timeout_s = command_timeout_s(settings.lease_ms)
        self._concurrency = concurrency
        self._limit = asyncio.Semaphore(concurrency)
        self._reading = Outage(log, "session queue: reading the stream", clock=clock)
        self._reclaiming = Outage(log, "session queue: reclaiming abandoned entries", clock=clock)
        self._client: Redis | None = None
        self._scripts: dict[str, AsyncScript] = {}
        self._loops: list[asyncio.Task[None]] = []
        self._handlers: set[asyncio.Task[None]] = set()
        self._entries: set[str] = set()  # the stream entries the handlers hold
        self._unslotted: set[asyncio.Task[None]] = set()  # handlers waiting without their slot
        self._halted = False
        self._handed: OrderedDict[str, tuple[Contract, Envelope]] = OrderedDict()
        self.finished: dict[str, str] = {}

    # -- the CallbackSink side -----------------------------------------------------------------

    async def submit(self, envelope: Envelope, contract: Contract) -> None:
        """Queue an accepted callback (the contract is stored; a failure here is left to the relay),
        holding its contract and envelope for a drain on this replica."""
        self._handed[contract.callback_id] = (contract, envelope)
        if len(self._handed) > HANDED_MAX:
            self._handed.popitem(last=False)
        try:
            await self.requeue(contract)
        except StoreError as exc:
            log.error("could not queue the session of %s: %s", contract.callback_id, exc)

    async def requeue(self, contract: Contract) -> None:
        """Queue ``contract``'s session at the end of its key's list (also after an approval)."""
        await self._enqueue(contract, only_if_absent=False)

    async def _enqueue(self, contract: Contract, *, only_if_absent: bool) -> bool:
        keys = [self._keys.session_queue(contract.session_key), self._keys.session_work]
        args = [contract.callback_id, contract.session_key, "1" if only_if_absent else "0"]
        return bool(await self._script("enqueue", "queue a session", keys, args))

    # -- lifecycle -----------------------------------------------------------------------------

    async def resume(self) -> int:
        """Join the consumer group, start reading; queue pending unfinished sessions not queued yet.

        Sessions already in a list (waiting, or running on a replica that may have died) are left
        alone: their stream entries bring them back. Only a callback lost between its contract
        and its queue (a crash in between) is added; a duplicate is at worst skipped by the run.
        """
        if self._client is None:
            client = open_client(
                self.settings.redis_url, "sessions", name=f"sentinel-sessions:{self.replica_id}"
            )
            self._scripts = {name: client.register_script(source) for name, source in SOURCES.items()}
            self._client = client
        await first_command(self._ensure_group)
        loop = asyncio.get_running_loop()
        self._loops = [loop.create_task(self._read_forever()), loop.create_task(self._reclaim_forever())]
        queued = 0
        since = self._clock.now() - timedelta(milliseconds=self._resume_window_ms)
        for contract in await sessions_to_resume(self._store, settled_since=since):
            if await self._enqueue(contract, only_if_absent=True):
                queued += 1
        return queued

    async def stop(self) -> None:
        """Stop reading; cancel running sessions and hand their keys back to the other replicas."""
        # Reading stops first: a read still blocked on the server would take the entries that the
        # handlers re-announce as they hand their keys back.
        for group in (self._loops, list(self._handlers)):
            for task in group:
                task.cancel()
            for task in group:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._loops.clear()
        self._handlers.clear()
        self._handed.clear()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()

    async def halt(self) -> None:
        """Stop at once without handing anything back: what a crash looks like to the others.

        Locks expire and this replica's pending entries are reclaimed by another replica.
        """
        self._halted = True
        await self.stop()

    # -- reading and reclaiming ----------------------------------------------------------------

    async def _read_forever(self) -> None:
        """Read one new entry per free slot and handle it."""
        streams: dict[Any, Any] = {self._keys.session_work: ">"}
        while True:
            await self._limit.acquire()
            handed = False
            failed: StoreError | None = None
            try:
                async with bounded(
                    self.settings.redis_url, "read the session stream", timeout_s=self._read_s
                ):
                    replies: Any = await self._redis.xreadgroup(
                        GROUP, self.replica_id, streams, count=1, block=BLOCK_MS
                    )
                for _, entries in replies or []:
                    for entry_id, fields in entries:
                        self._spawn(str(entry_id), fields)
                        handed = True
            except StoreError as exc:
                failed = exc
            finally:
                if not handed:
                    self._limit.release()
            if failed is not None:  # with the slot given back: taking entries back needs slots
                await self._after_read_error(failed)
            else:
                self._reading.succeeded()

    @property
    def _read_s(self) -> float:
        return BLOCK_MS / 1000 + self._timeout_s

    async def _reclaim_forever(self) -> None:
        """Every tick: take over entries idle for ``2 * lease_ms`` (their replica died); tidy the group."""
        while True:
            await self._clock.sleep(self.tick_s)
            try:
                await self.reclaim()
            except StoreError as exc:
                await self._after_error(exc, self._reclaiming)
            except Exception as exc:  # a bug in one sweep must not end reclaiming; the next tick retries
                self._reclaiming.failed(exc)
            else:
                self._reclaiming.succeeded()

    async def reclaim(self) -> int:
        """Claim and handle up to the free slots' worth of abandoned entries; how many."""
        free = self._concurrency - len(self._handlers) + len(self._unslotted)
        if free <= 0:
            return 0
        async with bounded(self.settings.redis_url, "reclaim session entries", timeout_s=self._timeout_s):
            reply = await self._redis.xautoclaim(
                self._keys.session_work, GROUP, self.replica_id, 2 * self._lease_ms, count=free
            )
            consumers = await self._redis.xinfo_consumers(self._keys.session_work, GROUP)
            for consumer in consumers:
                idle_ms = int(consumer.get("idle", 0))
                if (
                    consumer.get("name") != self.replica_id
                    and int(consumer.get("pending", 0)) == 0
                    and idle_ms > FORGET_CONSUMERS_AFTER_LEASES * self._lease_ms
                ):
                    await self._redis.xgroup_delconsumer(self._keys.session_work, GROUP, consumer["name"])
        claimed = [(str(entry_id), fields) for entry_id, fields in reply[1] if fields]
        for entry_id, fields in claimed:
            log.info(
                "reclaimed session entry %s (%s): idle for over %d ms, its replica stopped or failed",
                entry_id,
                fields.get("key"),
                2 * self._lease_ms,
            )
            await self._limit.acquire()
            self._spawn(entry_id, fields)
        return len(claimed)

    def _spawn(self, entry_id: str, fields: dict[str, Any]) -> None:
        """Handle one entry in its own task; the slot acquired for it is released when it ends.

        An entry a handler of this replica holds already (taken back after a late read, then
        reclaimed too) is not handled twice: its slot is released at once."""
        if entry_id in self._entries:
            self._limit.release()
            return
        task = asyncio.get_running_loop().create_task(self._handle(entry_id, str(fields.get("key", ""))))
        self._handlers.add(task)
        self._entries.add(entry_id)

        def done(finished: asyncio.Task[None]) -> None:
            self._handlers.discard(finished)
            self._entries.discard(entry_id)
            if finished in self._unslotted:  # ended while waiting to start: it holds no slot
                self._unslotted.discard(finished)
            else:
                self._limit.release()

        task.add_done_callback(done)

    async def _after_error(self, exc: StoreError, outage: Outage) -> None:
        """Recreate a deleted group, or wait as ``outage`` says before the loop tries again (its log
        stays short however long Redis is away, ``outages``)."""
        if "NOGROUP" in str(exc):  # the stream or its group was deleted (a flushed database)
            with contextlib.suppress(StoreError):
                await self._ensure_group()
            return
        await self._clock.sleep(outage.failed(exc))

    async def _after_read_error(self, exc: StoreError) -> None:
        """After a failed read: take back what the stream delivered to it anyway, at once; back
        off as after any error when Redis does not answer that either."""
        if "NOGROUP" in str(exc):
            await self._after_error(exc, self._reading)
            return
        try:
            taken = await self._take_back_delivered()
        except StoreError as again:
            await self._after_error(again, self._reading)
            return
        log.info("session queue: %s; took back %d entries delivered meanwhile", exc, taken)

    async def _take_back_delivered(self) -> int:
        """Handle the entries the stream delivered to this replica that no handler has; how many.

        A blocking read whose reply arrives after its bound (an event loop busy for seconds) is
        given up, but Redis has delivered its entry to this consumer all the same: without this,
        the entry would wait until it is reclaimed as abandoned (``2 * lease_ms``) while its
        session's deadline runs. This consumer's pending entries are those its handlers hold
        (acknowledged when their key is released) and any such orphan.
        """
        wanted = self._concurrency + len(self._entries)
        async with bounded(
            self.settings.redis_url, "read this replica's pending sessions", timeout_s=self._timeout_s
        ):
            replies: Any = await self._redis.xreadgroup(
                GROUP, self.replica_id, {self._keys.session_work: "0"}, count=wanted
            )
        taken = 0
        for _, entries in replies or []:
            for raw_id, fields in entries:
                entry_id = str(raw_id)
                if not fields or entry_id in self._entries:  # trimmed away, or being handled
                    continue
                await self._limit.acquire()
                self._spawn(entry_id, fields)
                taken += 1
        return taken

    async def _ensure_group(self) -> None:
        try:
            async with bounded(
                self.settings.redis_url, "create the session group", timeout_s=self._timeout_s
            ):
                await self._redis.xgroup_create(self._keys.session_work, GROUP, id="0", mkstream=True)
        except StoreError as exc:
            if "BUSYGROUP" not in str(exc):  # BUSYGROUP: another replica created it already
                raise

    # -- one entry: take the key, drain it, give it back ---------------------------------------

    async def _handle(self, entry_id: str, session_key: str) -> None:
        value = f"{self.replica_id} {entry_id} {secrets.token_hex(6)}"
        lock = self._keys.session_lock(session_key)
        queue = self._keys.session_queue(session_key)
        try:
            took = await self._script(
                "take",
                "lock a session",
                [lock, self._keys.session_work, queue],
                [value, self._lease_ms, GROUP, entry_id],
            )
        except StoreError as exc:  # the entry stays pending: it is reclaimed later
            log.warning("session queue: %s", exc)
            return
        if not took[0]:
            return
        lost: list[str] = []
        me = asyncio.current_task()

        def on_lost(why: str) -> None:
            lost.append(why)
            if me is not None:
                me.cancel()

        keeper = asyncio.get_running_loop().create_task(self._keep(lock, entry_id, value, on_lost))
        try:
            await self._drain(session_key, entry_id, value, took[1] if len(took) > 1 else None)
        except (asyncio.CancelledError, LockLost) as exc:
            if lost or isinstance(exc, LockLost):
                why = lost[0] if lost else str(exc)
                log.warning("stopped the session %s on this replica: %s", session_key, why)
                if lost and me is not None:
                    me.uncancel()
            if not self._halted:
                await self._hand_back(session_key, entry_id, value)
            if isinstance(exc, asyncio.CancelledError) and not lost:
                raise
        except StoreError as exc:  # the lock expires; the pending entry is reclaimed later
            log.warning(
                "session %s stopped, to be retried in %.0f s: %s", session_key, 2 * self._lease_ms / 1000, exc
            )
        finally:
            await cancel_and_wait(keeper)

    async def _drain(self, session_key: str, entry_id: str, value: str, head: Any) -> None:
        """Run the key's callbacks in order, from ``head`` (the list's head when the lock was
        taken), until its list is empty and the lock released."""
        lock, queue = self._keys.session_lock(session_key), self._keys.session_queue(session_key)
        work = self._keys.session_work
        while True:
            if head is None:  # taken with an empty list (its callbacks were drained meanwhile)
                args = [value, GROUP, entry_id, session_key, "0"]
                if await self._script("release", "release a session", [lock, queue, work], args):
                    return
                async with bounded(
                    self.settings.redis_url, "read a session queue", timeout_s=self._timeout_s
                ):
                    head = await self._redis.lindex(queue, 0)
                continue
            callback_id = str(head)
            self.finished[callback_id] = await self._run(callback_id)
            args = [value, callback_id, GROUP, entry_id]
            popped = await self._script("pop", "finish a session", [lock, queue, work], args)
            if not popped[0]:
                raise LockLost("the session lock was taken or expired")
            if len(popped) < 2:  # the list is empty: the pop freed the lock
                return
            head = popped[1]

    async def _run(self, callback_id: str) -> str:
        """Run the callback's session: from the contract and envelope submitted here when this
        replica holds them, else from its contract read now (the runner reads the envelope)."""
        handed = self._handed.pop(callback_id, None)
        if handed is not None:
            contract, envelope = handed
        else:
            found, envelope = await self._store.get_contract(callback_id), None
            if found is None:
                return "skipped"
            contract = found
        await self._wait_to_start(contract, envelope)
        # a StoreError is not final: the entry stays pending and the session is tried again later
        return await run_counted(
            self._runner, contract, self._events, envelope=envelope, passes=(StoreError,)
        )

    async def _wait_to_start(self, contract: Contract, envelope: Envelope | None) -> None:
        """Wait until the session may start (``Runs.wait_to_start``) without this handler's slot,
        then take a slot again; the key's lock is kept meanwhile (``_keep``). A handler cancelled
        while waiting or taking the slot back holds none (``_spawn``'s ``done`` knows)."""
        me = asyncio.current_task()
        if me is None or contract.group is None:
            return
        self._unslotted.add(me)
        self._limit.release()
        await self._runner.wait_to_start(contract, envelope)
        await self._limit.acquire()
        self._unslotted.discard(me)

    async def _keep(self, lock: str, entry_id: str, value: str, on_lost: Any) -> None:
        """Renew the lock (and the entry's idle time) every tick; ``on_lost`` when that fails."""
        lease = timedelta(milliseconds=self._lease_ms)
        margin = timedelta(seconds=self.tick_s)
        valid_until = self._clock.now() + lease
        keys = [lock, self._keys.session_work]
        args = [value, self._lease_ms, GROUP, self.replica_id, entry_id]
        while True:
            await self._clock.sleep(self.tick_s)
            started = self._clock.now()
            try:
                if not await self._script("renew", "renew a session lock", keys, args):
                    on_lost("the session lock was taken or expired")
                    return
                valid_until = started + lease
            except StoreError as exc:
                if self._clock.now() >= valid_until - margin:
                    on_lost(f"the session lock could not be renewed ({exc})")
                    return

    async def _hand_back(self, session_key: str, entry_id: str, value: str) -> None:
        """Free the lock if still held, acknowledge the entry, re-announce what is left in the list."""
        keys = [
            self._keys.session_lock(session_key),
            self._keys.session_queue(session_key),
            self._keys.session_work,
        ]
        try:
            await self._script(
                "release", "hand back a session", keys, [value, GROUP, entry_id, session_key, "1"]
            )
        except StoreError as exc:  # the lock expires and the pending entry is reclaimed
            log.warning("could not hand back the session %s: %s", session_key, exc)

    # -- Redis ---------------------------------------------------------------------------------

    @property
    def _redis(self) -> Redis:
        if self._client is None:
            raise StoreError("the session queue is not started")
        return self._client

    async def _script(self, name: str, what: str, keys: list[str], args: list[Any]) -> Any:
        client = self._redis
        async with bounded(self.settings.redis_url, what, timeout_s=self._timeout_s):
            return await self._scripts[name](keys=keys, args=args, client=client)


def create(runner: Runs, context: QueueContext) -> StreamSessionQueue:
    """The ``redis-stream`` queue; ``context.stream`` says where it lives and who this replica is."""
    if context.stream is None:
        raise ValueError("the redis-stream session queue needs stream settings (a Redis store)")
    return StreamSessionQueue(
        runner,
        store=context.store,
        clock=context.clock,
        settings=context.stream,
        concurrency=context.concurrency,
        events=context.events,
        resume_window_ms=context.resume_window_ms,
    )
