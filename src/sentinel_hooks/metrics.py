"""Prometheus metrics of one service instance (its own registry: no global state).

Per-watcher series are counters and a last-lag gauge; the lag distribution is one
histogram without a watcher label, so 10,000 watchers do not create 10,000 x buckets series.

The two series every polled watcher has (``sentinel_polls_total`` and
``sentinel_watcher_poll_lag_seconds``) are two numbers in a ``WatcherSeries`` each, exported at
scrape time by one collector: a ``prometheus_client`` child per watcher and family (an object,
a lock and a dict entry each) cost about 1 KiB per watcher. The rarer per-watcher series
(errors, fires, reconnects) are ordinary labelled children, created on first use.

``Metrics.render`` writes those two families' text itself (one formatted line per watcher)
and the rest through ``prometheus_client``: the generic path builds a sample object per line
and took about 1 s of CPU per scrape at 100,000 watchers, holding the interpreter lock against
the event loop meanwhile. The text is the same as ``generate_latest(metrics.registry)``'s.

Above ``limits.perWatcherMetricsMax`` watchers (10,000 by default) the scrape names the watchers
whose two series it exports (``only``: those failing or firing), so a scrape's size follows
trouble, not the fleet: two lines per watcher are about 100 MB at a million. The aggregate
``sentinel_polls_all_total`` (every watcher's polls together) is always there.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Collection, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.utils import floatToGoString

# No ``*_created`` sample per counter child: with a series per watcher they doubled the size (and
# the rendering time) of every scrape, for a start time nobody graphs.
disable_created_metrics()  # type: ignore[no-untyped-call]

LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
POLLS_HELP = "Observations attempted, by watcher"
LAST_LAG_HELP = "Lag of the latest scheduled poll, by watcher"
POLLS_ALL_HELP = "Observations attempted, all watchers together"
SUM_PER_PART = 100_000  # watchers whose polls one piece of a scrape sums (about 2 ms)


class WatcherSeries:
    """One watcher's polls counter and last-lag gauge (written on the event loop only)."""

    __slots__ = ("last_lag", "polls")

    def __init__(self) -> None:
        self.polls = 0
        self.last_lag = 0.0


class WatcherSeriesCollector:
    """Exports every ``WatcherSeries`` as ``sentinel_polls_total`` and
    ``sentinel_watcher_poll_lag_seconds`` (with a ``watcher`` label), read when scraped.

    The scrape may run in a worker thread: it reads a copy of the dict (one C-level copy under
    the GIL), so watchers added or removed meanwhile do not disturb it.
    """

    def __init__(self, series: dict[str, WatcherSeries]) -> None:
        self._series = series

    def describe(self) -> list[Metric]:
        return list(self._families())

    def collect(self) -> Iterator[Metric]:
        polls, last_lag, polls_all = self._families()
        everything = self._series.copy()
        for watcher_id, series in everything.items():
            polls.add_metric([watcher_id], series.polls)
            last_lag.add_metric([watcher_id], series.last_lag)
        polls_all.add_metric([], sum(series.polls for series in everything.values()))
        yield polls
        yield last_lag
        yield polls_all

    @staticmethod
    def _families() -> tuple[CounterMetricFamily, GaugeMetricFamily, CounterMetricFamily]:
        return (
            CounterMetricFamily("sentinel_polls", POLLS_HELP, labels=["watcher"]),
            GaugeMetricFamily("sentinel_watcher_poll_lag_seconds", LAST_LAG_HELP, labels=["watcher"]),
            CounterMetricFamily("sentinel_polls_all", POLLS_ALL_HELP, labels=[]),
        )

    def text(self) -> str:
        """The three families in the Prometheus text format, as ``generate_latest`` writes them."""
        return "".join(self.text_parts())

    def text_parts(self, per_part: int = 2_000, only: Collection[str] | None = None) -> Iterator[str]:
        """``text`` in pieces of at most ``per_part`` lines (or ``SUM_PER_PART`` watchers summed),
        from one copy of the series taken when the iteration starts (a caller on the event loop
        may yield between pieces). With ``only``, the two per-watcher families name those watchers
        alone (the ones that have series); the aggregate counts every watcher.

        Nothing here makes an object per watcher beyond the copy: a list of a million (id, series)
        pairs took 0.4 s to build (the collector's passes over the new tuples), in one piece."""
        snapshot = self._series.copy()
        total = 0
        values = iter(snapshot.values())
        for _ in range(0, len(snapshot), SUM_PER_PART):
            total += sum(series.polls for series in itertools.islice(values, SUM_PER_PART))
            yield ""

        def chosen() -> Iterator[tuple[str, WatcherSeries]]:
            if only is None:
                return iter(snapshot.items())
            return ((watcher_id, snapshot[watcher_id]) for watcher_id in only if watcher_id in snapshot)

        yield f"# HELP sentinel_polls_total {POLLS_HELP}\n# TYPE sentinel_polls_total counter\n"
        pairs = chosen()
        while piece := list(itertools.islice(pairs, per_part)):
            yield "".join(
                [
                    f'sentinel_polls_total{{watcher="{_label_value(watcher_id)}"}} {_number(series.polls)}\n'
                    for watcher_id, series in piece
                ]
            )
        yield (
            f"# HELP sentinel_watcher_poll_lag_seconds {LAST_LAG_HELP}\n"
            "# TYPE sentinel_watcher_poll_lag_seconds gauge\n"
        )
        pairs = chosen()
        while piece := list(itertools.islice(pairs, per_part)):
            yield "".join(
                [
                    f'sentinel_watcher_poll_lag_seconds{{watcher="{_label_value(watcher_id)}"}} '
                    f"{_number(series.last_lag)}\n"
                    for watcher_id, series in piece
                ]
            )
        yield (
            f"# HELP sentinel_polls_all_total {POLLS_ALL_HELP}\n# TYPE sentinel_polls_all_total counter\n"
            f"sentinel_polls_all_total {_number(total)}\n"
        )


