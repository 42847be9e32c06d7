"""Relay benchmark: N contracts nobody answers, deadlines spread over 10 s, fallbacks to a webhook sink.

Measures how late each fallback reaches a local webhook sink after its contract's deadline
(p50/p99/max; targets p99 < 250 ms, max < 1 s), deliveries/s, the CPU of the Sentinel
process, ``lost`` (no fallback by deadline + 5 s) and ``duplicates`` (a repeated
Idempotency-Key). Three processes: this one (orchestrates, measures), the sink, and a
Sentinel ``Service`` that creates the contracts through its intake (see ``relaybench``).

    python bench/relay.py --quick [--store redis]   1,000 contracts, one store
    python bench/relay.py                           10,000 on SQLite and on Redis,
                                                    then bench/RESULTS.md's Relay section
    python bench/relay.py --src /tmp/old/src …      the service runs another checkout's code
                                                    (e.g. ``git archive REV | tar -x -C /tmp/old``)

The last line printed is one JSON object with the run's ``n``, ``store``, ``lateness_p50_ms``,
``lateness_p99_ms``, ``lateness_max_ms``, ``deliveries_per_s``, ``lost`` and ``duplicates``.
Redis runs use a redis-server the benchmark starts on a free port (``--store redis``, the
default) and stops at the end; a ``redis://`` URL given instead has its database FLUSHED before
and after each run, so name one you own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path
from urllib.parse import urlsplit

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent / "src")]  # the package is not installed

from relaybench.orchestrate import Outcome, Plan, redis_server, run  # noqa: E402  (after the path)
from relaybench.procs import SRC_DIR  # noqa: E402
from relaybench.report import update_results  # noqa: E402
from soakbench.probes import scratch_redis  # noqa: E402

QUICK_N = 1_000
FULL_N = 10_000
OWN_REDIS = "redis"  # a redis-server this benchmark starts on a free port (and flushes between runs)
QUIET_LOAD = 0.25  # cores busy with other work during a run, below which it counts as undisturbed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_N:,} contracts on one store")
    parser.add_argument(
        "--store",
        default=None,
        help="sqlite (default with --quick), redis (a redis-server of its own on a free port) or a "
        "redis:// URL whose database is flushed; without --quick: only this store, and RESULTS.md "
        "is left alone",
    )
    parser.add_argument("--n", type=int, default=None, help="contracts per run (overrides the mode's)")
    parser.add_argument("--spread-s", type=float, default=10.0, help="spread of the deadlines (default 10)")
    parser.add_argument("--timeout-ms", type=int, default=5000, help="hookResponseTimeoutMs (default 5000)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the sink and Sentinel to cores")
    parser.add_argument(
        "--preload",
        action="store_true",
        help="diagnostic: create every contract first, deadlines then spread over --spread-s (relay alone)",
    )
    parser.add_argument(
        "--attempts",
        type=int,
        default=1,
        help="run each plan up to this many times while other processes load the machine by more than "
        f"{QUIET_LOAD} cores, and keep the quietest run (default 1)",
    )
    parser.add_argument("--keep", action="store_true", help="keep each run's folder (config, logs, records)")
    parser.add_argument(
        "--src",
        type=Path,
        default=SRC_DIR,
        help="the Sentinel code the service runs (default: this checkout's; another leaves RESULTS.md alone)",
    )
    args = parser.parse_args(argv)
    if args.store is not None and args.store not in ("sqlite", OWN_REDIS):
        url = urlsplit(args.store)
        if url.scheme != "redis":
            parser.error(f"--store must be sqlite, redis or a redis:// URL, got {args.store!r}")
        if not url.path.strip("/").isdigit() or int(url.path.strip("/")) == 0:
            parser.error(
                f"--store {args.store!r}: name a database other than 0 (e.g. redis://127.0.0.1:6379/13); "
                "the benchmark flushes it"
            )
    if args.n is not None and args.n < 1:
        parser.error("--n must be at least 1")
    if args.attempts < 1:
        parser.error("--attempts must be at least 1")
    if not (args.src / "sentinel_hooks").is_dir():
        parser.error(f"--src {args.src}: no sentinel_hooks package there")
    return args


def stores_of(args: argparse.Namespace) -> list[str]:
    """The stores asked for (``redis`` stands for the benchmark's own redis-server)."""
    if args.store is not None:
        return [args.store]
    return ["sqlite"] if args.quick else ["sqlite", OWN_REDIS]


def plans(args: argparse.Namespace, own_redis_url: str | None = None) -> list[Plan]:
    """The runs of this invocation, in order; ``own_redis_url`` is the benchmark's own
    redis-server, which ``redis`` stands for.

    ``--quick``: one steady run. Full: steady on SQLite and on Redis, then the preloaded
    diagnostic on both (every contract created first, so the relay works alone).
    """
    n = args.n or (QUICK_N if args.quick else FULL_N)
    chosen = [own_redis_url or OWN_REDIS if store == OWN_REDIS else store for store in stores_of(args)]
    one_scenario = args.quick or args.store is not None or args.preload
    preloads = [args.preload] if one_scenario else [False, True]
    common = {"n": n, "spread_s": args.spread_s, "timeout_ms": args.timeout_ms}
    return [
        Plan(store=store, preload=preload, pin=not args.no_pin, keep=args.keep, src=args.src, **common)
        for preload in preloads
        for store in chosen
    ]


async def main_async(
    args: argparse.Namespace, own_redis_url: str | None = None
) -> tuple[list[Outcome], str | None]:
    """Run the plans one after the other; SIGTERM stops like Ctrl-C (children cleaned up)."""
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    outcomes: list[Outcome] = []
    version: str | None = None
    for plan in plans(args, own_redis_url):
        if plan.store != "sqlite":
            version, _ = await redis_server(plan.store)
        outcomes.append(await quietest_run(plan, max(1, args.attempts)))
    return outcomes, version


async def quietest_run(plan: Plan, attempts: int) -> Outcome:
    """Run ``plan`` until a run is undisturbed by other load (at most ``attempts`` times)."""
    best: Outcome | None = None
    for attempt in range(1, attempts + 1):
        label = f"{plan.n:,} contracts on {plan.store_kind} ({plan.scenario})"
        if attempts > 1:
            label += f", attempt {attempt}/{attempts}"
        print(f"relay bench: {label} …", file=sys.stderr, flush=True)
        outcome = await run(plan)
        print(json.dumps({"store": plan.store_kind, **outcome.details()}), flush=True)
        if best is None or outcome.other_load < best.other_load:
            best = outcome
        if outcome.other_load <= QUIET_LOAD:
            break
    assert best is not None  # attempts >= 1
    return best


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with contextlib.ExitStack() as stack:
            own = stack.enter_context(scratch_redis("relay-redis-")) if OWN_REDIS in stores_of(args) else None
            outcomes, version = asyncio.run(main_async(args, own))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("relay bench: interrupted; child processes stopped", file=sys.stderr)
        return 130
    full = (
        not args.quick
        and args.store is None
        and args.n in (None, FULL_N)
        and not args.preload
        and args.src.resolve() == SRC_DIR.resolve()
    )
    if full:
        path = update_results(outcomes, version)
        print(f"relay bench: updated {path}", file=sys.stderr)
    for outcome in sorted(outcomes, key=lambda o: not o.plan.preload):  # the main (steady) runs last
        print(json.dumps(outcome.summary()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
