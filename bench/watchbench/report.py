"""``bench/RESULTS.md``: the measured table, the machine, the date and how to reproduce.

Only the part between the ``watchers-results`` markers is rewritten, so notes written by
hand around it (analysis, proposed fixes) and other benchmarks' sections survive a re-run.
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from watchbench.million import verdict as million_verdict
from watchbench.results import (
    HUGE_CPU_RATIO,
    HUGE_N,
    HUGE_POLL_SHARE,
    HUGE_RSS_KIB,
    OTHER_LOAD_WARNING,
    TARGET_CPU_RATIO,
    TARGET_LAG_P99_MS,
    TARGET_N,
    TARGET_RSS_PER_WATCHER_KIB,
    RunResult,
)

BEGIN = "<!-- watchers-results:begin (written by bench/watchers.py; edit outside these markers) -->"
END = "<!-- watchers-results:end -->"
HUGE_BEGIN = (
    "<!-- watchers-100k-results:begin (written by bench/watchers.py --huge; edit outside these markers) -->"
)
HUGE_END = "<!-- watchers-100k-results:end -->"
MILLION_BEGIN = (
    "<!-- watchers-1m-results:begin (written by bench/watchers.py --million; edit outside these markers) -->"
)
MILLION_END = "<!-- watchers-1m-results:end -->"
MARKERS = {"": (BEGIN, END), "huge": (HUGE_BEGIN, HUGE_END), "million": (MILLION_BEGIN, MILLION_END)}

TITLE = "# Benchmarks\n\n"
INTRO = """\
## Watchers (`bench/watchers.py`)

N http-poll watchers (10 s interval unless said, one condition that never matches) in a real Sentinel
`Service` against a local aiohttp endpoint, and the same requests from a bare aiohttp loop as
the baseline. The method is in the module docstrings of `bench/watchbench/`.

