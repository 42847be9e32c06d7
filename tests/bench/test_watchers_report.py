"""bench/watchers.py's report: the median round of several, and the RESULTS.md section it writes."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from watchbench.million import from_launch  # noqa: E402  (after the path)
from watchbench.report import section  # noqa: E402
from watchbench.results import RunResult, median_round  # noqa: E402
from watchbench.stats import parse_metrics  # noqa: E402


def run(n: int = 10_000, cpu: float = 0.30, bare_cpu: float = 0.20) -> RunResult:
    """One round at ``n`` watchers whose CPU per 1k polls is ``cpu`` against ``bare_cpu``."""
    return RunResult(
        n=n,
        window_s=60.0,
        interval_s=10.0,
        config_s=0.4,
        load_s=0.9,
        other_cores=0.01,
        polls=60_000,
        polls_per_s=1_000.0,
        sentinel_polls=60_000.0,
        poll_errors=0.0,
        fires=0.0,
        dropped=0.0,
        scrapes=11,
        log_problems=0,
        cpu_s=cpu * 60,
        cpu_per_1k_polls_s=cpu,
        lag_p50_ms=1.0,
        lag_p99_ms=4.0,
        lag_max_ms=9.0,
        svc_lag_p50_ms=1.0,
        svc_lag_p99_ms=5.0,
        svc_lag_share_le_250ms=1.0,
        rss_before_kib=60_000,
        rss_end_kib=160_000,
        rss_per_watcher_kib=10.0,
        bare_polls=60_000,
        bare_polls_per_s=1_000.0,
        bare_cpu_s=bare_cpu * 60,
        bare_cpu_per_1k_polls_s=bare_cpu,
        bare_lag_p50_ms=1.0,
        bare_lag_p99_ms=3.0,
        bare_rss_per_watcher_kib=8.0,
    )


def test_the_median_round_is_a_real_round_with_every_ratio_attached() -> None:
    rounds = [run(bare_cpu=0.20), run(bare_cpu=0.15), run(bare_cpu=0.24)]  # 1.5, 2.0, 1.25

    middle = median_round(rounds)

    assert dataclasses.replace(rounds[0], round_cpu_ratios=middle.round_cpu_ratios) == middle
    assert pytest.approx([1.5, 2.0, 1.25]) == list(middle.round_cpu_ratios)
    assert [1.5, 2.0, 1.25] == json.loads(json.dumps(middle.summary()))["round_cpu_ratios"]


def test_an_even_count_takes_the_lower_middle_and_a_missing_ratio_sorts_last() -> None:
    no_bare = run(bare_cpu=0.0)  # the bare loop made no poll: no ratio
    rounds = [run(bare_cpu=0.10), no_bare, run(bare_cpu=0.30), run(bare_cpu=0.20)]  # 3.0, nan, 1.0, 1.5

    assert pytest.approx(1.5) == median_round(rounds).cpu_ratio_vs_bare


def test_the_section_judges_every_target_at_ten_thousand_and_lists_the_rounds() -> None:
    middle = median_round([run(bare_cpu=0.20), run(bare_cpu=0.25)])

    text = section([middle], window_s=60, command="python bench/watchers.py --rounds 2")

    assert "CPU per poll ≤ 2x the bare loop: **met** (1.20x)" in text
    assert "RSS < 15 KiB per watcher: **met** (10.0 KiB)" in text
    assert "N = 10,000: 1.50, 1.20." in text


def test_from_launch_counts_the_watchers_due_in_the_span_and_polled_within_a_minute() -> None:
    starts = {0: 110.0, 1: 120.0, 2: 130.0, 3: 250.0, 4: 90.0}  # 3: due too late to judge; 4: before launch
    ids, arrivals = [4, 0, 1, 2], [101.0, 111.0, 190.0, 150.0]  # 1 polled 70 s late; 3 not yet

    seen = from_launch(100.0, 240.0, ids, arrivals, starts)

    assert (seen.first_poll_s, seen.due_polled, seen.due_total) == (1.0, 2, 3)


def test_the_million_section_judges_every_target_of_issue_34() -> None:
    result = dataclasses.replace(
        run(n=200_000),
        interval_s=900.0,
        polls=26_666,
        first_poll_s=74.6,
        due_polled=10,
        due_total=10,
        validate_s=54.5,
        validate_cpu_s=28.4,
        scrape_s=3.2,
    )

    text = section([result], window_s=120, command="python bench/watchers.py --million", mode="million")

    assert "watchers-1m-results:begin" in text
    assert "this run measured 200,000" in text
    assert "first poll ≤ 10 s after launch: **NOT met** (74.6 s" in text
    assert "polled within 60 s of its first run: **met** (10 of 10" in text
    assert "`sentinel validate` ≤ 60 s: **met** (54.5 s wall, 28.4 s CPU)" in text
    assert "/metrics within 1 s: **NOT met** (3.20 s)" in text
    assert json.loads(json.dumps(result.summary()))["targets_met"]["validate_le_60s"] is True


def test_per_watcher_poll_lines_are_summed_without_the_parser() -> None:
    text = (
        'sentinel_polls_total{watcher="a"} 3.0\n'
        'sentinel_polls_total{watcher="b"} 4.0\n'
        'sentinel_watcher_poll_lag_seconds{watcher="a"} 0.01\n'
        "# TYPE sentinel_poll_errors counter\n"
        'sentinel_poll_errors_total{watcher="a"} 1.0\n'
    )

    scrape = parse_metrics(text)

    assert (scrape.polls, scrape.errors) == (7.0, 1.0)


def test_the_aggregate_poll_count_is_read_where_exported() -> None:
    """Above the per-watcher limit only watchers in trouble have lines: the aggregate is the count."""
    text = (
        'sentinel_polls_total{watcher="a"} 3.0\n'
        "# TYPE sentinel_polls_all counter\n"
        "sentinel_polls_all_total 12.0\n"
    )

    assert 12.0 == parse_metrics(text).polls


@pytest.mark.slow
def test_together_mode_measures_both_sides_over_the_same_windows() -> None:
    """Both processes run at once; each side's polls are counted apart (``/w`` and ``/b``)."""
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "watchers.py"),
            *("--sizes", "200", "--interval", "1", "--window", "3", "--settle", "1"),
            *("--rounds", "2", "--together", "--no-write"),
        ],
        capture_output=True,
        text=True,
        timeout=50,
        env={**os.environ, "PYTHONPATH": str(BENCH.parent / "src")},
        check=False,
    )
    assert 0 == done.returncode, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert 2 == len(summary["round_cpu_ratios"])
    assert summary["polls"] >= 500  # 200 per second on each side, 3 s
    assert summary["bare_polls"] >= 500
    assert 0 == summary["poll_errors"]
    assert 0 == summary["log_problems"]
