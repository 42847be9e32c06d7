"""What the endpoint's poll records say: double polls, and when a rebalance settled.

A *double poll* is tests/cluster/chaos.py's overlapping poll: while replica A owns a watcher its
polls come an interval apart; a poll by B strictly between two consecutive polls of A that are
at most 1.5 intervals apart means both polled the watcher in one interval. A hand-off (A's last
poll, then B's) is not one.
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections import defaultdict
from dataclasses import dataclass

Polls = dict[int, list[tuple[float, int]]]
"""watcher number → [(arrival time, replica number)], in time order."""


def by_watcher(
    at: array[float], watcher: array[int], replica: array[int], since: float, until: float
) -> Polls:
    """The polls that arrived in [since, until), grouped by watcher."""
    found: Polls = defaultdict(list)
    for when, number, who in zip(at, watcher, replica, strict=True):
        if since <= when < until:
            found[number].append((when, who))
    for polls in found.values():
        polls.sort()
    return found


def double_polls(polls: Polls, interval_s: float) -> list[tuple[int, int, int, float]]:
    """(watcher, A, B, seconds after A's poll) for every poll by B inside an interval of A."""
    doubles = []
    for number, seq in polls.items():
        times: dict[int, list[float]] = defaultdict(list)
        for when, who in seq:
            times[who].append(when)
        if len(times) < 2:
            continue
        for owner, mine in times.items():
            for first, second in itertools.pairwise(mine):
                if second - first > 1.5 * interval_s:
                    continue
                for other, theirs in times.items():
                    if other == owner:
                        continue
                    i = bisect.bisect_right(theirs, first)
                    if i < len(theirs) and theirs[i] < second:
                        doubles.append((number, owner, other, round(theirs[i] - first, 3)))
    return doubles


@dataclass
class Settled:
    """How a rebalance that began at ``t0`` looked at the endpoint."""

    settle_s: float | None  # last watcher polled by its final replica alone; None: not by the end
    moved: int  # watchers whose replica changed
    unsettled: int  # watchers not polled in the last 1.5 intervals, or still polled by two
    max_gap_s: float  # longest time between two polls of one watcher after t0
    doubles: int


def settled(polls: Polls, watchers: int, t0: float, t_end: float, interval_s: float) -> Settled:
    """From the polls of [t0 - 1.5 intervals, t_end): for each watcher, the first poll of the run of
    polls by one replica that lasts to the end; the latest of those, after ``t0``, is when every
    watcher was polled by exactly one replica again."""
    latest, moved, unsettled, max_gap = 0.0, 0, 0, 0.0
    for number in range(watchers):
        seq = polls.get(number, [])
        if not seq or seq[-1][0] < t_end - 1.5 * interval_s:
            unsettled += 1
            continue
        final = seq[-1][1]
        k = len(seq) - 1
        while k > 0 and seq[k - 1][1] == final:
            k -= 1
        if k > 0:
            moved += 1
        latest = max(latest, seq[k][0] - t0)
        after = [when for when, _ in seq if when >= t0]
        gaps = [b - a for a, b in itertools.pairwise([t0, *after])]
        max_gap = max([max_gap, *gaps])
    return Settled(
        settle_s=None if unsettled else round(latest, 2),
        moved=moved,
        unsettled=unsettled,
        max_gap_s=round(max_gap, 2),
        doubles=len(double_polls(polls, interval_s)),
    )
