"""Storm benchmark: an Alertmanager storm through HTTP into a running ``sentinel run``, grouped by alertname.

**Storm** (issue 30): ``--alerts`` (5,000) new critical alerts in ``--duration-s`` (10 s) over
``--alertnames`` (5) names, in Alertmanager notifications of ``--per`` alerts of one name each,
into one ``format: alertmanager`` watcher whose fires are grouped by alertname
(``fire.group: {by: [payload.labels.alertname], waitMs: --wait-ms}``, SPEC §19). The server is a
real ``sentinel run`` pinned to one core (``taskset``), the load and the webhook sink on the other;
the fan-out line is off, so what reaches the sink is the pages. Reported: pages (one per group
with grouping), the first page's arrival after the first alert was sent, the 202's p50/p99,
alerts lost (not answered 202, or fired but never paged), and CPU per alert as a ratio to the
bare aiohttp handler of ``bench/intake.py`` (``intakebench.bare``: parses the same bodies and
appends their alerts to SQLite in one transaction per request), measured in the same invocation on
the same core.

**Steady**: ``--steady-rate`` (1,000) alerts/s for ``--steady-duration-s`` (30 s) on each store
(SQLite, and a redis-server the benchmark starts on a free port): the 202's p99 and CPU per alert
while the alerts come in.

Where the code under test has no grouping yet (``sentinel validate`` refuses ``fire.group``), the
rows run without it and say so (``grouped: false``): every alert is then a fire with its own
session and page, so pages = fires.

    python bench/storm.py                                      the storm and the steady rows, SQLite and Redis
    python bench/storm.py --no-steady --stores sqlite redis   the 5,000-alert storm only
    python bench/storm.py --no-storm                           steady 1,000 alerts/s for 30 s, both stores
    python bench/storm.py --alerts 60 --duration-s 2 --alertnames 3 --per 5 --wait-ms 500 \\
        --steady-rate 40 --steady-duration-s 1 --stores sqlite          (the test's tiny run)
    python bench/storm.py --src /work/main/src                 measure another checkout's code

The last line printed is one JSON object: ``{"rows": [...], "summary": [...]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH)]

from intakebench.project import TOKEN, TOKEN_ENV, write_project  # noqa: E402  (after the path)
from intakebench.run import Row, run_row  # noqa: E402
from soakbench.probes import scratch_redis  # noqa: E402

OWN_REDIS = "redis"
SUMMARY = (
    "mode", "store", "grouped", "alerts_sent", "lost", "fired", "pages", "first_page_ms",
    "alerts_absorbed_per_s", "p50_ms", "p99_ms", "cpu_ms_per_alert", "cpu_ratio_to_bare",
    "cpu_ratio_to_bare_intake", "load_avg_1m", "other_load_cores",
)  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--alerts", type=int, default=5000, help="alerts in the storm (5000)")
    parser.add_argument("--duration-s", type=float, default=10.0, help="the storm's length (10 s)")
    parser.add_argument("--alertnames", type=int, default=5, help="alertnames, so groups (5, at most 6)")
    parser.add_argument("--per", type=int, default=50, help="alerts per notification (50)")
    parser.add_argument("--wait-ms", type=int, default=5000, help="the groups' waitMs (5000)")
    parser.add_argument("--steady-rate", type=float, default=1000.0, help="steady alerts/s (1000)")
    parser.add_argument("--steady-duration-s", type=float, default=30.0, help="steady length (30 s)")
    parser.add_argument("--steady-per", type=int, default=20, help="alerts per steady notification (20)")
    parser.add_argument("--no-steady", action="store_true", help="the storm only")
    parser.add_argument("--no-storm", action="store_true", help="the steady rows only")
    parser.add_argument(
        "--stores", nargs="+", default=["sqlite", OWN_REDIS], help="sqlite and/or redis (its own server)"
    )
    parser.add_argument("--src", type=Path, default=BENCH.parent / "src", help="the Sentinel code to run")
    args = parser.parse_args(argv)
    for store in args.stores:
        if store not in ("sqlite", OWN_REDIS):
            parser.error(f"--stores: {store!r} is neither sqlite nor redis")
    if not 1 <= args.alertnames <= 6:
        parser.error("--alertnames: 1 to 6")
    return args


def groups_supported(src: Path) -> bool:
    """Whether the code under test takes ``fire.group`` (``sentinel validate`` of a grouped project)."""
    with tempfile.TemporaryDirectory(prefix="storm-probe-") as folder:
        config = write_project(Path(folder), store="sqlite:///x.db", port=1, sink_port=2, group_wait_ms=1000)
        env = dict(os.environ, PYTHONPATH=str(src), **{TOKEN_ENV: TOKEN})
        argv = [sys.executable, "-m", "sentinel_hooks", "validate", "-c", str(config)]
        done = subprocess.run(argv, env=env, cwd=folder, capture_output=True, timeout=120, check=False)
    return done.returncode == 0


def planned(args: argparse.Namespace, redis_url: str | None, grouped: bool) -> list[tuple[str, Row]]:
    """(mode, row) pairs: each mode's bare baseline first, then Sentinel on each store."""
    usable = sorted(os.sched_getaffinity(0))
    wait = args.wait_ms if grouped else None
    stores = [redis_url or OWN_REDIS if store == OWN_REDIS else store for store in args.stores]
    storm = Row(
        server="bare", store="sqlite", rate=args.alerts / args.duration_s, per=args.per,
        duration_s=args.duration_s, src=args.src,
        server_core=usable[-1], load_core=usable[0], alertnames=args.alertnames,
        group_wait_ms=wait, fanout=False,
    )  # fmt: skip
    steady = replace(
        storm, rate=args.steady_rate, per=args.steady_per, duration_s=args.steady_duration_s, drain=grouped
    )
    rows: list[tuple[str, Row]] = []
    for mode, base, on in (("storm", storm, not args.no_storm), ("steady", steady, not args.no_steady)):
        if on:
            rows.append((mode, base))
            rows += [(mode, replace(base, server="sentinel", store=store)) for store in stores]
    return rows


