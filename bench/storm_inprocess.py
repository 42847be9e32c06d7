"""CPU per grouped alert in-process (issue 30): a whole ``Service`` takes Alertmanager notifications
through ``service.ingest_alerts``, with no HTTP, load generator or sink around it, so a change to the
intake is seen without ``bench/storm.py``'s ±20 % between runs. It reports the process's CPU per
alert (its threads: the store's too) and the event loop's (``time.thread_time``), each
notification's time from call to return (p50, p99, the slowest), and how many alerts joined their
group written out (``GroupStore.join_members``). The groups' pages go to the webhook sink of
``bench/storm.py`` (``relaybench.sink``), in a process of its own, so a run whose sessions page
(``--rate``, ``--wait-ms``) measures deliveries that succeed, not retries.

    python bench/storm_inprocess.py                          100 notifications of 50, back to back
    python bench/storm_inprocess.py --per 20 --rate 50 --count 750 --wait-ms 5000
                                                             steady-like: 50 a second, sessions on
    python bench/storm_inprocess.py --store redis://127.0.0.1:6390/0   a Redis of your own (it is flushed)
    python bench/storm_inprocess.py --src /tmp/src-old/src   another checkout's code (paired A/B)
    python bench/storm_inprocess.py --profile /tmp/p.prof    cProfile of the notifications

Run it a few times and in pairs: one run moves ±15 %. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH)]

from intakebench.load import ALERTNAMES, notification  # noqa: E402  (after the path)
from intakebench.project import TOKEN, TOKEN_ENV, write_project  # noqa: E402
from relaybench.procs import Child  # noqa: E402


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    from sentinel_hooks.config.loader import load_config
    from sentinel_hooks.service import Service

    os.environ[TOKEN_ENV] = TOKEN
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        store = f"sqlite:///{folder}/state.db" if args.store == "sqlite" else args.store
        if args.store != "sqlite":
            await _flushed(args.store)
        sink = await Child.start("sink", ["--out", str(folder / "sink.jsonl")], folder)
        try:
            sink_port = int((await sink.expect("READY", timeout_s=30))["port"])
            path = write_project(
                folder, store=store, port=0, sink_port=sink_port, group_wait_ms=args.wait_ms, fanout=False
            )
            service = Service(load_config(path), state_dir=folder / ".sentinel")
            await service.start()
            try:
                return await _run(service, args)
            finally:
                await service.stop()
        finally:
            await sink.stop()


async def _run(service: Any, args: argparse.Namespace) -> dict[str, Any]:
    names = ALERTNAMES[:5]
    bodies = [
        json.loads(notification("run", i * args.per, args.per, names[i % len(names)]))["alerts"]
        for i in range(args.count)
    ]
    await service.ingest_alerts("am", json.loads(notification("warm", 0, args.per, "Warm"))["alerts"])
    written = _count_written(service)  # the measured notifications' only
    profiler = cProfile.Profile() if args.profile else None
    took: list[tuple[float, int]] = []
    start = time.monotonic()
    cpu0, loop0 = time.process_time(), time.thread_time()
    if profiler:
        profiler.enable()
    for index, alerts in enumerate(bodies):
        if args.rate:
            await asyncio.sleep(max(0.0, start + index / args.rate - time.monotonic()))
        began = time.perf_counter()
        await service.ingest_alerts("am", alerts)
        took.append((time.perf_counter() - began, index))
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    cpu, loop = time.process_time() - cpu0, time.thread_time() - loop0
    alerts_in = args.count * args.per
    ordered = sorted(t for t, _ in took)
    return {
        "store": "sqlite" if args.store == "sqlite" else "redis",
        "alerts": alerts_in,
        "per_notification": args.per,
        "rate_per_s": args.rate,
        "cpu_us_per_alert": round(cpu / alerts_in * 1e6, 1),
        "loop_us_per_alert": round(loop / alerts_in * 1e6, 1),
        "notification_ms_p50": round(ordered[len(ordered) // 2] * 1000, 1),
        "notification_ms_p99": round(ordered[int(len(ordered) * 0.99)] * 1000, 1),
        "slowest_ms": [(round(t * 1000, 1), i) for t, i in sorted(took, reverse=True)[:5]],
        "joined_written": sum(written),
        "load_avg_1m": os.getloadavg()[0],
    }


async def _flushed(url: str) -> None:
    """Empty the Redis database of ``url`` (the run's groups start from nothing)."""
    import redis.asyncio as aioredis

    client = aioredis.from_url(url)
    try:
        await client.flushdb()
    finally:
        await client.aclose()


def _count_written(service: Any) -> list[int]:
    """The members each ``join_members`` stored, counted on the way (code without it: none)."""
    written: list[int] = []
    join_members = getattr(service.store, "join_members", None)
    if join_members is None:
        return written

    async def counted(group: Any, members: Any) -> Any:
        answers = await join_members(group, members)
        written.append(sum(answer is not None for answer in answers))
        return answers

    service.store.join_members = counted
    return written


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=100, help="notifications (default 100)")
    parser.add_argument("--per", type=int, default=50, help="alerts per notification (default 50)")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="notifications a second (default: back to back)"
    )
    parser.add_argument(
        "--wait-ms", type=int, default=60000, help="the group's waitMs (default 60000: no session)"
    )
    parser.add_argument("--store", default="sqlite", help="sqlite (a scratch file) or a redis:// URL")
    parser.add_argument("--src", type=Path, help="import sentinel_hooks from this src directory")
    parser.add_argument("--profile", help="write cProfile stats of the notifications here")
    args = parser.parse_args()
    if args.src is not None:
        sys.path.insert(0, str(args.src))
    print(json.dumps(asyncio.run(measure(args))))


if __name__ == "__main__":
    main()
