"""The million-watcher mode (issue 34 item 1): figures from launch, `sentinel validate`, targets.

The other modes measure from READY (config loaded, service started). At a million watchers the
start itself is what an operator waits for, so this mode also reads, from the instant before the
service process was launched:

* *first poll* — the endpoint's first arrival from the service;
* *due polled* — of the watchers whose first scheduled poll fell between the launch and 60 s
  before the window's end, how many were polled by then plus 60 s (the issue's "every watcher
  polled within its first interval plus 60 s", over the span the run covers; a run as long as
  one interval plus a minute covers every watcher);

and, in a separate process before the service, how long ``sentinel validate`` of the same project
takes (wall and CPU). The /metrics scrape at the end of the window is timed too.
"""

from __future__ import annotations

import asyncio
import math
import os
import resource
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from watchbench.results import TARGET_LAG_P99_MS, RunResult

MILLION_N = 1_000_000
MILLION_INTERVAL_S = 900.0
MILLION_POLL_SHARE = 0.99
MILLION_CPU_RATIO = 1.3
MILLION_RSS_KIB = 10 * 1024 * 1024  # 10 GiB
FIRST_POLL_S = 10.0
DUE_GRACE_S = 60.0
VALIDATE_S = 60.0
SCRAPE_S = 1.0


@dataclass(frozen=True)
class FromLaunch:
    """What the endpoint saw from the service's launch to the window's end."""

    first_poll_s: float
    due_polled: int
    due_total: int


def from_launch(
    launched: float,
    until: float,
    ids: Sequence[int],
    arrivals: Sequence[float],
    starts: Mapping[int, float],
) -> FromLaunch:
    """First poll after ``launched``, and how many watchers due in time were polled by their
    first scheduled run plus ``DUE_GRACE_S`` (see the module docstring)."""
    first_at: dict[int, float] = {}
    for index, at in zip(ids, arrivals, strict=True):
        if at < first_at.get(index, math.inf):
            first_at[index] = at
    due = [i for i, start in starts.items() if launched <= start <= until - DUE_GRACE_S]
    polled = sum(1 for i in due if first_at.get(i, math.inf) <= starts[i] + DUE_GRACE_S)
    first = min(arrivals, default=math.nan)
    return FromLaunch(first - launched, polled, len(due))


async def time_validate(config_file: Path) -> tuple[float, float]:
    """``sentinel validate`` of the project in a child process: (wall s, CPU s); raises when it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    command = [sys.executable, "-m", "sentinel_hooks", "validate", "-c", str(config_file)]
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ),
    )
    _, err = await proc.communicate()
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = err.decode(errors="replace")[-2000:]
        raise RuntimeError(f"sentinel validate failed ({proc.returncode}): {tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def targets(r: RunResult) -> dict[str, bool]:
    """Each target of issue 34 item 1, met or not."""
    return {
        "polls_ge_99pct_lag_p99_le_250ms": r.poll_share >= MILLION_POLL_SHARE
        and r.poll_errors == 0
        and r.lag_p99_ms <= TARGET_LAG_P99_MS,
        "cpu_le_1_3x_bare": r.cpu_ratio_vs_bare <= MILLION_CPU_RATIO,
        "rss_le_10gib": r.rss_end_kib <= MILLION_RSS_KIB,
        "first_poll_le_10s": r.first_poll_s <= FIRST_POLL_S,
        "due_polled_within_60s": r.due_total > 0 and r.due_polled == r.due_total,
        "validate_le_60s": r.validate_s <= VALIDATE_S,
        "metrics_le_1s": r.scrape_s <= SCRAPE_S,
    }


def verdict(results: Sequence[RunResult]) -> str:
    """The targets, judged on the largest N measured (they are set for a million)."""
    if not results:
        return "Nothing was measured."
    r = max(results, key=lambda each: each.n)
    met = targets(r)

    def word(ok: bool) -> str:
        return "**met**" if ok else "**NOT met**"

    scale = "" if r.n >= MILLION_N else f" (set for {MILLION_N:,}; this run measured {r.n:,})"
    gib = r.rss_end_kib / 1024 / 1024
    return "\n".join(
        [
            f"Targets of issue 34 item 1 at N = {r.n:,}, every {r.interval_s:g} s{scale}; other processes "
            f"kept {r.other_cores:.2f} cores busy:",
            f"- ≥ {100 * MILLION_POLL_SHARE:.0f} % of the ideal polls, lag p99 ≤ {TARGET_LAG_P99_MS:.0f} ms: "
            f"{word(met['polls_ge_99pct_lag_p99_le_250ms'])} ({r.polls:,} of {r.ideal_polls:,.0f} = "
            f"{100 * r.poll_share:.2f} %, {r.poll_errors:.0f} errors, "
            f"p99 {r.lag_p99_ms:,.1f} ms at the wire; "
            f"the bare loop {100 * r.bare_poll_share:.2f} %, p99 {r.bare_lag_p99_ms:,.1f} ms)",
            f"- CPU per poll ≤ {MILLION_CPU_RATIO:g}x the bare loop in the same run: "
            f"{word(met['cpu_le_1_3x_bare'])} ({r.cpu_ratio_vs_bare:.2f}x)",
            f"- RSS ≤ 10 GiB: {word(met['rss_le_10gib'])} ({gib:.2f} GiB)",
            f"- first poll ≤ {FIRST_POLL_S:g} s after launch: {word(met['first_poll_le_10s'])} "
            f"({r.first_poll_s:.1f} s; load_config {r.config_s:.1f} s, load + start {r.load_s:.1f} s)",
            f"- every watcher due polled within {DUE_GRACE_S:g} s of its first run: "
            f"{word(met['due_polled_within_60s'])} ({r.due_polled:,} of {r.due_total:,} due from launch to "
            f"60 s before the window's end)",
            f"- `sentinel validate` ≤ {VALIDATE_S:g} s: {word(met['validate_le_60s'])} "
            f"({r.validate_s:.1f} s wall, {r.validate_cpu_s:.1f} s CPU)",
            f"- /metrics within {SCRAPE_S:g} s: {word(met['metrics_le_1s'])} ({r.scrape_s:.2f} s)",
        ]
    )