"""


LEGEND = """\
Columns: *keeps up* = at least 95 % of the scheduled polls reached the endpoint and no poll
failed. *CPU s per 1k polls* = CPU seconds of the measured process (all threads, /proc) over
the window divided by the requests the endpoint received from it, times 1,000; when the
service does not keep up this is per *completed* poll and says how much work failures cost,
not what a poll costs. *lag (wire)* = request arrival at the endpoint minus the watcher's
scheduled start (exact, but a lag beyond one interval folds back modulo the interval, so it is only
meaningful when the service keeps up). *service histogram* = `sentinel_poll_lag_seconds`
from /metrics over the window, interpolated within its buckets. *RSS per watcher* = (VmRSS at
the end of the window - VmRSS after a warm-up service with no watchers) / N. *load s* =
`load_config` + `Service.start` for the N watchers. *errors* = `sentinel_poll_errors_total`
over the window. *other load* = cores that processes outside the benchmark kept busy during
the noisier of the two windows (/proc/stat); above 0.1 the row was measured on a shared machine
and is not clean."""


def _f(value: float, digits: int = 1) -> str:
    return "n/a" if math.isnan(value) else f"{value:,.{digits}f}"


def source_version() -> str:
    """The commit measured, and whether src/ had uncommitted changes (read-only git calls)."""
    repo = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "src"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "source version unknown"
    return f"commit {commit}" + (" with uncommitted changes in src/" if dirty else "")


def machine() -> str:
    """One line describing where the numbers come from."""
    cpu = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = [
            line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if "model name" in line
        ]
        cpu = names[0] if names else cpu
    return (
        f"{os.cpu_count()} CPU ({cpu}), Linux {platform.release()}, Python {sys.version.split()[0]}, "
        f"aiohttp {version('aiohttp')}, APScheduler {version('apscheduler')}, "
        f"sentinel-hooks {version('sentinel-hooks')} ({source_version()})"
    )


def table(results: Sequence[RunResult]) -> str:
    """The measured numbers, one row per N."""
    rows = [
        "| N | keeps up | polls/s (expected) | CPU s per 1k polls | bare CPU s per 1k | CPU ratio vs bare "
        "| lag p50 / p99 ms (wire) | service histogram p50 / p99 ms | bare lag p50 / p99 ms "
        "| RSS KiB per watcher | bare RSS KiB per watcher | load s | errors / fires | other load (cores) |",
        "|---:|:-:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rows.append(
            f"| {r.n:,} | {'yes' if r.keeps_up else '**no**'} "
            f"| {_f(r.polls_per_s)} ({_f(r.expected_polls_per_s, 0)}) "
            f"| {_f(r.cpu_per_1k_polls_s, 3)} | {_f(r.bare_cpu_per_1k_polls_s, 3)} "
            f"| {_f(r.cpu_ratio_vs_bare, 2)} | {_f(r.lag_p50_ms)} / {_f(r.lag_p99_ms)} "
            f"| {_f(r.svc_lag_p50_ms)} / {_f(r.svc_lag_p99_ms)} "
            f"| {_f(r.bare_lag_p50_ms)} / {_f(r.bare_lag_p99_ms)} "
            f"| {_f(r.rss_per_watcher_kib)} | {_f(r.bare_rss_per_watcher_kib)} | {_f(r.load_s)} "
            f"| {r.poll_errors:.0f} / {r.fires:.0f} | {_f(r.other_cores, 2)} |"
        )
    rounds = [
        f"N = {r.n:,}: " + ", ".join(_f(ratio, 2) for ratio in r.round_cpu_ratios)
        for r in results
        if len(r.round_cpu_ratios) > 1
    ]
    per_round = (
        "\n\nCPU ratio of each round (a service window, then a bare window); each row is the round "
        "with the median ratio: " + "; ".join(rounds) + "."
        if rounds
        else ""
    )
    return "\n".join(rows) + per_round + "\n\n" + LEGEND


def verdict(results: Sequence[RunResult]) -> str:
    """Whether the targets hold at N = 10,000 (or say that N was not measured)."""
    at_target = [r for r in results if r.n == TARGET_N]
    if not at_target:
        return f"Targets are judged at N = {TARGET_N:,}, which this run did not measure."
    r = at_target[0]
    met = r.targets()

    def word(ok: bool) -> str:
        return "**met**" if ok else "**NOT met**"

    histogram = (
        "no poll started during the window"
        if math.isnan(r.svc_lag_share_le_250ms)
        else f"service histogram {_f(r.svc_lag_p99_ms)} ms, "
        f"{_f(100 * r.svc_lag_share_le_250ms)} % of polls in buckets ≤ 250 ms"
    )
    noisy = (
        f" (measured while other processes kept {r.other_cores:.2f} cores busy: not a clean run)"
        if r.other_cores > OTHER_LOAD_WARNING
        else ""
    )
    return "\n".join(
        [
            f"Targets at N = {TARGET_N:,}{noisy}:",
            f"- p99 poll lag < {TARGET_LAG_P99_MS:.0f} ms: {word(met['lag_p99_lt_250ms'])} "
            f"({_f(r.lag_p99_ms)} ms at the wire; {histogram})",
            f"- CPU per poll ≤ {TARGET_CPU_RATIO:.0f}x the bare loop: {word(met['cpu_le_2x_bare'])} "
            f"({_f(r.cpu_ratio_vs_bare, 2)}x)",
            f"- RSS < {TARGET_RSS_PER_WATCHER_KIB:.0f} KiB per watcher: "
            f"{word(met['rss_le_15kib_per_watcher'])} ({_f(r.rss_per_watcher_kib)} KiB)",
        ]
    )


def huge_verdict(results: Sequence[RunResult]) -> str:
    """Whether the 100,000-watcher targets hold (issue 18.4)."""
    big = [r for r in results if r.n >= HUGE_N]
    if not big:
        return f"The 100,000-watcher targets are judged at N ≥ {HUGE_N:,}, which this run did not measure."
    r = big[0]
    met = r.huge_targets()

    def word(ok: bool) -> str:
        return "**met**" if ok else "**NOT met**"

    noisy = (
        f" (other processes kept {r.other_cores:.2f} cores busy: not a clean run)"
        if (r.other_cores > OTHER_LOAD_WARNING)
        else ""
    )
    return "\n".join(
        [
            f"Targets at N = {r.n:,}, every {r.interval_s:g} s{noisy}:",
            f"- ≥ {100 * HUGE_POLL_SHARE:.0f} % of the ideal polls, none failed: "
            f"{word(met['polls_ge_99pct_of_ideal'])} ({r.polls:,} of {r.ideal_polls:,.0f} = "
            f"{_f(100 * r.poll_share, 2)} %, {r.poll_errors:.0f} errors; the bare loop "
            f"{_f(100 * r.bare_poll_share, 2)} %)",
            f"- CPU per poll ≤ {HUGE_CPU_RATIO:g}x the bare loop in the same run: "
            f"{word(met['cpu_le_1_5x_bare'])} ({_f(r.cpu_ratio_vs_bare, 2)}x)",
            f"- RSS ≤ {HUGE_RSS_KIB / 1024 / 1024:g} GB: {word(met['rss_le_2_5gb'])} "
            f"({_f(r.rss_end_kib / 1024 / 1024, 2)} GB; {_f(r.rss_per_watcher_kib)} KiB per watcher)",
            f"- p99 poll lag ≤ {TARGET_LAG_P99_MS:.0f} ms: {word(met['lag_p99_le_250ms'])} "
            f"({_f(r.lag_p99_ms)} ms at the wire; service histogram {_f(r.svc_lag_p99_ms)} ms)",
            f"- the endpoint kept {_f(r.endpoint_cores, 2)} cores busy in the service's window and "
            f"{_f(r.bare_endpoint_cores, 2)} in the bare loop's (of its one pinned core)",
        ]
    )


def section(results: Sequence[RunResult], *, window_s: float, command: str, mode: str = "") -> str:
    """The generated block of ``mode`` ("", "huge", "million"): date, machine, table, verdict,
    reproduction."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    begin, end = MARKERS[mode]
    judged = {"": verdict, "huge": huge_verdict, "million": million_verdict}[mode](results)
    return "\n\n".join(
        [
            begin,
            f"Measured {now} on {machine()}; window {window_s:.0f} s per N and per side; "
            f"load average at the end {Path('/proc/loadavg').read_text().split(' ', 3)[:3]}.",
            table(results),
            judged,
            f"Reproduce: `{command}` (the endpoint is pinned to one core, the measured process to another).",
            end,
        ]
    )


def write_results(path: Path, generated: str, *, mode: str = "") -> None:
    """Replace this benchmark's block of ``mode`` in ``path``; append it (other benchmarks share
    the file) or create the file when there is none yet."""
    begin, end = MARKERS[mode]
    if not path.exists():
        path.write_text(TITLE + INTRO + generated + "\n")
        return
    text = path.read_text()
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        path.write_text(before + generated + rest.split(end, 1)[1])
    elif mode and END in text:  # right after the watchers table
        before, rest = text.split(END, 1)
        path.write_text(before + END + "\n\n" + generated + rest)
    else:
        path.write_text(text.rstrip("\n") + "\n\n" + INTRO + generated + "\n")
