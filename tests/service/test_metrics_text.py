"""/metrics text: the per-watcher series written by hand are what prometheus_client would write."""

from __future__ import annotations

import math

from prometheus_client import generate_latest

from sentinel_hooks.metrics import SUM_PER_PART, Metrics


def test_render_is_generate_latest_of_the_whole_registry() -> None:
    """Counts and lags of every size (Go's exponent form from 1e6 on), odd label values and the
    ordinary families: ``render`` writes byte for byte what ``generate_latest`` writes."""
    metrics = Metrics()
    values = [(0, 0.0), (7, 0.0042), (999_999, 12.5), (1_000_000, 1e-9), (123_456_789, 3e6)]
    values.append((2**60, math.inf))
    for i, (polls, lag) in enumerate(values):
        series = metrics.watcher_series(f"w{i}")
        series.polls, series.last_lag = polls, lag
    metrics.watcher_series('odd "id"\\with\nnewline').polls = 3
    metrics.poll_errors.labels("w1").inc()
    metrics.poll_lag.observe(0.2)
    metrics.watchers.labels("ok").set(6)
    text = metrics.render()
    assert generate_latest(metrics.registry) == text
    assert b'sentinel_polls_total{watcher="w4"} 1.23456789e+08\n' in text
    metrics.forget("w4")
    assert generate_latest(metrics.registry) == metrics.render()
    assert 1.0 == metrics.registry.get_sample_value("sentinel_poll_errors_total", {"watcher": "w1"})


def test_the_pieces_of_the_watcher_series_make_the_whole_text() -> None:
    """What /metrics writes between polls (``watcher_text_parts``, then ``render_families``) is
    ``render``'s text, whatever the size of a piece."""
    metrics = Metrics()
    for i in range(7):
        metrics.watcher_series(f"w{i}").polls = i
    metrics.fires.labels("w1", "match").inc()
    for per_part in (1, 3, 7, 100):
        pieces = "".join(metrics.watcher_text_parts(per_part)).encode() + metrics.render_families()
        assert metrics.render() == pieces


def test_only_names_the_watchers_given_and_the_aggregate_counts_all() -> None:
    """``watcher_text_parts(only=...)`` writes the two per-watcher families for those watchers
    (ids without series are skipped) and ``sentinel_polls_all_total`` over every watcher."""
    metrics = Metrics()
    for i in range(5):
        metrics.watcher_series(f"w{i}").polls = i + 1
    text = "".join(metrics.watcher_text_parts(2, only=["w3", "gone"]))
    assert 'sentinel_polls_total{watcher="w3"} 4.0\n' in text
    assert 1 == text.count("sentinel_polls_total{")
    assert 1 == text.count("sentinel_watcher_poll_lag_seconds{")
    assert text.endswith("sentinel_polls_all_total 15.0\n")


def test_the_aggregate_sums_every_watcher_in_pieces_past_one_sum_part() -> None:
    """More watchers than one piece sums (``SUM_PER_PART``): the aggregate still counts each of
    them once, and the sum is spread over pieces the event loop can yield between."""
    metrics = Metrics()
    n = 2 * SUM_PER_PART + 1
    for i in range(n):
        metrics.watcher_series(f"w{i}").polls = 1
    pieces = list(metrics.watcher_text_parts(2_000, only=["w0"]))
    assert 3 == pieces.count(""), "one empty piece per part of the sum"
    assert "".join(pieces).endswith(f"sentinel_polls_all_total {n}.0\n")
