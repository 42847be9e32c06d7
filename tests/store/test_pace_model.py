"""``take_pace_slot`` against a model of a sliding window (SPEC §16), under random takes, time and
restarts of the store (a new SqliteStore over the same file, as after a kill -9: every slot is
committed before the call returns).

The model: a key's slots are kept while their window lasts, some reserved ahead for a holder. A
holder with a reservation is told its slot until it comes; then it sends at once if one more slot
now leaves every ``WINDOW_MS`` span holding now at ``LIMIT`` or fewer (tried span by span), else it
is told the earliest instant that does. A first ask gets the earliest such instant after every
slot handed out. Besides matching the model at every step, no ``WINDOW_MS`` span ever holds more
than ``LIMIT`` sends of one key (a late send counted where it happened, not at its old slot: the
example pinned below crowded four sends into one window that way).
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
        if mine and slots[mine[0]][0] > self.now_ms:
            expected: int | None = slots[mine[0]][0]  # its reserved slot has not come
        else:
            if mine:  # its slot has come: it sends now if that fits, else at the earliest that does
                others = [s[0] for i, s in enumerate(slots) if i != mine[0]]
                slot_ms = _earliest(others, self.now_ms)
                del slots[mine[0]]
            else:  # a first ask: after every slot handed out (in the order asked)
                others = [s[0] for s in slots]
                slot_ms = _earliest(others, max([self.now_ms, *others]))
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


def _fits(times: list[int], at_ms: int) -> bool:
    """Every span of WINDOW_MS that holds ``at_ms``, each tried, has room for one more."""
    starts = range(at_ms - WINDOW_MS + 1, at_ms + 1)
    return all(sum(1 for t in times if a <= t < a + WINDOW_MS) < LIMIT for a in starts)


def _earliest(times: list[int], from_ms: int) -> int:
    """The first instant from ``from_ms`` on, in steps of 1 ms up to the next slot's leaving, that fits."""
    at = from_ms
    while not _fits(times, at):
        at = min(t + WINDOW_MS for t in times if t + WINDOW_MS > at)  # nothing in between changes
    return at


TestPaceModel = PaceMachine.TestCase
TestPaceModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
