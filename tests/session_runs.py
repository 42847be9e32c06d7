"""A recording session runner for tests of the session queues (it implements their ``Runs``).

The queues under test are real; the runner stands for ``SessionRunner`` so a test can see when
each session starts and ends, on which replica, hold chosen sessions open, and make one fail.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store import Contract, Trigger

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Recorder:
    """Records every run (replica, callback, start/end order); ``hold`` keeps chosen sessions open."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, str]] = []  # (event, replica, callback id)
        self.active: dict[str, set[str]] = defaultdict(set)  # session key → replicas running it
        self.overlaps: list[str] = []
        self.peak = 0  # the most sessions that ran at once
        self.hold: set[str] = set()
        self.hold_on: set[str] | None = None  # the replicas whose runs ``hold`` applies to (None: all)
        self.release = asyncio.Event()
        self.waiting: set[str] = set()  # callbacks whose session waits to start until ``start`` is set
        self.start = asyncio.Event()
        self.work_s = 0.0
        self.store_errors: set[str] = set()  # callbacks whose next run fails with StoreUnavailable
        self.crashes: set[str] = set()  # callbacks whose next run raises RuntimeError
        self.envelopes: list[tuple[str, Envelope | None]] = []  # (callback id, envelope handed) per run

    def runner(self, replica: str) -> Runner:
        return Runner(self, replica)

    def started(self, callback_id: str) -> list[str]:
        return [r for event, r, c in self.log if event == "start" and c == callback_id]

    def cancelled(self, callback_id: str) -> list[str]:
        return [r for event, r, c in self.log if event == "cancelled" and c == callback_id]

    def ended(self) -> list[str]:
        return [c for event, _, c in self.log if event == "end"]

    def order(self, key: str, contracts: dict[str, Contract]) -> list[str]:
        return [c for c in self.ended() if contracts[c].session_key == key]

    def running(self) -> int:
        return sum(len(replicas) for replicas in self.active.values())


class Runner:
    def __init__(self, recorder: Recorder, replica: str) -> None:
        self._recorder = recorder
        self._replica = replica

    async def wait_to_start(self, contract: Contract, envelope: Envelope | None = None) -> None:
        """A callback in ``waiting`` waits for ``start`` to be set (as a group's waitMs)."""
        if contract.callback_id in self._recorder.waiting:
            await self._recorder.start.wait()

    async def run(self, contract: Contract, envelope: Envelope | None = None) -> str:
        rec = self._recorder
        rec.envelopes.append((contract.callback_id, envelope))
        key = contract.session_key
        if rec.active[key]:
            rec.overlaps.append(f"{contract.callback_id} on {self._replica} beside {rec.active[key]}")
        rec.active[key].add(self._replica)
        rec.peak = max(rec.peak, rec.running())
        rec.log.append(("start", self._replica, contract.callback_id))
        try:
            if contract.callback_id in rec.hold and (rec.hold_on is None or self._replica in rec.hold_on):
                await rec.release.wait()
            await asyncio.sleep(rec.work_s)  # stands for a model call
            if contract.callback_id in rec.store_errors:
                rec.store_errors.discard(contract.callback_id)
                raise StoreUnavailable("redis store: append transcript failed: connection refused")
            if contract.callback_id in rec.crashes:
                rec.crashes.discard(contract.callback_id)
                raise RuntimeError("the session broke on purpose")
        except asyncio.CancelledError:
            rec.log.append(("cancelled", self._replica, contract.callback_id))
            raise
        finally:
            rec.active[key].discard(self._replica)
        rec.log.append(("end", self._replica, contract.callback_id))
        return "done"


def contract(callback_id: str, key: str, n: int) -> Contract:
    """A pending contract of session ``key``, the ``n``-th created."""
    return Contract(
        callback_id=callback_id,
        watcher_id="w",
        dedupe_key=callback_id,
        session_key=key,
        state="pending",
        trigger=Trigger(kind="match", priority="normal", matched_at=T0),
        created_at=T0 + timedelta(milliseconds=n),
        deadline=T0 + timedelta(hours=1),
        targets=["console"],
    )


def envelope_for(contract: Contract) -> Envelope:
    """The smallest envelope of ``contract``'s callback (what ``submit`` is handed with it)."""
    return Envelope.model_validate(
        {
            "callbackId": contract.callback_id,
            "watcher": {"id": contract.watcher_id, "eventName": "tested"},
            "trigger": {"matchedAt": T0.isoformat()},
        }
    )
