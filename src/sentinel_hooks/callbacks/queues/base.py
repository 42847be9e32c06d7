"""The plug-in point for hook-session queues: a Protocol, what every queue shares, and a registry.

A queue takes accepted callbacks (it is the intake's ``CallbackSink``) and runs each one's
session through a ``Runs`` (the ``SessionRunner``). Two implementations:

- ``local`` (``local.LocalSessionQueue``): in this process's memory; the default, and
  what tests use when one process is enough.
- ``redis-stream`` (``stream.StreamSessionQueue``): in Redis, shared by every replica on
  one Redis store, so any replica runs any session (docs/scaling.md).

Every queue keeps the contract of ``SessionQueue``; tests/contract/test_session_queues.py runs it
against both. A queue module exposes ``create(runner, context)`` (a ``QueueFactory``); modules
are imported on first use.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from sentinel_hooks.callbacks.sessions.progress import FINAL, progress_key
from sentinel_hooks.clock import Clock
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.events import Events
from sentinel_hooks.store.base import CheckpointStore, ContractStore
from sentinel_hooks.store.records import Contract, ContractState
from sentinel_hooks.store.shortcuts import get_checkpoint
from sentinel_hooks.tracing import traced_session

if TYPE_CHECKING:
    from sentinel_hooks.callbacks.queues.stream import StreamSettings

log = logging.getLogger(__name__)


class Runs(Protocol):
    """Runs (or resumes) one callback's session to a final status (``SessionRunner``).

    ``envelope`` is the callback's envelope when the queue holds it (handed over in memory by
    the intake, in the process that accepted it); None: the runner reads it from the store.
    """

    async def run(self, contract: Contract, envelope: Envelope | None = None) -> str: ...

    async def wait_to_start(self, contract: Contract, envelope: Envelope | None = None) -> None:
        """Return when the callback's session may start: at once, except a group's session before
        its ``waitMs`` ends (SPEC §19). A queue awaits it before it takes a slot for the session."""
        ...


class SessionQueue(Protocol):
    """Where accepted callbacks wait for their hook session, and what runs them.

    - Each callback queued (``submit``, or ``requeue`` after an approval) is run by one
      ``Runs.run`` at a time per session key, in the order queued; sessions of different keys run
      in parallel, at most ``concurrency`` at once (per replica); a session waiting to start
      (``Runs.wait_to_start``: a group's ``waitMs``) holds no slot meanwhile. In steady operation a callback
      queued once runs once; around a stop, a crash or a start it may run again, which the
      runner absorbs (it resumes from its checkpoint and skips a session already final).
    - A callback submitted and run in the same process is run with the envelope ``submit`` was
      handed (the envelope travels once, in memory); one requeued, resumed after a restart or
      run by another replica is run without, and the runner reads it from the store.
    - A session that raises is reported ``crashed`` and the queue goes on with the next one.
    - ``finished`` maps each callback id run here to the status its last run returned.
    - ``resume`` (at start) queues the callbacks whose contract is still open and whose session had
      not reached a final status, and returns how many it queued.
    - ``stop`` cancels running sessions and returns once none runs here; a stopped callback stays
      open (its contract pending), so a queue started later over the same store runs it again.
    - ``submit`` and ``requeue`` do not raise for a callback they cannot queue: the contract's
      deadline covers it (``CallbackSink``).
    """

    finished: dict[str, str]

    async def submit(self, envelope: Envelope, contract: Contract) -> None: ...

    async def requeue(self, contract: Contract) -> None: ...

    async def resume(self) -> int: ...

    async def stop(self) -> None: ...


class QueueRoles(ContractStore, CheckpointStore, Protocol):
    """The store roles a queue calls: the open contracts and their sessions' progress (at
    ``resume``), and a queued callback's contract."""


