"""Pure numbers: percentiles, poll lag from arrivals and schedules, and /metrics parsing.

Lag at the wire: watcher ``i`` is scheduled at ``start_i + k * interval``; a request arriving
at ``a`` belongs to the latest slot not after it, so its lag is ``(a - start_i) mod interval``
(exact while lags stay below one interval — far beyond any target here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values`` with linear interpolation; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def wire_lags(
    ids: Sequence[int], arrivals: Sequence[float], starts: Mapping[int, float], interval_s: float
) -> list[float]:
    """Arrival minus scheduled time of each request whose watcher has a known schedule."""
    return [
        (at - starts[index]) % interval_s for index, at in zip(ids, arrivals, strict=True) if index in starts
    ]


@dataclass(frozen=True)
class Scrape:
    """The counters of one /metrics scrape this benchmark reads."""

    polls: float = 0.0
    errors: float = 0.0
    fires: float = 0.0
    dropped: float = math.nan  # sentinel_observations_dropped_total (NaN: a service without it)
    lag_buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count

    def since(self, earlier: Scrape) -> Scrape:
        """What happened between ``earlier`` and this scrape."""
        return Scrape(
            polls=self.polls - earlier.polls,
            errors=self.errors - earlier.errors,
            fires=self.fires - earlier.fires,
            dropped=self.dropped - earlier.dropped,
            lag_buckets={le: n - earlier.lag_buckets.get(le, 0.0) for le, n in self.lag_buckets.items()},
        )


def parse_metrics(text: str) -> Scrape:
    """Sum the per-watcher poll/error/fire counters and the dropped observations, and read the
    lag histogram's buckets. The polls are ``sentinel_polls_all_total`` where the service exports
    it (above ``limits.perWatcherMetricsMax`` watchers the per-watcher lines are only those in
    trouble), else the per-watcher lines summed."""
    totals = {"sentinel_polls_total": 0.0, "sentinel_poll_errors_total": 0.0, "sentinel_fires_total": 0.0}
    polls_all = math.nan
    dropped = math.nan
    buckets: dict[float, float] = {}
    text = _summed_polls(text, totals)
    for family in text_string_to_metric_families(text):
        if family.name == "sentinel_observations_dropped":
            dropped = sum(s.value for s in family.samples if s.name.endswith("_total"))
        for sample in family.samples:
            if sample.name in totals:
                totals[sample.name] += sample.value
            elif sample.name == "sentinel_polls_all_total":
                polls_all = sample.value
            elif sample.name == "sentinel_poll_lag_seconds_bucket":
                buckets[float(sample.labels["le"])] = sample.value
    return Scrape(
        polls=totals["sentinel_polls_total"] if math.isnan(polls_all) else polls_all,
        errors=totals["sentinel_poll_errors_total"],
        fires=totals["sentinel_fires_total"],
        dropped=dropped,
        lag_buckets=buckets,
    )


def _summed_polls(text: str, totals: dict[str, float]) -> str:
    """Add the per-watcher ``sentinel_polls_total`` lines to ``totals`` and return the text
    without them and without the per-watcher last-lag gauge: two lines per watcher go through
    plain string splits, not prometheus-client's parser (minutes for a million watchers)."""
    kept = []
    for line in text.splitlines():
        if line.startswith("sentinel_polls_total{"):
            totals["sentinel_polls_total"] += float(line.rsplit(" ", 1)[1])
        elif not line.startswith("sentinel_watcher_poll_lag_seconds{"):
            kept.append(line)
    return "\n".join(kept) + "\n"


def log_problems(text: str) -> list[str]:
    """The WARNING/ERROR/CRITICAL lines of a child's log (``logging.basicConfig``'s format)."""
    return [line for line in text.splitlines() if line.startswith(("WARNING:", "ERROR:", "CRITICAL:"))]


def histogram_quantile(buckets: Mapping[float, float], q: float) -> float:
    """Prometheus-style quantile of cumulative ``buckets`` (linear within a bucket); NaN when empty.

    Lands on the upper bound of the last finite bucket when the quantile is in ``+Inf``.
    """
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return math.nan
    wanted = q * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= wanted:
            if math.isinf(le):
                return lower
            inside = count - below
            return le if inside <= 0 else lower + (le - lower) * (wanted - below) / inside
        lower, below = le, count
    return lower


def share_at_most(buckets: Mapping[float, float], le: float) -> float:
    """The fraction of observations in buckets up to ``le`` (which must be a bucket bound)."""
    total = buckets.get(math.inf, 0.0)
    return buckets.get(le, math.nan) / total if total else math.nan
