"""Alert intake benchmark: a ``format: alertmanager`` watcher fed over HTTP on one core, and a bare handler.

A real ``sentinel run`` (pinned with ``taskset`` to one core) gets Alertmanager notifications
at a steady rate of alerts/s from this process (on the other core); every alert is new and
critical, so it fires: a scripted hook session notifies and the fan-out line goes out, two
deliveries to a webhook sink. The baseline, in the same invocation and on the same core, is a
bare aiohttp handler that parses the same bodies and appends their alerts to SQLite
(``intakebench.bare``). Each row reports alerts/s absorbed, the 202's p50/p99/max (from each
notification's scheduled send), CPU per alert, how busy the server's core was, deliveries
missing or repeated, and the machine's load (``uptime``'s 1-minute average, and cores kept
busy by other processes during the row).

    python bench/intake.py --quick                  150 alerts/s for 5 s, one alert per notification, SQLite
    python bench/intake.py                          50/150/300 alerts/s, 1 and 10 alerts per notification,
                                                    SQLite and Redis, and the bare baseline
    python bench/intake.py --src /work/main/src     measure another checkout's code

Redis rows run on a redis-server the benchmark starts on a free port (``--stores redis``, the
default) and stops at the end; a ``redis://`` URL given instead has its database FLUSHED before
and after each row, so name one you own.
The last line printed is one JSON object (the rows).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH)]

from intakebench.run import Row, run_row  # noqa: E402  (after the path)
from soakbench.probes import scratch_redis  # noqa: E402

OWN_REDIS = "redis"  # a redis-server this benchmark starts on a free port (and flushes between rows)
COLUMNS = (
    "server", "store", "alerts_per_notification", "offered_alerts_per_s", "alerts_absorbed_per_s",
    "p50_ms", "p99_ms", "max_ms", "errors", "cpu_ms_per_alert", "server_busy_during_intake",
    "server_cpu_denied_during_intake",
    "deliveries_missing", "deliveries_repeated", "load_avg_1m", "other_load_cores",
)  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="150 alerts/s for 5 s, SQLite, one alert each")
    parser.add_argument("--rates", type=float, nargs="+", default=None, help="alerts/s (default 50 150 300)")
    parser.add_argument("--per", type=int, nargs="+", default=None, help="alerts per notification (1 10)")
    parser.add_argument(
        "--stores",
        nargs="+",
        default=None,
        help="sqlite, redis (a redis-server of its own on a free port) and/or redis:// URLs (flushed)",
    )
    parser.add_argument("--duration-s", type=float, default=None, help="seconds of load per row (default 10)")
    parser.add_argument("--no-bare", action="store_true", help="leave the bare baseline out")
    parser.add_argument("--src", type=Path, default=BENCH.parent / "src", help="the Sentinel code to run")
    args = parser.parse_args(argv)
    for store in args.stores or []:
        if store not in ("sqlite", OWN_REDIS) and not store.startswith("redis://"):
            parser.error(f"--stores: {store!r} is neither sqlite, redis nor a redis:// URL")
        if store.startswith("redis://") and store.rstrip("/").rsplit("/", 1)[-1] in (
            "",
            "0",
            "127.0.0.1:6379",
        ):
            parser.error(f"--stores {store!r}: name a database other than 0 (the benchmark flushes it)")
    return args


def stores_of(args: argparse.Namespace) -> list[str]:
    """The stores asked for (``redis`` stands for the benchmark's own redis-server)."""
    return list(args.stores or (["sqlite"] if args.quick else ["sqlite", OWN_REDIS]))


def rows(args: argparse.Namespace, own_redis_url: str | None = None) -> list[Row]:
    """The rows of this invocation: the bare baseline first at each rate, then Sentinel per store."""
    rates = args.rates or ([150.0] if args.quick else [50.0, 150.0, 300.0])
    pers = args.per or ([1] if args.quick else [1, 10])
    stores = [own_redis_url or OWN_REDIS if store == OWN_REDIS else store for store in stores_of(args)]
    duration = args.duration_s or (5.0 if args.quick else 10.0)
    usable = sorted(os.sched_getaffinity(0))
    load_core, server_core = usable[0], usable[-1]
    common = {"duration_s": duration, "src": args.src, "server_core": server_core, "load_core": load_core}
    planned: list[Row] = []
    for per in pers:
        for rate in rates:
            if not args.no_bare:
                planned.append(Row(server="bare", store="sqlite", rate=rate, per=per, **common))
            planned += [Row(server="sentinel", store=store, rate=rate, per=per, **common) for store in stores]
    return planned


def table(results: list[dict[str, object]]) -> str:
    """The rows as a Markdown table."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for result in results:
        cells = [json.dumps(result[c]) if isinstance(result[c], dict) else str(result[c]) for c in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace, own_redis_url: str | None) -> list[dict[str, object]]:
    planned = rows(args, own_redis_url)
    os.sched_setaffinity(0, {planned[0].load_core})
    results = []
    for row in planned:
        label = f"{row.server} {row.store} {row.rate:g} alerts/s x{row.per}"
        print(f"intake bench: {label} …", file=sys.stderr, flush=True)
        result = await run_row(row)
        print(json.dumps(result), flush=True)
        results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with contextlib.ExitStack() as stack:
            own_redis_url = None
            if OWN_REDIS in stores_of(args):
                own_redis_url = stack.enter_context(scratch_redis("intake-redis-"))
            results = asyncio.run(main_async(args, own_redis_url))
    except KeyboardInterrupt:
        print("intake bench: interrupted", file=sys.stderr)
        return 130
    print(table(results), file=sys.stderr)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