@dataclass(frozen=True)
class QueueContext:
    """What a queue may use; ``stream`` is where the ``redis-stream`` queue lives (cluster wiring)."""

    store: QueueRoles
    clock: Clock
    concurrency: int
    events: Events | None = None
    stream: StreamSettings | None = None
    # how far back a restart looks for sessions still investigating after their page (SPEC §6.4)
    resume_window_ms: int = 2 * 600_000


class QueueFactory(Protocol):
    def __call__(self, runner: Runs, context: QueueContext) -> SessionQueue: ...


MODULES: dict[str, str] = {
    "local": "sentinel_hooks.callbacks.queues.local",
    "redis-stream": "sentinel_hooks.callbacks.queues.stream",
}


def create_session_queue(kind: str, runner: Runs, context: QueueContext) -> SessionQueue:
    """The queue of type ``kind`` (a key of ``MODULES``) running sessions with ``runner``."""
    factory: QueueFactory = importlib.import_module(MODULES[kind]).create
    return factory(runner, context)


async def run_counted(
    runner: Runs,
    contract: Contract,
    events: Events | None,
    *,
    envelope: Envelope | None = None,
    passes: tuple[type[Exception], ...] = (),
) -> str:
    """Run one session for a queue: counted in the running-sessions gauge and reported as an event.

    ``envelope`` is the one the queue was handed with the callback (None: not held here).
    A session that raises is logged and reported as ``crashed`` (one broken session must not
    stop the others; the contract's fallback covers it), except for the exception types in
    ``passes``, which propagate to a queue that retries them.
    """
    running = events.metrics.sessions_running if events is not None else None
    if running is not None:
        running.inc()
    try:
        status = await traced_session(events, contract, runner.run(contract, envelope))
    except passes:
        raise
    except Exception:
        log.exception("session for %s crashed", contract.callback_id)
        status = "crashed"
    finally:
        if running is not None:
            running.dec()
    if events is not None:
        events.session(contract.callback_id, status, watcher_id=contract.watcher_id)
    return status


RESUMABLE: tuple[ContractState, ...] = ("pending", "notifying")


INVESTIGATING: tuple[ContractState, ...] = ("fulfilled", "fallback_sent")
STARTED = frozenset({"running", "resuming"})  # progress of a session that was under way


async def open_contracts(store: ContractStore, *, settled_since: datetime | None = None) -> list[Contract]:
    """Contracts whose session may still have work to do after a restart (pending, or notifying:
    the agent notified and went on); paused sessions wait for their approval instead. With
    ``settled_since``, also those settled with a page but created since then, whose session may
    still investigate after the page (SPEC §6.4; ``to_resume`` checks each one's progress)."""
    found: list[Contract] = []
    for state in (*RESUMABLE, *(INVESTIGATING if settled_since is not None else ())):
        cursor: str | None = None
        while True:
            page = await store.list_contracts(state=state, limit=500, cursor=cursor)
            recent = [
                c
                for c in page.items
                if settled_since is None or c.state in RESUMABLE or c.created_at >= settled_since
            ]
            found.extend(recent)
            cursor = page.next_cursor
            if not cursor or len(recent) < len(page.items):  # newest first: the rest are older
                break
    return found


def to_resume(contract: Contract, progress: Mapping[str, Any]) -> bool:
    """Whether a restart queues this callback's session again: one of an open contract that has
    not finished, or one still investigating after its page (SPEC §6.4)."""
    status = progress.get("status")
    if contract.state in RESUMABLE:
        return status not in FINAL
    return status in STARTED


async def sessions_to_resume(store: QueueRoles, *, settled_since: datetime | None = None) -> list[Contract]:
    """After a restart: the callbacks whose session a queue runs again (``to_resume``), oldest
    first; with ``settled_since``, those still investigating after a page created since then."""
    found = []
    contracts = await open_contracts(store, settled_since=settled_since)
    for contract in sorted(contracts, key=lambda c: (c.created_at, c.callback_id)):
        if to_resume(contract, await get_checkpoint(store, progress_key(contract.callback_id)) or {}):
            found.append(contract)
    return found
