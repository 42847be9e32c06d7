"""The intake's part of grouping (SPEC §19): the contract a grouped fire offers the store, the
session that starts when the group's ``waitMs`` ends, and the fires that join after it started.

The store decides, atomically, whether a fire opens its key's group or joins the open one
(``ContractStore.accept_contract``). A fire that opens one is handed to the session queue when
``waitMs`` ends (``GroupStarts.later``), so the session sees every member that joined meanwhile;
after a restart the queue resumes the pending contract and the session runner waits out what is
left of ``waitMs`` (``group_starts_at``). A fire that joins after the session started reaches it
as a new message before its next model call (``SessionRunner``, which reads its contract then).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import datetime, timedelta
from typing import Protocol

from sentinel_hooks.clock import Clock
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.grouping import GroupRule, by_values, group_key, group_session_key
from sentinel_hooks.store.records import Contract, GroupInfo, GroupRequest

log = logging.getLogger(__name__)


class Submits(Protocol):
    async def submit(self, envelope: Envelope, contract: Contract) -> None: ...


def group_contract(pending: Contract, envelope: Envelope, rule: GroupRule, prefix: str) -> Contract:
    """``pending`` as the contract of a group it may open: the group's session key, a deadline
    ``rule.wait_ms`` later (the session starts then), and the group with the fire as its member."""
    values = by_values(rule, envelope)
    key = group_key(rule.name, values)
    return pending.model_copy(
        update={
            "session_key": group_session_key(prefix, key),
            "deadline": pending.deadline + timedelta(milliseconds=rule.wait_ms),
            "group": GroupInfo(
                key=key,
                by=list(zip(rule.by, values, strict=True)),
                members=[pending.callback_id],
            ),
        }
    )


def group_request(group: GroupInfo, rule: GroupRule) -> GroupRequest:
    """What the store needs to open or join the group of ``group.key``."""
    return GroupRequest(key=group.key, interval_ms=rule.interval_ms, max_fires=rule.max_fires)


def group_starts_at(contract: Contract, timeout_ms: int) -> datetime | None:
    """When the session of a group's contract starts (``waitMs`` after its first fire: its deadline
    less ``hookResponseTimeoutMs``, the envelope's ``timeoutMs``); None for any other contract."""
    if contract.group is None:
        return None
    return contract.deadline - timedelta(milliseconds=timeout_ms)


class GroupStarts:
    """Starts groups' sessions when their ``waitMs`` ends.

    In one process (``in_queue`` False) the wait is a task here: the queue's ``resume`` after a
    restart finds the pending contract and the runner waits out the rest. With a queue that lives
    in the store and that every replica takes from (the Redis stream queue, ``in_queue`` True),
    the contract is queued at once and the runner waits out ``waitMs`` holding the key's stream
    entry: a replica killed during the wait leaves that entry pending, another replica reclaims
    it (``StreamSessionQueue.reclaim``, once) and its runner starts the session when ``waitMs``
    ends, the start time being the contract's (``group_starts_at``)."""

    def __init__(self, *, clock: Clock, sink: Submits, in_queue: bool = False) -> None:
        self._clock = clock
        self._sink = sink
        self._in_queue = in_queue
        self._waiting: set[asyncio.Task[None]] = set()

    async def later(self, envelope: Envelope, contract: Contract, wait_ms: int) -> None:
        """Hand the group's contract to the session queue ``wait_ms`` from now (a queue in the
        store: now, its runner waits)."""
        if self._in_queue:
            await self._sink.submit(envelope, contract)
            return
        task = asyncio.get_running_loop().create_task(self._start(envelope, contract, wait_ms / 1000))
        self._waiting.add(task)
        task.add_done_callback(self._waiting.discard)

    async def _start(self, envelope: Envelope, contract: Contract, wait_s: float) -> None:
        await self._clock.sleep(wait_s)
        try:
            await self._sink.submit(envelope, contract)
        except Exception as exc:  # nobody awaits this task: a log line, not a lost traceback
            log.error(
                "group %s: its session could not be queued (%s: %s); the contract stays pending, "
                "so its fallback pages at the deadline and a restart resumes the session",
                contract.callback_id,
                type(exc).__name__,
                exc,
            )

    async def close(self) -> None:
        """Cancel the waits (their contracts stay pending: a restart's queue resumes them)."""
        for task in list(self._waiting):
            task.cancel()
        for task in list(self._waiting):
            with contextlib.suppress(asyncio.CancelledError):
                await task


class OpenGroups:
    """The groups this process last saw open, by key: a hint, never the truth (the store decides).

    A fire whose key is here is offered to the store as a join only (``GroupRequest.join_only``),
    without the message, explanation and fan-out line that only a group's first fire keeps; the
    store refuses it when the group has closed (``NoOpenGroup``, nothing written), and the intake
    then forgets the key and offers the fire whole. Bounded: past ``limit`` keys it starts over."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._open: dict[str, str] = {}

    def has(self, key: str) -> bool:
        """Whether a fire of ``key`` is likely to join an open group."""
        return key in self._open

    def saw(self, key: str, stored: Contract) -> None:
        """Note the group of ``key`` that the stored fire opened (pending) or joined (grouped)."""
        opened = stored.state == "pending" and stored.group is not None
        group_id = stored.group_id or (stored.callback_id if opened else None)
        if group_id is None:
            return
        if len(self._open) >= self._limit:
            self._open.clear()
        self._open[key] = group_id

    def forget(self, key: str) -> None:
        """The group of ``key`` refused a join: it closed."""
        self._open.pop(key, None)
