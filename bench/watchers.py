"""Benchmark: N http-poll watchers in a real Sentinel process versus a bare aiohttp loop.

    python bench/watchers.py --quick    # 1,000 watchers, under a minute; last line is JSON
    python bench/watchers.py            # 1,000 / 5,000 / 10,000 watchers, 60 s each; updates RESULTS.md
    python bench/watchers.py --huge     # 100,000 watchers every 60 s on SQLite (issue 18.4), under 10 min
    python bench/watchers.py --million  # 1,000,000 every 15 min (issue 34.1): from launch, validate, /metrics
    python bench/watchers.py --million --sizes 200000 --no-write   # the same figures at 200,000
    python bench/watchers.py --src DIR  # measure the sentinel_hooks in DIR (e.g. another checkout's src)
    python bench/watchers.py --rounds 5 # five service/bare pairs per N; the row is the median pair
    python bench/watchers.py --together --rounds 5  # both at once on one core, five windows

The endpoint (aiohttp on 127.0.0.1), the Sentinel service and the bare loop each run in their
own process, so CPU (from /proc/<pid>/stat) and RSS (VmRSS) belong to the measured process
only. All traffic stays on 127.0.0.1; every child exits when this process stops or dies.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

from watchbench.million import MILLION_INTERVAL_S, MILLION_N
from watchbench.orchestrate import Plan, run_all
from watchbench.report import section, write_results
from watchbench.results import HUGE_INTERVAL_S, HUGE_N, RunResult

T = TypeVar("T")
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
FULL_SIZES = [1_000, 5_000, 10_000]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1,000 watchers, short windows, no RESULTS.md")
    parser.add_argument("--sizes", type=int, nargs="+", help="watcher counts (default 1000 5000 10000)")
    parser.add_argument(
        "--window", type=float, help="seconds measured per N and per side (default 60; quick 18)"
    )
    parser.add_argument(
        "--settle", type=float, help="seconds between READY and the window (default 5; quick 2)"
    )
    parser.add_argument(
        "--store", default="sqlite:///state.db", help="the service's store URL (memory:// isolates its cost)"
    )
    parser.add_argument(
        "--noisy-retries", type=int, default=0, help="re-measure an N up to this often on a shared machine"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="service-then-bare window pairs per N; the row is the pair with the median CPU ratio",
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="run both sides at once on one core and measure --rounds windows of one launch",
    )
    parser.add_argument(
        "--scrape-every", type=float, help="scrape the service's /metrics this often (s) during the window"
    )
    parser.add_argument(
        "--huge",
        action="store_true",
        help=f"{HUGE_N:,} watchers every {HUGE_INTERVAL_S:g} s, 60 s windows; its own RESULTS.md section",
    )
    parser.add_argument(
        "--million",
        action="store_true",
        help=f"{MILLION_N:,} watchers every {MILLION_INTERVAL_S:g} s: first poll and due polls from launch, "
        "`sentinel validate`, the /metrics scrape; its own RESULTS.md section",
    )
    parser.add_argument(
        "--interval", type=float, help="each watcher's interval in s (default 10; huge 60; million 900)"
    )
    parser.add_argument("--src", type=Path, help="the src folder whose sentinel_hooks is measured")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    return parser.parse_args(argv)


async def stoppable(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work``; SIGINT or SIGTERM cancels it, so its cleanup (stopping children) runs."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, task.cancel)
    try:
        return await task
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def print_summary(result: RunResult) -> None:
    """One JSON line per N, printed as soon as that N is measured."""
    print(json.dumps(result.summary()), flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark: one JSON line per N on stdout (the last line is the last N)."""
    args = parse_args(argv)
    if args.src is not None:  # the children import sentinel_hooks from there first
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(args.src.resolve()), os.environ.get("PYTHONPATH")])
        )
    mode = "million" if args.million else "huge" if args.huge else ""
    default_sizes = [1_000] if args.quick else FULL_SIZES
    sizes = args.sizes or {"million": [MILLION_N], "huge": [HUGE_N]}.get(mode, default_sizes)
    window_s = args.window or (18.0 if args.quick else 120.0 if args.million else 60.0)
    settle_s = args.settle if args.settle is not None else (2.0 if args.quick else 10.0 if mode else 5.0)
    interval_s = args.interval or {"million": MILLION_INTERVAL_S, "huge": HUGE_INTERVAL_S}.get(mode, 10.0)
    plan = Plan(
        window_s=window_s,
        settle_s=settle_s,
        interval_ms=round(interval_s * 1000),
        store=args.store,
        noisy_retries=args.noisy_retries,
        scrape_every_s=args.scrape_every,
        rounds=max(1, args.rounds),
        together=args.together,
        from_launch=args.million,
        ready_timeout_s=1800.0 if args.million else 300.0,  # a million on a busy 2-core machine: > 15 min
    )
    with tempfile.TemporaryDirectory(prefix="sentinel-bench-") as workdir:
        try:
            results = asyncio.run(stoppable(run_all(sizes, plan, Path(workdir), print_summary)))
        except (KeyboardInterrupt, asyncio.CancelledError):
            print("bench: interrupted; every benchmark process was stopped", file=sys.stderr)
            return 130
    # the summaries are on stdout already; RESULTS.md gets the table
    if not (args.quick or args.no_write):
        command = "python bench/watchers.py" + (f" --{mode}" if mode else "")
        command += f" --sizes {' '.join(map(str, sizes))}" if args.sizes else ""
        command += f" --interval {interval_s:g}" if args.interval else ""
        command += f" --noisy-retries {args.noisy_retries}" if args.noisy_retries else ""
        command += f" --rounds {args.rounds}" if args.rounds > 1 else ""
        command += " --together" if args.together else ""
        generated = section(results, window_s=window_s, command=command, mode=mode)
        write_results(RESULTS, generated, mode=mode)
        print(f"bench: wrote {RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
