"""One row of the intake benchmark: a server pinned to one core, the load from the other, the numbers.

The server is either a real ``sentinel run`` (``python -m sentinel_hooks run``, started under
``taskset -c CORE``, so its SQLite thread shares the core) or the bare baseline
(``intakebench.bare``, on the same core). The load and the relay benchmark's webhook sink run on
the other core. CPU is the server's (``/proc``, all threads) from the first notification until
every fire's two deliveries reached the sink (the bare baseline has none: until its last 202).
``other load`` is the machine's busy time spent by anything but the benchmark's processes and
redis-server, in cores, and ``uptime`` is the 1-minute load average when the row started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import redis.asyncio as aioredis
from relaybench.procs import BENCH_DIR, Child, cpu_seconds, is_local_process, machine_busy_seconds
from relaybench.project import sqlite_url

from intakebench.load import Answers, offer
from intakebench.project import TOKEN, TOKEN_ENV, WATCHER_ID, write_project

READY_TIMEOUT_S = 90.0
DRAIN_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Row:
    """What to run: ``server`` (``sentinel`` or ``bare``) on ``store``, ``rate`` alerts/s in
    notifications of ``per`` alerts, for ``duration_s``. The storm benchmark's rows spread the
    notifications over ``alertnames`` names, group the fires by alertname (``group_wait_ms``; None:
    no grouping), leave the fan-out line out (``fanout``) so the sink sees pages, and may skip
    waiting for the deliveries (``drain``)."""

    server: str
    store: str
    rate: float
    per: int
    duration_s: float
    src: Path
    server_core: int
    load_core: int
    alertnames: int = 1
    group_wait_ms: int | None = None
    fanout: bool = True
    drain: bool = True


def _schedstat_s(pid: int, field: int) -> float:
    """The sum over the live threads of ``pid`` of one ``/proc/<pid>/task/*/schedstat`` field (ns), in s."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int((task / "schedstat").read_text().split()[field])
    return total / 1e9


def runqueue_wait_s(pid: int) -> float:
    """Seconds the threads of ``pid`` have been ready to run but waited for a core (the second
    schedstat field): on a shared machine, the CPU it was denied."""
    return _schedstat_s(pid, 1)


def server_cpu_s(row: Row, pid: int) -> float:
    """CPU seconds the server ``pid`` has used so far. The bare handler's in ns (its threads'
    schedstat run time: it starts none that end), since its whole storm is 70 to 100 ms of CPU, which
    ``/proc/<pid>/stat``'s 10 ms ticks read a third off either way; Sentinel's from those ticks
    (seconds of CPU, and its executor's threads may end, taking their ns with them)."""
    return _schedstat_s(pid, 0) if row.server == "bare" else cpu_seconds(pid)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _flush(url: str) -> int | None:
    """Empty the Redis database of ``url``; the server's pid when it runs on this machine."""
    client = aioredis.Redis.from_url(url)
    try:
        await client.flushdb()
        pid = int((await client.info("server")).get("process_id", 0))
    finally:
        await client.aclose()
    return pid if is_local_process(pid, "redis") else None


async def _start_server(row: Row, folder: Path, sink_port: int) -> tuple[asyncio.subprocess.Process, int]:
    """Start the row's server under taskset; the process and its port once it answers."""
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{TOKEN_ENV: TOKEN})
    env["PYTHONPATH"] = os.pathsep.join([str(BENCH_DIR), str(row.src)])
    if row.server == "sentinel":
        store = sqlite_url(folder) if row.store == "sqlite" else row.store
        config = write_project(
            folder,
            store=store,
            port=port,
            sink_port=sink_port,
            group_wait_ms=row.group_wait_ms,
            fanout=row.fanout,
        )
        argv = [sys.executable, "-m", "sentinel_hooks", "run", "-c", str(config)]
        probe = f"http://127.0.0.1:{port}/readyz"
    else:
        argv = [
            sys.executable,
            "-m",
            "intakebench.bare",
            "--port",
            str(port),
            "--db",
            str(folder / "bare.db"),
        ]
        probe = ""
    log = (folder / f"{row.server}.log").open("ab")
    proc = await asyncio.create_subprocess_exec(
        "taskset", "-c", str(row.server_core), *argv,
        stdin=asyncio.subprocess.PIPE, stdout=log, stderr=log, env=env, cwd=folder,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.returncode is not None:
                raise RuntimeError(f"{row.server} exited; see {folder}/{row.server}.log")
            with contextlib.suppress(aiohttp.ClientError):
                if not probe:
                    async with session.get(f"http://127.0.0.1:{port}/nothing") as response:
                        return proc, port
                async with session.get(probe) as response:
                    if response.status == 200:
                        return proc, port
            await asyncio.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{row.server} not ready after {READY_TIMEOUT_S:.0f} s; see {folder}")


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def _sink_keys(port: int) -> int:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/count") as response:
        return int((await response.json())["keys"])


def expected_deliveries(row: Row, fired: int) -> int:
    """What the sink should get: two per fire (the page and the fan-out line), or only the pages
    (one per group, or one per fire without grouping), or nothing (the bare handler)."""
    if row.server != "sentinel":
        return 0
    if row.fanout:
        return 2 * fired
    return min(fired, row.alertnames) if row.group_wait_ms is not None else fired


async def _drain(sink_port: int, expected: int) -> None:
    """Wait until the sink holds ``expected`` distinct deliveries (or DRAIN_TIMEOUT_S)."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while time.monotonic() < deadline and await _sink_keys(sink_port) < expected:  # noqa: ASYNC110
        await asyncio.sleep(0.1)  # another process's count: polled


@dataclass(frozen=True)
class Delivered:
    """What the sink got: distinct Idempotency-Keys, repeated ones, callbacks paged, and the
    first page's arrival (wall clock; None without a page)."""

    keys: int
    repeated: int
    pages: int
    first_page_at: float | None


def _sink_counts(path: Path) -> Delivered:
    import json

    records = [json.loads(line) for line in path.read_text().splitlines() if '"key"' in line]
    keys = [record.get("key") for record in records]
    paged = [record for record in records if record.get("page") is True]
    first = min((record["at"] for record in paged), default=None)
    pages = len({record.get("callbackId") for record in paged})
    return Delivered(len(set(keys)), len(keys) - len(set(keys)), pages, first)


async def run_row(row: Row) -> dict[str, Any]:
    """Run ``row`` once in a fresh folder; its numbers."""
    folder = Path(tempfile.mkdtemp(prefix="intake-bench-"))
    sink = await Child.start("sink", ["--out", str(folder / "sink.jsonl")], folder, cpu=row.load_core)
    proc: asyncio.subprocess.Process | None = None
    redis_pid = None
    try:
        sink_port = int((await sink.expect("READY", timeout_s=30))["port"])
        if row.server == "sentinel" and row.store != "sqlite":
            redis_pid = await _flush(row.store)
        proc, port = await _start_server(row, folder, sink_port)
        load_avg = os.getloadavg()[0]
        cpu0, busy0, wall0 = server_cpu_s(row, proc.pid), machine_busy_seconds(), time.monotonic()
        waited0 = runqueue_wait_s(proc.pid)
        ours0 = _ours(proc.pid, sink.pid, redis_pid)
        answers = await offer(
            f"http://127.0.0.1:{port}/hooks/ingest/{WATCHER_ID}",
            {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
            rate=row.rate / row.per,
            duration_s=row.duration_s,
            per=row.per,
            run=f"{time.time():.0f}",
            alertnames=row.alertnames,
        )
        cpu_intake = server_cpu_s(row, proc.pid) - cpu0
        waited = runqueue_wait_s(proc.pid) - waited0
        intake_s = time.monotonic() - answers.first_send  # until the last answer or timeout
        expected = expected_deliveries(row, answers.fired)
        if expected and row.drain:
            await _drain(sink_port, expected)
        cpu = server_cpu_s(row, proc.pid) - cpu0
        wall = time.monotonic() - wall0
        other = (machine_busy_seconds() - busy0 - (_ours(proc.pid, sink.pid, redis_pid) - ours0)) / wall
        await _stop(proc)
        await sink.stop()
        delivered = _sink_counts(folder / "sink.jsonl")
        result = _numbers(row, answers, cpu_intake, cpu, delivered, load_avg, max(0.0, other))
        result["server_busy_during_intake"] = round(cpu_intake / intake_s, 2)
        result["server_cpu_denied_during_intake"] = round(waited / intake_s, 2)
        return result
    finally:
        if proc is not None:
            await _stop(proc)
        sink.kill_now()
        if redis_pid is not None:
            await _flush(row.store)
        shutil.rmtree(folder, ignore_errors=True)


def _ours(server: int, sink: int, redis_pid: int | None) -> float:
    """CPU seconds of the benchmark's processes (this one, the sink, the server, redis-server)."""
    pids = [os.getpid(), server, sink] + ([redis_pid] if redis_pid else [])
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += cpu_seconds(pid)
    return total


def _numbers(
    row: Row,
    answers: Answers,
    cpu_intake: float,
    cpu: float,
    delivered: Delivered,
    load_avg: float,
    other: float,
) -> dict[str, Any]:
    span = max(1e-9, answers.last_answer - answers.first_send) if answers.latencies_s else float("inf")
    accepted = answers.alerts_accepted
    expected = expected_deliveries(row, answers.fired)
    first_page = delivered.first_page_at
    lat = answers.latencies_s
    return {
        "server": row.server,
        "store": row.store if row.server == "sentinel" else "sqlite (bare)",
        "offered_alerts_per_s": row.rate,
        "alerts_per_notification": row.per,
        "alerts_sent": answers.sent * row.per,
        "alerts_absorbed_per_s": round(accepted / span, 1),
        "p50_ms": round(percentile(lat, 0.5) * 1000, 1) if lat else None,
        "p99_ms": round(percentile(lat, 0.99) * 1000, 1) if lat else None,
        "max_ms": round(max(lat) * 1000, 1) if lat else None,
        "errors": answers.errors,
        "fired": answers.fired,
        "cpu_ms_per_alert_intake": round(cpu_intake * 1000 / accepted, 4) if accepted else None,
        "cpu_ms_per_alert": round(cpu * 1000 / accepted, 4) if accepted else None,  # of answered alerts
        "deliveries_missing": max(0, expected - delivered.keys) if row.drain else None,
        "deliveries_repeated": delivered.repeated,
        "pages": delivered.pages,
        "first_page_ms": None if first_page is None else round((first_page - answers.first_send_wall) * 1000),
        "grouped": row.group_wait_ms is not None,
        "load_avg_1m": round(load_avg, 2),
        "other_load_cores": round(other, 2),
        "median_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
    }