def summary(results: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per mode and store: the figures, with CPU per alert as a ratio to the mode's bare row."""
    bare = {mode: row for mode, row in results if row["server"] == "bare"}
    lines = []
    for mode, row in results:
        base = bare.get(mode)
        lost = row["alerts_sent"] - row["alerts_absorbed"]
        if row["server"] == "sentinel" and row["deliveries_missing"]:
            lost += row["deliveries_missing"]  # fired (or grouped) but never paged
        line = {
            "mode": mode,
            "store": "redis" if row["store"].startswith("redis://") else row["store"],
            "grouped": row["grouped"] if row["server"] == "sentinel" else None,
            "lost": lost,
            "cpu_ratio_to_bare": _ratio(row, base, "cpu_ms_per_alert"),
            "cpu_ratio_to_bare_intake": _ratio(row, base, "cpu_ms_per_alert_intake"),
        }
        line.update({key: row[key] for key in SUMMARY if key in row and key not in line})
        lines.append(line)
    return lines


def _ratio(row: dict[str, Any], base: dict[str, Any] | None, key: str) -> float | None:
    if base is None or not row.get(key) or not base.get(key):
        return None
    return round(row[key] / base[key], 1)


def table(lines: list[dict[str, Any]]) -> str:
    out = ["| " + " | ".join(SUMMARY) + " |", "|" + "---|" * len(SUMMARY)]
    out += ["| " + " | ".join(str(line.get(key)) for key in SUMMARY) + " |" for line in lines]
    return "\n".join(out)


async def main_async(args: argparse.Namespace, redis_url: str | None) -> list[tuple[str, dict[str, Any]]]:
    grouped = groups_supported(args.src)
    if not grouped:
        print(
            "storm bench: fire.group is not supported by this code: running without grouping", file=sys.stderr
        )
    rows = planned(args, redis_url, grouped)
    os.sched_setaffinity(0, {rows[0][1].load_core})
    results = []
    for mode, row in rows:
        print(
            f"storm bench: {mode} {row.server} {row.store} {row.rate:g} alerts/s …",
            file=sys.stderr,
            flush=True,
        )
        result = await run_row(row)
        result["alerts_absorbed"] = _absorbed(result)
        print(json.dumps({"mode": mode, **result}), flush=True)
        results.append((mode, result))
    return results


def _absorbed(result: dict[str, Any]) -> int:
    """Alerts answered 202: those sent less those whose notification failed."""
    failed = sum(result["errors"].values()) * result["alerts_per_notification"]
    return int(result["alerts_sent"] - failed)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        with contextlib.ExitStack() as stack:
            redis_url = (
                stack.enter_context(scratch_redis("storm-redis-")) if OWN_REDIS in args.stores else None
            )
            results = asyncio.run(main_async(args, redis_url))
    except KeyboardInterrupt:
        print("storm bench: interrupted", file=sys.stderr)
        return 130
    lines = summary(results)
    print(table(lines), file=sys.stderr)
    print(json.dumps({"rows": [{"mode": mode, **row} for mode, row in results], "summary": lines}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
