"""``take_pace_slot`` against a model of a sliding window (SPEC §16), under random takes, time and
restarts of the store (a new SqliteStore over the same file, as after a kill -9: every slot is
committed before the call returns).

The model: a key's slots are kept while their window lasts, some reserved ahead for a holder. A
holder with a reservation is told its slot until it comes, then sends (the slot is used); another
gets a slot at once, or one a window after the ``LIMIT``-th latest. Besides matching the model at
every step, no ``WINDOW_MS`` span ever holds more than ``LIMIT`` sends of one key.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sentinel_hooks.store.sqlite import SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LIMIT = 3
WINDOW_MS = 1000
KEYS = st.sampled_from(["a", "b"])


class PaceMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "state.db"
        self.store = self._open()
        self.now_ms = 0
        self.slots: dict[str, list[tuple[int, int | None]]] = defaultdict(list)  # (ms, holder if reserved)
        self.sent: dict[str, list[int]] = defaultdict(list)  # the instants holders were let send

    def _open(self) -> SqliteStore:
        store = SqliteStore(self.path)
        self.loop.run_until_complete(store.open())
        return store

    @rule(ms=st.integers(min_value=0, max_value=700))
    def time_passes(self, ms: int) -> None:
        self.now_ms += ms

    @rule(key=KEYS, holder=st.integers(min_value=0, max_value=5))
    def take(self, key: str, holder: int) -> None:
        """Holder ``holder`` of ``key`` asks: the model's answer is the store's."""
        at = T0 + timedelta(milliseconds=self.now_ms)
        got = self.loop.run_until_complete(
            self.store.take_pace_slot(key, holder=str(holder), limit=LIMIT, window_ms=WINDOW_MS, at=at)
        )
        slots = self.slots[key]
        slots[:] = [s for s in slots if s[0] > self.now_ms - WINDOW_MS]
        mine = [i for i, (_, h) in enumerate(slots) if h == holder]
        if mine:
            slot_ms, _ = slots[mine[0]]
            if slot_ms > self.now_ms:
                expected = slot_ms
            else:
                slots[mine[0]] = (self.now_ms, None)  # the send counts where it happens
                expected = None
        else:
            times = sorted(s[0] for s in slots)
            slot_ms = self.now_ms if len(times) < LIMIT else max(self.now_ms, times[-LIMIT] + WINDOW_MS)
            reserved = slot_ms > self.now_ms
            slots.append((slot_ms, holder if reserved else None))
            expected = slot_ms if reserved else None
        assert (None if expected is None else T0 + timedelta(milliseconds=expected)) == got
        if got is None:
            self.sent[key].append(self.now_ms)

    @precondition(lambda self: self.now_ms > 0)
    @rule()
    def restart(self) -> None:
        self.loop.run_until_complete(self.store.close())
        self.store = self._open()

    @invariant()
    def never_more_than_the_limit_in_a_window(self) -> None:
        for times in self.sent.values():
            for start in times:
                assert sum(1 for t in times if start <= t < start + WINDOW_MS) <= LIMIT

    def teardown(self) -> None:
        self.loop.run_until_complete(self.store.close())
        self.loop.close()
        self.dir.cleanup()


TestPaceModel = PaceMachine.TestCase
TestPaceModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
