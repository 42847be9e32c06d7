"""What the endpoint's poll records say: double polls, and when a rebalance settled.

A *double poll* is tests/cluster/chaos.py's overlapping poll: while replica A owns a watcher its
polls come an interval apart; a poll by B strictly between two consecutive polls of A that are
at most 1.5 intervals apart means both polled the watcher in one interval. A hand-off (A's last
poll, then B's) is not one.
"""

from __future__ import annotations

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
    """(watcher, A, B, seconds after A's poll) for every poll by B inside an interval of A.

    One pass per watcher in time order, keeping each replica's latest poll: when A polls again
    within 1.5 intervals of its previous poll, another replica whose latest poll lies between
    the two polled inside A's interval."""
    doubles = []
    for number, seq in polls.items():
        latest: dict[int, float] = {}
        for when, who in seq:
            before = latest.get(who)
            if before is not None and when - before <= 1.5 * interval_s:
                doubles += [
                    (number, who, other, round(theirs - before, 3))
                    for other, theirs in latest.items()
                    if other != who and before < theirs < when
                ]
            latest[who] = when
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
