"""From the sink's records and the contract map to the benchmark's numbers. Pure.

* lateness: for each contract, its first arrival at the sink minus its deadline; p50, p99
  and max by the nearest-rank method over every contract that got a fallback (late ones too);
* lost: contracts with no arrival at or before ``deadline + LOST_AFTER_S``;
* duplicates: arrivals beyond the first of the same Idempotency-Key;
* deliveries/s: distinct fallbacks over the span from the first to the last arrival;
* stray: arrivals for no contract of the run (or with a malformed body or key);
* settle lateness: when the relay handed each fallback to the outbox (the contract's stored
  ``settledAt``, read back after the run) minus the deadline, so a run shows whether time was
  lost in the relay or after it, in the outbox and the sending.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LOST_AFTER_S = 5.0


@dataclass(frozen=True)
class Arrival:
    """One request the sink received."""

    at: float
    callback_id: str
    key: str


@dataclass(frozen=True)
class Numbers:
    """What a run measured (times in ms unless named otherwise)."""

    contracts: int
    delivered: int
    lateness_p50_ms: float
    lateness_p99_ms: float
    lateness_max_ms: float
    over_1s: int
    deliveries_per_s: float
    lost: int
    duplicates: int
    stray: int
    first_arrival: float
    last_arrival: float


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of values sorted ascending (0.0 when there are none)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def analyse(deadlines: Mapping[str, float], arrivals: Iterable[Arrival], *, target: str) -> Numbers:
    """The numbers for contracts ``deadlines`` (callbackId → epoch s) and what reached the sink."""
    first: dict[str, float] = {}
    keys: set[str] = set()
    duplicates = stray = 0
    for arrival in sorted(arrivals, key=lambda a: a.at):
        if arrival.key in keys:
            duplicates += 1
            continue
        keys.add(arrival.key)
        expected_key = f"{arrival.callback_id}:{target}:fallback"
        if arrival.callback_id not in deadlines or arrival.key != expected_key:
            stray += 1
            continue
        first.setdefault(arrival.callback_id, arrival.at)
    lateness = sorted(1000 * (at - deadlines[cid]) for cid, at in first.items())
    lost = sum(1 for cid, deadline in deadlines.items() if first.get(cid, math.inf) > deadline + LOST_AFTER_S)
    times = sorted(first.values())
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return Numbers(
        contracts=len(deadlines),
        delivered=len(first),
        lateness_p50_ms=round(percentile(lateness, 0.50), 1),
        lateness_p99_ms=round(percentile(lateness, 0.99), 1),
        lateness_max_ms=round(lateness[-1] if lateness else 0.0, 1),
        over_1s=sum(1 for value in lateness if value > 1000),
        deliveries_per_s=round(len(times) / span, 1) if span > 0 else 0.0,
        lost=lost,
        duplicates=duplicates,
        stray=stray,
        first_arrival=times[0] if times else 0.0,
        last_arrival=times[-1] if times else 0.0,
    )


def settle_times(records: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """callbackId → epoch seconds at which the relay settled its contract with a fallback.

    Reads the service's ``{callbackId, settledAt}`` records; malformed ones are skipped.
    """
    found: dict[str, float] = {}
    for record in records:
        try:
            found.setdefault(str(record["callbackId"]), float(record["settledAt"]))
        except (KeyError, TypeError, ValueError):
            continue
    return found


def settle_lateness_ms(
    deadlines: Mapping[str, float], settled: Mapping[str, float]
) -> tuple[float, float] | None:
    """(p50, p99) of settle time minus deadline, in ms; None when no settle time is known."""
    values = sorted(1000 * (at - deadlines[cid]) for cid, at in settled.items() if cid in deadlines)
    if not values:
        return None
    return round(percentile(values, 0.50), 1), round(percentile(values, 0.99), 1)


def p99_by_tenth(
    deadlines: Mapping[str, float], arrivals: Iterable[Arrival], settled: Mapping[str, float]
) -> list[tuple[float | None, float | None]]:
    """The run cut into ten equal spans of deadlines: per span, (p99 lateness at the sink, p99
    settle lateness) in ms (None where nothing arrived or settled). Lateness that climbs from
    one tenth to the next is a backlog growing with run length; settle lateness that stays flat
    beside it puts the backlog after the relay (outbox, sending)."""
    if not deadlines:
        return []
    first: dict[str, float] = {}
    for arrival in arrivals:
        if arrival.callback_id in deadlines:
            first[arrival.callback_id] = min(arrival.at, first.get(arrival.callback_id, math.inf))
    start, end = min(deadlines.values()), max(deadlines.values())
    width = max((end - start) / 10, 1e-9)
    late: list[list[float]] = [[] for _ in range(10)]
    settle: list[list[float]] = [[] for _ in range(10)]
    for cid, deadline in deadlines.items():
        tenth = min(9, int((deadline - start) / width))
        if cid in first:
            late[tenth].append(1000 * (first[cid] - deadline))
        if cid in settled:
            settle[tenth].append(1000 * (settled[cid] - deadline))

    def p99(values: list[float]) -> float | None:
        return round(percentile(sorted(values), 0.99), 1) if values else None

    return [(p99(a), p99(s)) for a, s in zip(late, settle, strict=True)]
