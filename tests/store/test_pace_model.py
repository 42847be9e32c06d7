"""``take_pace_slot`` against a model of a sliding window (SPEC §16), under random takes, time and
restarts of the store (a new SqliteStore over the same file, as after a kill -9: every slot is
committed before the call returns).

The model: a key's slots are the instants of its takes in the last ``WINDOW_MS``; a take succeeds
while fewer than ``LIMIT`` remain, else it is told when the oldest leaves. Besides matching the model
at every step, no ``WINDOW_MS`` span ever holds more than ``LIMIT`` granted takes of one key.
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
        self.granted: dict[str, list[int]] = defaultdict(list)

    def _open(self) -> SqliteStore:
        store = SqliteStore(self.path)
        self.loop.run_until_complete(store.open())
        return store

    @rule(ms=st.integers(min_value=0, max_value=700))
    def time_passes(self, ms: int) -> None:
        self.now_ms += ms

    @rule(key=KEYS)
    def take(self, key: str) -> None:
        at = T0 + timedelta(milliseconds=self.now_ms)
        got = self.loop.run_until_complete(
            self.store.take_pace_slot(key, limit=LIMIT, window_ms=WINDOW_MS, at=at)
        )
        live = [t for t in self.granted[key] if t > self.now_ms - WINDOW_MS]
        if len(live) < LIMIT:
            assert got is None, f"refused with {len(live)} slots taken"
            self.granted[key].append(self.now_ms)
        else:
            assert T0 + timedelta(milliseconds=min(live) + WINDOW_MS) == got

    @precondition(lambda self: self.now_ms > 0)
    @rule()
    def restart(self) -> None:
        self.loop.run_until_complete(self.store.close())
        self.store = self._open()

    @invariant()
    def never_more_than_the_limit_in_a_window(self) -> None:
        for times in self.granted.values():
            for start in times:
                assert sum(1 for t in times if start <= t < start + WINDOW_MS) <= LIMIT

    def teardown(self) -> None:
        self.loop.run_until_complete(self.store.close())
        self.loop.close()
        self.dir.cleanup()


TestPaceModel = PaceMachine.TestCase
TestPaceModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
