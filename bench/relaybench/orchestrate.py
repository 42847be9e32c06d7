"""One benchmark run: sink and Sentinel in their own processes, the contracts, the wait, the numbers.

1. Flush the Redis database (Redis runs only), start the sink (pinned to one core) and the
   Sentinel process (``relaybench.service``, pinned to the other) on a fresh project.
2. Read the Sentinel process's CPU, send ``go``: it accepts N callbacks, so N deadlines fall
   uniformly over ``spread_s`` seconds (steady: the callbacks over ``spread_s``, deadlines
   ``timeout`` later; preloaded: all callbacks first, deadlines ``lead_s`` after ``go``).
3. Poll the sink's ``/count`` until every contract has its fallback (then wait one second
   more, for any duplicate) or until the last deadline + 5 s has passed, whichever is first.
4. Read the CPU again, stop both processes, join the sink's records with the contract map.

CPU is reported for the whole run (intake of the N callbacks included) and for the phase
after the last callback was accepted, when the process only relays and delivers. The
Redis server's CPU is reported apart (when it runs on this machine), and the machine's
busy time spent by neither the benchmark's three processes nor that server
(``other_load_cores``): on a shared machine it says how much the run had to share.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis

from relaybench.analysis import (
    LOST_AFTER_S,
    Arrival,
    Numbers,
    analyse,
    p99_by_tenth,
    settle_lateness_ms,
    settle_times,
)
from relaybench.procs import (
    SRC_DIR,
    Child,
    ChildFailed,
    cpu_plan,
    cpu_seconds,
    is_local_process,
    machine_busy_seconds,
)
from relaybench.project import TARGET, sqlite_url, write_project

POLL_S = 0.25
PRELOAD_BASE_S = 3.0
PRELOAD_PER_CONTRACT_S = 0.004  # generous: the intake takes 1-3 ms of one core per callback
DUPLICATE_GRACE_S = 1.0


@dataclass(frozen=True)
class Plan:
    """What to run: ``n`` contracts on ``store`` (``sqlite`` or a redis:// URL)."""

    n: int
    store: str
    spread_s: float = 10.0
    timeout_ms: int = 5000
    pin: bool = True
    keep: bool = False
    preload: bool = False
    src: Path = SRC_DIR  # the Sentinel code the service child runs

    @property
    def store_kind(self) -> str:
        return "sqlite" if self.store == "sqlite" else "redis"

    @property
    def scenario(self) -> str:
        return "preloaded" if self.preload else "steady"

    @property
    def lead_s(self) -> float:
        """Preloaded runs: how long after ``go`` the first deadline falls (time to insert them all)."""
        return PRELOAD_BASE_S + self.n * PRELOAD_PER_CONTRACT_S


@dataclass(frozen=True)
class Outcome:
    """The numbers of one run and its costs."""

    plan: Plan
    numbers: Numbers
    cpu_s: float
    relay_phase_cpu_s: float
    relay_phase_fallbacks: int
    insert_lag_p99_ms: float
    deadline_span_s: float
    intake_errors: int
    first_intake_error: str | None
    intake_s: float
    intake_done_before_first_deadline: bool
    other_load: float
    server_cpu_s: float | None
    settle_ms: tuple[float, float] | None
    by_tenth: list[tuple[float | None, float | None]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The last-line JSON object of ``bench/relay.py``."""
        n = self.numbers
        return {
            "n": self.plan.n,
            "store": self.plan.store_kind,
            "lateness_p50_ms": n.lateness_p50_ms,
            "lateness_p99_ms": n.lateness_p99_ms,
            "lateness_max_ms": n.lateness_max_ms,
            "deliveries_per_s": n.deliveries_per_s,
            "lost": n.lost,
            "duplicates": n.duplicates,
        }

    def details(self) -> dict[str, Any]:
        """Everything else a run measured (printed before the summary, used for RESULTS.md)."""
        per_k = 1000 / max(1, self.numbers.delivered)
        relay_per_k = 1000 / max(1, self.relay_phase_fallbacks)
        return {
            "scenario": self.plan.scenario,
            "delivered": self.numbers.delivered,
            "over_1s": self.numbers.over_1s,
            "stray": self.numbers.stray,
            "cpu_s": round(self.cpu_s, 2),
            "cpu_s_per_1k_fallbacks": round(self.cpu_s * per_k, 3),
            "relay_phase_fallbacks": self.relay_phase_fallbacks,
            "relay_phase_cpu_s_per_1k": round(self.relay_phase_cpu_s * relay_per_k, 3),
            "insert_lag_p99_ms": round(self.insert_lag_p99_ms, 1),
            "deadline_span_s": round(self.deadline_span_s, 2),
            "intake_errors": self.intake_errors,
            "first_intake_error": self.first_intake_error,
            "intake_s": round(self.intake_s, 2),
            "intake_done_before_first_deadline": self.intake_done_before_first_deadline,
            "other_load_cores": round(self.other_load, 2),
            "settle_lateness_p50_p99_ms": self.settle_ms,
            "p99_by_tenth_of_run_ms": self.by_tenth,
            "redis_server_cpu_s_per_1k": None
            if self.server_cpu_s is None
            else round(self.server_cpu_s * per_k, 3),
        }


async def flush_redis(url: str) -> None:
    """Empty the benchmark's Redis database."""
    client = aioredis.Redis.from_url(url)
    try:
        await client.flushdb()
    finally:
        await client.aclose()


async def redis_server(url: str) -> tuple[str, int | None]:
    """The Redis server's version and, when it runs on this machine, its process id."""
    client = aioredis.Redis.from_url(url)
    try:
        info = await client.info("server")
    finally:
        await client.aclose()
    pid = int(info.get("process_id", 0))
    return str(info.get("redis_version", "?")), pid if is_local_process(pid, "redis") else None


async def _sink_keys(session: aiohttp.ClientSession, port: int) -> int:
    async with session.get(f"http://127.0.0.1:{port}/count") as response:
        return int((await response.json())["keys"])


async def _wait_for_fallbacks(port: int, n: int, until: float) -> None:
    """Return once the sink has ``n`` distinct keys (plus a grace period) or at ``until``."""
    async with aiohttp.ClientSession() as session:
        while time.time() < until:
            if await _sink_keys(session, port) >= n:
                await asyncio.sleep(DUPLICATE_GRACE_S)
                return
            await asyncio.sleep(POLL_S)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def run(plan: Plan) -> Outcome:
    """Run ``plan`` once in a fresh temporary folder.

    Children are stopped whatever happens (Ctrl-C included) and the Redis database is
    flushed again. The folder is removed, unless ``plan.keep`` or the run failed (then its
    logs are kept and named).
    """
    folder = Path(tempfile.mkdtemp(prefix="relay-bench-"))
    redis_url = None if plan.store == "sqlite" else plan.store
    children: list[Child] = []
    try:
        server_pid = None
        if redis_url is not None:
            await flush_redis(redis_url)
            _, server_pid = await redis_server(redis_url)
        outcome = await _measure(plan, folder, redis_url, children, server_pid)
    except (asyncio.CancelledError, KeyboardInterrupt):
        plan = replace(plan, keep=False)
        raise
    except BaseException:
        plan = replace(plan, keep=True)
        raise
    finally:
        for child in children:
            child.kill_now()
        if redis_url is not None:
            await flush_redis(redis_url)
        if plan.keep:
            print(f"relay bench: the run's files are in {folder}", file=sys.stderr, flush=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return outcome


async def _measure(
    plan: Plan, folder: Path, redis_url: str | None, children: list[Child], server_pid: int | None
) -> Outcome:
    sink_cpu, sentinel_cpu = cpu_plan(plan.pin)
    sink = await Child.start("sink", ["--out", str(folder / "sink.jsonl")], folder, cpu=sink_cpu)
    children.append(sink)
    port = int((await sink.expect("READY", timeout_s=30))["port"])
    config = write_project(
        folder, store=redis_url or sqlite_url(folder), sink_port=port, timeout_ms=plan.timeout_ms
    )
    args = ["-c", str(config), "--n", str(plan.n), "--spread-s", str(plan.spread_s)]
    args += [
        "--map",
        str(folder / "map.jsonl"),
        "--target",
        TARGET,
        "--settled",
        str(folder / "settled.jsonl"),
    ]
    if plan.preload:
        args += ["--lead-s", str(plan.lead_s)]
    sentinel = await Child.start("service", args, folder, cpu=sentinel_cpu, src=plan.src)
    children.append(sentinel)
    await sentinel.expect("READY", timeout_s=60)
    cpu_start = cpu_seconds(sentinel.pid)
    server_start = cpu_seconds(server_pid) if server_pid else 0.0
    bench_start = _bench_cpu(children)
    busy_start, wall_start = machine_busy_seconds(), time.monotonic()
    await sentinel.send("go")
    wait_s = plan.spread_s + (plan.lead_s if plan.preload else plan.timeout_ms / 1000) + 120
    inserted = await sentinel.expect("INSERTED", timeout_s=wait_s)
    cpu_inserted = cpu_seconds(sentinel.pid)
    deadlines = {r["callbackId"]: float(r["deadline"]) for r in _read_jsonl(folder / "map.jsonl")}
    last_deadline = max(deadlines.values(), default=time.time())
    await _wait_for_fallbacks(port, len(deadlines), last_deadline + LOST_AFTER_S + POLL_S)
    cpu_end = cpu_seconds(sentinel.pid)
    server_cpu = cpu_seconds(server_pid) - server_start if server_pid else None
    ours = _bench_cpu(children) - bench_start + (server_cpu or 0.0)
    other_load = (machine_busy_seconds() - busy_start - ours) / (time.monotonic() - wall_start)
    for child in reversed(children):
        if await child.stop() != 0:
            raise ChildFailed(f"{child.role} exited with an error; see {child.log_path}")
    arrivals = [
        Arrival(r["at"], r["callbackId"], r["key"]) for r in _read_jsonl(folder / "sink.jsonl") if "at" in r
    ]
    inserted_at = float(inserted["at"])
    settled_path = folder / "settled.jsonl"
    settled = settle_times(_read_jsonl(settled_path)) if settled_path.exists() else {}
    return Outcome(
        plan=plan,
        numbers=analyse(deadlines, arrivals, target=TARGET),
        cpu_s=cpu_end - cpu_start,
        relay_phase_cpu_s=cpu_end - cpu_inserted,
        relay_phase_fallbacks=sum(1 for a in arrivals if a.at > inserted_at),
        insert_lag_p99_ms=float(inserted["lagP99Ms"]),
        deadline_span_s=last_deadline - min(deadlines.values(), default=last_deadline),
        intake_errors=int(inserted["errors"]),
        first_intake_error=inserted["firstError"],
        intake_s=float(inserted["seconds"]),
        intake_done_before_first_deadline=inserted_at <= min(deadlines.values(), default=inserted_at),
        other_load=max(0.0, other_load),
        server_cpu_s=server_cpu,
        settle_ms=settle_lateness_ms(deadlines, settled),
        by_tenth=p99_by_tenth(deadlines, arrivals, settled),
    )


def _bench_cpu(children: list[Child]) -> float:
    """CPU seconds used so far by this process and the children (to tell other load apart)."""
    return cpu_seconds(os.getpid()) + sum(cpu_seconds(child.pid) for child in children)