def _label_value(value: str) -> str:
    """A label value escaped as the text format wants (watcher ids never need it)."""
    if "\\" in value or "\n" in value or '"' in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def _number(value: float) -> str:
    """``floatToGoString``, without its function calls for the usual small numbers."""
    if value.__class__ is int and 0 <= value < 1_000_000:
        return f"{value}.0"
    if value.__class__ is float and 0.0 <= value < 1e6:
        return repr(value)
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


class Metrics:
    """The service's metric families."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)  # everything (what render() writes)
        self._watcher_series: dict[str, WatcherSeries] = {}
        self._watcher_collector = WatcherSeriesCollector(self._watcher_series)
        self.registry.register(self._watcher_collector)
        self._core = CollectorRegistry(auto_describe=True)  # all but the per-watcher series
        self._watcher_families(self._core)
        self._firing_families(self._core)
        self._session_families(self._core)
        self._delivery_families(self._core)
        self.registry.register(self._core)

    def _watcher_families(self, r: CollectorRegistry) -> None:
        """Polls and what they observe: errors, skips, drops, lag, reconnects, watchers by state."""
        self.poll_errors = Counter(
            "sentinel_poll_errors", "Failed observation attempts, by watcher", ["watcher"], registry=r
        )
        self.polls_skipped = Counter(
            "sentinel_polls_skipped",
            "Scheduled polls skipped: busy (the previous poll still ran) or no_slot (no request slot "
            "within one interval)",
            ["reason"],
            registry=r,
        )
        self.observations_dropped = Counter(
            "sentinel_observations_dropped",
            "Observations not acted on in cluster mode: lease_lost (another replica runs the watcher "
            "now) or lease_unknown (this replica could not confirm its lease in time)",
            ["reason"],
            registry=r,
        )
        for reason in ("lease_lost", "lease_unknown"):
            self.observations_dropped.labels(reason)  # exported as 0 from the start
        self.poll_lag = Histogram(
            "sentinel_poll_lag_seconds", "Actual minus scheduled poll start", buckets=LAG_BUCKETS, registry=r
        )
        self.watchers = Gauge("sentinel_watchers", "Watchers by status state", ["state"], registry=r)
        self.reconnects = Counter(
            "sentinel_subscription_reconnects", "Subscription reconnects, by watcher", ["watcher"], registry=r
        )

    def _firing_families(self, r: CollectorRegistry) -> None:
        """Fires (accepted, deduped, silenced, grouped), their contracts, and the fallbacks' lateness."""
        self.fires = Counter(
            "sentinel_fires", "Accepted fires, by watcher and trigger kind", ["watcher", "kind"], registry=r
        )
        self.deduped = Counter(
            "sentinel_fires_deduped", "Fires refused by the dedupe window", ["watcher"], registry=r
        )
        self.silenced = Counter(
            "sentinel_fires_silenced",
            "Fires muted by a silence or maintenance window (one per episode for edge triggers)",
            ["watcher"],
            registry=r,
        )
        self.grouped = Counter(
            "sentinel_fires_grouped",
            "Fires that joined an open group (SPEC §19): no contract, session or page of their own",
            ["watcher"],
            registry=r,
        )
        self.contracts = Counter(
            "sentinel_contracts",
            "Response contracts by state (created pending or deduped, then settled)",
            ["state"],
            registry=r,
        )
        self.fallback_lateness = Histogram(
            "sentinel_fallback_lateness_seconds",
            "Fallback settled minus its deadline",
            buckets=LAG_BUCKETS,
            registry=r,
        )

    def _session_families(self, r: CollectorRegistry) -> None:
        """Hook sessions, their tool calls, the judge's verdicts, model usage and budgets."""
        self.sessions = Counter("sentinel_sessions", "Hook sessions ended, by status", ["status"], registry=r)
        self.sessions_running = Gauge("sentinel_sessions_running", "Hook sessions running now", registry=r)
        self.tool_calls = Counter(
            "sentinel_tool_calls", "Tool calls by tool and decision", ["tool", "decision"], registry=r
        )
        self.judge_verdicts = Counter(
            "sentinel_judge_verdicts",
            "Judge rule answers, by rule and outcome (violation, clear, timeout, ...)",
            ["rule", "outcome"],
            registry=r,
        )
        self.model_tokens = Counter(
            "sentinel_model_tokens",
            "Model tokens used, by models: entry and direction (input, output; estimated when the API "
            "reported none)",
            ["model", "direction"],
            registry=r,
        )
        self.model_cost = Counter(
            "sentinel_model_cost_usd",
            "Model cost in US dollars, by models: entry (with pricing)",
            ["model"],
            registry=r,
        )
        self.budget_exhausted = Counter(
            "sentinel_budget_exhausted",
            "Model calls refused because a budget was spent, by scope (fire, watcher_day, service_day)",
            ["scope"],
            registry=r,
        )
        for scope in ("fire", "watcher_day", "service_day"):
            self.budget_exhausted.labels(scope)  # exported as 0 from the start

    def _delivery_families(self, r: CollectorRegistry) -> None:
        """Deliveries, escalation steps, the inbox, webhook pushes and retention."""
        self.deliveries = Counter(
            "sentinel_deliveries",
            "Delivery attempts by target and outcome",
            ["target", "outcome"],
            registry=r,
        )
        self.escalation_steps = Counter(
            "sentinel_escalation_steps_sent",
            "Escalation steps accepted by a target, by policy and policy step (repeats count as their step)",
            ["policy", "step"],
            registry=r,
        )
        self.inbox_open = Gauge(
            "sentinel_inbox_open_items", "Open inbox items, by kind", ["kind"], registry=r
        )
        self.webhook_pushes = Counter(
            "sentinel_webhook_pushes",
            "Pushes to /hooks/ingest, by webhook watcher (empty: the id is not one) and outcome "
            "(accepted, or the error code of the refusal)",
            ["watcher", "outcome"],
            registry=r,
        )
        self.pruned = Counter(
            "sentinel_pruned", "Records deleted by retention, by kind", ["kind"], registry=r
        )

    def watcher_series(self, watcher_id: str) -> WatcherSeries:
        """The watcher's polls counter and last-lag gauge (exported from now on, at 0)."""
        series = self._watcher_series.get(watcher_id)
        if series is None:
            series = self._watcher_series[watcher_id] = WatcherSeries()
        return series

    def forget(self, watcher_id: str) -> None:
        """Drop a removed watcher's series."""
        self._watcher_series.pop(watcher_id, None)
        for family in (
            self.poll_errors,
            self.deduped,
            self.silenced,
            self.grouped,
            self.reconnects,
        ):
            with contextlib.suppress(KeyError):
                family.remove(watcher_id)

    def render(self) -> bytes:
        """The registry in Prometheus text format (``generate_latest(self.registry)``, faster)."""
        return self._watcher_collector.text().encode() + self.render_families()

    def watcher_text_parts(self, per_part: int = 2_000, only: Collection[str] | None = None) -> Iterator[str]:
        """The first part of ``render``: the per-watcher series (of the watchers ``only`` names,
        when given) and their aggregate, in pieces (``text_parts``)."""
        return self._watcher_collector.text_parts(per_part, only)

    def render_families(self) -> bytes:
        """The rest of ``render``: every family but the per-watcher series."""
        return bytes(generate_latest(self._core))
