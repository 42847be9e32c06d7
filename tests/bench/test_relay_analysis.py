"""``relaybench.analysis.p99_by_tenth``: lateness per tenth of a run, to tell a backlog that grows
with run length (and where: in the relay or after it) from one that does not."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from relaybench.analysis import Arrival, p99_by_tenth  # noqa: E402  (after the path)


def test_a_backlog_after_the_relay_shows_as_lateness_climbing_while_settling_stays_flat() -> None:
    deadlines = {f"c{i}": float(i) for i in range(100)}  # one a second for 100 s
    arrivals = [Arrival(i + 0.01 * i, f"c{i}", f"c{i}:sink:fallback") for i in range(100)]  # 10 ms later each
    arrivals.append(Arrival(500.0, "c0", "c0:sink:fallback"))  # a repeat: the first arrival counts
    settled = {f"c{i}": i + 0.005 for i in range(100)}
    tenths = p99_by_tenth(deadlines, arrivals, settled)
    assert len(tenths) == 10
    assert [late for late, _ in tenths] == [round(10.0 * (10 * t + 9), 1) for t in range(10)]
    assert {settle for _, settle in tenths} == {5.0}


def test_a_tenth_with_nothing_arrived_is_none() -> None:
    deadlines = {"a": 0.0, "b": 10.0}
    tenths = p99_by_tenth(deadlines, [Arrival(0.1, "a", "a:sink:fallback")], {})
    assert (tenths[0], tenths[9]) == ((100.0, None), (None, None))
    assert p99_by_tenth({}, [], {}) == []
