"""Benchmark: launch of ``sentinel run`` to its first poll and to every watcher polled once.

    python bench/startup.py --quick     # 1,000 watchers on SQLite, 2 s interval; last line is JSON
    python bench/startup.py             # 1k / 10k / 100k on SQLite and Redis; updates RESULTS.md
    python bench/startup.py --compare-src /work/main/src --sizes 10000 --no-write   # before/after

Each run execs ``python -m sentinel_hooks run -c sentinel.yaml`` as a real subprocess (the
``--src`` folder on its PYTHONPATH) on a project of N http-poll watchers (``watchbench.project``)
against the local aiohttp endpoint of ``bench/watchers.py`` (``watchbench.endpoint``), which
records when each watcher's request arrives. From the instant just before the exec:

* *ready* — the service printed ``sentinel: listening on`` (start finished, the API is up);
* *first poll* — the endpoint's first arrival;
* *all polled* — the arrival that completed the set of N distinct watchers.

The interval is 10 s up to 10,000 watchers and 60 s above (``interval_for``). A *cold* run starts
on an empty store; a *warm* run restarts the service on the store the cold run left (states and
last observations to restore), which is what an operator's restart looks like. With Redis, the
bench starts a redis-server of its own on a free port (never 6379) and flushes it before a cold
run. The floor is ``watchbench.bare_once``: a minimal Python process that reads the same
watchers file (PyYAML's C loader) and polls each URL once, 256 at a time. ``load_config`` alone
(imports apart) is timed in a separate process, so its share of the launch is visible.

Targets (issue 18.2): first poll ≤ 1 s, and every watcher polled within its first interval + 3 s
at 10,000 (10 s interval: 13 s), within 60 s + 30 s at 100,000. The Sentinel process is pinned
to one core and the endpoint to the other; CPU seconds are the Sentinel process's until every
watcher was polled.

Children read their bytecode from a cache, as an installed package does (``watchbench.bytecode``):
each side (every ``--src``, and the floor) gets its own ``PYTHONPYCACHEPREFIX``, filled by one
unrecorded launch per side and store on a one-watcher project before the first recorded one.
``--no-bytecode-cache`` keeps the caller's environment (on a machine that sets
``PYTHONDONTWRITEBYTECODE``, every launch then compiles every module it imports: ~0.3 s more).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import aiohttp  # noqa: E402  (after the path)
from soakbench.probes import own_redis  # noqa: E402
from watchbench.bytecode import child_env  # noqa: E402
from watchbench.procfs import cpu_plan, cpu_seconds, rss_kib  # noqa: E402
from watchbench.project import write_project  # noqa: E402
from watchbench.report import machine  # noqa: E402
from watchbench.spawn import Child  # noqa: E402

RESULTS = BENCH / "RESULTS.md"
SRC = BENCH.parent / "src"
BEGIN = "<!-- startup-results:begin (written by bench/startup.py; edit outside these markers) -->"
END = "<!-- startup-results:end -->"
FULL_SIZES = [1_000, 10_000, 100_000]
READY_LINE = "sentinel: listening on"
ARRIVALS_EVERY_S = 0.25
FIRST_POLL_TARGET_S = 1.0
SUMMARY_KEYS = (
    "n",
    "store",
    "code",
    "run",
    "first_s",
    "all_s",
    "ready_s",
    "polled",
    "cpu_s",
    "load_config_s",
)

LOAD_CONFIG = """
import json, sys, time
from pathlib import Path
began = time.monotonic()
from sentinel_hooks.config.loader import load_config
imported = time.monotonic()
cpu = time.process_time()
config = load_config(Path(sys.argv[1]))
print(json.dumps({"import_s": imported - began, "load_s": time.monotonic() - imported,
                  "load_cpu_s": time.process_time() - cpu, "watchers": len(config.watchers)}))
"""


def interval_for(n: int) -> float:
    """The watchers' interval: 10 s up to 10,000 watchers, 60 s above (issue 18's targets)."""
    return 10.0 if n <= 10_000 else 60.0


def all_polled_target_s(n: int, interval_s: float) -> float | None:
    """The bound on launch → every watcher polled once, where the issue sets one."""
    if n >= 100_000:
        return interval_s + 30.0
    if n >= 10_000:
        return interval_s + 3.0
    return None


def loadavg() -> str:
    """The 1-minute load average now."""
    return Path("/proc/loadavg").read_text().split()[0]


@dataclass
class Row:
    """One measured launch."""

    n: int
    store: str
    code: str  # after | before | bare
    run: str  # cold | warm | floor
    interval_s: float
    ready_s: float | None = None
    first_s: float | None = None
    all_s: float | None = None
    polled: int = 0
    cpu_s: float | None = None
    first_cpu_s: float | None = None  # CPU seconds when the first poll was seen (±0.25 s of reading)
    rss_mib: float | None = None
    load_config_s: float | None = None
    load_config_cpu_s: float | None = None
    import_s: float | None = None
    load_start: str = ""
    load_end: str = ""
    notes: list[str] = field(default_factory=list)

    def targets(self) -> dict[str, bool | None]:
        """Which targets this launch met (None: none set for this N)."""
        bound = all_polled_target_s(self.n, self.interval_s) if self.code != "bare" else None
        if bound is None:
            return {"first_poll_le_1s": None, "all_polled_in_bound": None}
        first_ok = None if self.n < 10_000 else self.first_s is not None and self.first_s <= 1.0
        all_ok = None if bound is None else self.all_s is not None and self.all_s <= bound
        return {"first_poll_le_1s": first_ok, "all_polled_in_bound": all_ok}


class Arrivals:
    """Reads the endpoint's arrivals incrementally: each watcher's first arrival after a launch."""

    def __init__(self, session: aiohttp.ClientSession, port: int, since: float) -> None:
        self._session = session
        self._url = f"http://127.0.0.1:{port}/_bench/arrivals"
        self._since = since
        self.first: dict[int, float] = {}

    async def read(self) -> None:
        async with self._session.get(self._url, params={"since": repr(self._since)}) as response:
            found = await response.json()
        for index, at in zip(found["ids"], found["at"], strict=True):
            self.first.setdefault(index, at)
            self._since = max(self._since, at)

    async def until(
        self, n: int, deadline: float, process: asyncio.subprocess.Process | None, row: Row | None = None
    ) -> None:
        """Read until ``n`` distinct watchers arrived, ``deadline`` passed or ``process`` exited;
        ``row.first_cpu_s`` = the process's CPU seconds when the first arrival was seen."""
        while time.time() < deadline:
            await self.read()
            if row is not None and process is not None and row.first_cpu_s is None and self.first:
                with contextlib.suppress(FileNotFoundError):
                    row.first_cpu_s = cpu_seconds(process.pid)
            if len(self.first) >= n:
                return
            if process is not None and process.returncode is not None:
                await self.read()
                return
            await asyncio.sleep(ARRIVALS_EVERY_S)


async def clear(session: aiohttp.ClientSession, port: int) -> None:
    async with session.post(f"http://127.0.0.1:{port}/_bench/clear") as response:
        response.raise_for_status()


def pinned(cpu: int | None) -> Any:
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


async def time_load_config(src: Path, config: Path, pycache: Path | None) -> dict[str, float]:
    """Imports and ``load_config`` of the project, in a fresh process (wall and CPU seconds)."""
    env = child_env(src, pycache)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LOAD_CONFIG, str(config), env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"load_config of {config} failed ({proc.returncode})")
    result: dict[str, float] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def launch_sentinel(
    row: Row,
    *,
    src: Path,
    project: Path,
    port: int,
    session: aiohttp.ClientSession,
    cpu: int | None,
    pycache: Path | None,
) -> None:
    """Exec ``sentinel run``, watch its stderr and the endpoint until every watcher was polled."""
    await clear(session, port)
    env = child_env(src, pycache)
    log = (project / f"sentinel-{row.code}-{row.run}.log").open("wb")
    row.load_start = loadavg()
    launched = time.time()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sentinel_hooks",
        "run",
        "-c",
        str(project / "sentinel.yaml"),
        cwd=project,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=pinned(cpu),
    )

    async def watch_stderr() -> None:
        assert proc.stderr is not None
        while line := await proc.stderr.readline():
            if row.ready_s is None and READY_LINE.encode() in line:
                row.ready_s = time.time() - launched
            log.write(line)

    reader = asyncio.create_task(watch_stderr())
    arrivals = Arrivals(session, port, launched)
    deadline = launched + 3 * row.interval_s + 60 + row.n * 0.005
    try:
        await arrivals.until(row.n, deadline, proc, row)
        if proc.returncode is None:
            row.cpu_s = cpu_seconds(proc.pid)
            row.rss_mib = rss_kib(proc.pid) / 1024
    finally:
        row.load_end = loadavg()
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(60):
                    await proc.wait()
            except TimeoutError:
                row.notes.append("killed: no graceful stop within 60 s")
                proc.kill()
                await proc.wait()
        await reader
        log.close()
    if proc.returncode not in (0, -signal.SIGTERM):
        row.notes.append(f"exit {proc.returncode} (log {log.name})")
    firsts = arrivals.first.values()
    row.polled = len(arrivals.first)
    row.first_s = min(firsts) - launched if firsts else None
    row.all_s = max(firsts) - launched if row.polled >= row.n else None


async def launch_bare(
    row: Row,
    *,
    project: Path,
    port: int,
    session: aiohttp.ClientSession,
    cpu: int | None,
    pycache: Path | None,
) -> None:
    """Exec the floor process and time it like ``sentinel run``."""
    await clear(session, port)
    env = child_env(BENCH, pycache)
    row.load_start = loadavg()
    launched = time.time()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "watchbench.bare_once",
        "--watchers",
        str(project / "watchers" / "bench.yaml"),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        preexec_fn=pinned(cpu),
    )
    arrivals = Arrivals(session, port, launched)
    await arrivals.until(row.n, launched + 120 + row.n * 0.002, proc)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await proc.wait()
    row.load_end = loadavg()
    firsts = arrivals.first.values()
    row.polled = len(arrivals.first)
    row.first_s = min(firsts) - launched if firsts else None
    row.all_s = max(firsts) - launched if row.polled >= row.n else None


@dataclass(frozen=True)
class Plan:
    sizes: list[int]
    stores: list[str]
    codes: dict[str, Path]  # label → src folder
    warm: bool
    interval_s: float | None = None
    bytecode_cache: bool = True  # each side reads cached bytecode, as an installed package does


async def run_all(plan: Plan, workdir: Path, report: Any) -> list[Row]:
    """Every (N, store, code, cold/warm) launch and the floor per N; ``report(row)`` after each."""
    endpoint_cpu, sentinel_cpu = cpu_plan()
    rows: list[Row] = []
    endpoint = await Child.start("endpoint", ["--cpu", str(endpoint_cpu), "--max-s", "86400"], workdir)

    def pycache(side: str) -> Path | None:
        return workdir / f"pycache-{side}" if plan.bytecode_cache else None

    try:
        port = int((await endpoint.ready(30))["port"])
        with contextlib.ExitStack() as stack:
            redis_url = None
            if "redis" in plan.stores:
                (workdir / "redis").mkdir()
                redis_url, _pid, _version = stack.enter_context(own_redis(workdir / "redis"))
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
                if plan.bytecode_cache:
                    await fill_bytecode_caches(plan, workdir / "warm-up", port, session, redis_url, pycache)
                for n in plan.sizes:
                    interval_s = plan.interval_s or interval_for(n)
                    for store in plan.stores:
                        for code, src in plan.codes.items():
                            project = workdir / f"{n}-{store}-{code}"
                            url = "sqlite:///state.db" if store == "sqlite" else str(redis_url)
                            interval_ms = int(interval_s * 1000)
                            write_project(project, n=n, port=port, interval_ms=interval_ms, store=url)
                            timing = await time_load_config(src, project / "sentinel.yaml", pycache(code))
                            for run in ["cold", "warm"] if plan.warm else ["cold"]:
                                if run == "cold" and redis_url is not None and store == "redis":
                                    flush(redis_url)
                                row = Row(n=n, store=store, code=code, run=run, interval_s=interval_s)
                                row.load_config_s = timing["load_s"]
                                row.load_config_cpu_s = timing["load_cpu_s"]
                                row.import_s = timing["import_s"]
                                await launch_sentinel(
                                    row,
                                    src=src,
                                    project=project,
                                    port=port,
                                    session=session,
                                    cpu=sentinel_cpu,
                                    pycache=pycache(code),
                                )
                                rows.append(row)
                                report(row)
                    row = Row(n=n, store="-", code="bare", run="floor", interval_s=interval_s)
                    await launch_bare(
                        row,
                        project=project,
                        port=port,
                        session=session,
                        cpu=sentinel_cpu,
                        pycache=pycache("bare"),
                    )
                    rows.append(row)
                    report(row)
    finally:
        await endpoint.stop()
    return rows


async def fill_bytecode_caches(
    plan: Plan, root: Path, port: int, session: aiohttp.ClientSession, redis_url: str | None, pycache: Any
) -> None:
    """One unrecorded launch per side and store on a one-watcher project (a Redis store imports
    modules SQLite does not), one ``load_config`` timing and one floor run."""
    for store in plan.stores:
        for code, src in plan.codes.items():
            project = root / f"{store}-{code}"
            url = "sqlite:///state.db" if store == "sqlite" else str(redis_url)
            write_project(project, n=1, port=port, interval_ms=1000, store=url)
            row = Row(n=1, store=store, code=code, run="warm-up", interval_s=1.0)
            await launch_sentinel(
                row, src=src, project=project, port=port, session=session, cpu=None, pycache=pycache(code)
            )
            await time_load_config(src, project / "sentinel.yaml", pycache(code))
    project = root / "bare"
    write_project(project, n=1, port=port, interval_ms=1000)
    row = Row(n=1, store="-", code="bare", run="warm-up", interval_s=1.0)
    await launch_bare(row, project=project, port=port, session=session, cpu=None, pycache=pycache("bare"))


def flush(url: str) -> None:
    import redis

    with redis.Redis.from_url(url) as client:
        client.flushdb()


# -- RESULTS.md ----------------------------------------------------------------------------------


def _s(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ok(flag: bool | None) -> str:
    return "-" if flag is None else ("met" if flag else "**NOT met**")


def table(rows: list[Row]) -> str:
    lines = [
        "| N | store | code | run | interval s | load_config s (CPU) | ready s | first poll s | all polled s "
        "| polled | CPU s at first poll / all polled | RSS MiB | first ≤ 1 s | all in bound "
        "| load avg start / end |",
        "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|:-:|:-:|---|",
    ]
    for r in rows:
        met = r.targets()
        load = "-" if r.load_config_s is None else f"{r.load_config_s:.2f} ({r.load_config_cpu_s:.2f})"
        lines.append(
            f"| {r.n:,} | {r.store} | {r.code} | {r.run} | {r.interval_s:g} | {load} | {_s(r.ready_s)} "
            f"| {_s(r.first_s)} | {_s(r.all_s)} | {r.polled:,} | {_s(r.first_cpu_s)} / {_s(r.cpu_s)} "
            f"| {_s(r.rss_mib, 0)} "
            f"| {_ok(met['first_poll_le_1s'])} | {_ok(met['all_polled_in_bound'])} "
            f"| {r.load_start} / {r.load_end} |"
        )
    return "\n".join(lines)


LEGEND = """\
Seconds are from the instant before the exec. *load_config* = the project's `load_config` alone
in a separate process (its imports apart), wall (CPU). *ready* = `sentinel run` printed its
listening line. *first poll* / *all polled* = the endpoint's first arrival / the arrival that
completed the N distinct watchers. *CPU s* = the Sentinel process's CPU seconds (all threads,
/proc) when its first poll was seen (read every 0.25 s) and when all were polled: on a shared
machine these, not the wall times, compare two codes. *RSS* = when all were polled.
*cold* = empty store; *warm* = a restart on the store the cold run left. *bare* = a minimal
Python process that reads the same watchers file (PyYAML's C loader) and polls each URL once,
256 at a time: the floor. *load avg* = /proc/loadavg (1 min) at launch and at the end."""


def verdict(rows: list[Row]) -> str:
    lines = ["Targets (issue 18.2; `after` rows, judged at 10,000 and 100,000):"]
    for r in rows:
        if r.code != "after" or r.n < 10_000:
            continue
        met = r.targets()
        bound = all_polled_target_s(r.n, r.interval_s)
        lines.append(
            f"- {r.n:,} {r.store} {r.run}: first poll ≤ 1 s {_ok(met['first_poll_le_1s'])} "
            f"({_s(r.first_s)} s); all polled ≤ {bound:g} s {_ok(met['all_polled_in_bound'])} "
            f"({_s(r.all_s)} s)"
        )
    return "\n".join(lines) if len(lines) > 1 else "No row at 10,000 or 100,000 watchers: no target judged."


def section(rows: list[Row], command: str) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n\n".join(
        [
            BEGIN,
            f"Measured {now} on {machine()}.",
            table(rows),
            LEGEND,
            verdict(rows),
            f"Reproduce: `{command}` (starts its own endpoint and redis-server; "
            "Sentinel pinned to one core).",
            END,
        ]
    )


def write_results(generated: str) -> None:
    text = RESULTS.read_text()
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        RESULTS.write_text(before + generated + rest.split(END, 1)[1])
    else:
        intro = "## Start-up (`bench/startup.py`)\n\n"
        RESULTS.write_text(text.rstrip("\n") + "\n\n" + intro + generated + "\n")


# -- entry -----------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="1,000 watchers, SQLite, 2 s interval, cold")
    parser.add_argument("--sizes", type=int, nargs="+", help="watcher counts (default 1000 10000 100000)")
    parser.add_argument("--stores", nargs="+", choices=["sqlite", "redis"], help="default: both")
    parser.add_argument("--src", type=Path, default=SRC, help="the Sentinel source measured (`after`)")
    parser.add_argument("--compare-src", type=Path, help="also measure this source as `before` (e.g. main's)")
    parser.add_argument("--interval-s", type=float, help="override the interval (default by N)")
    parser.add_argument("--no-warm", action="store_true", help="cold starts only")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="children compile what they import, as the caller's environment says (see watchbench.bytecode)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("redis-server") is None and not args.quick:
        print("bench: redis-server is not installed", file=sys.stderr)
        return 2
    codes = {"after": args.src.resolve()}
    if args.compare_src:
        codes = {"before": args.compare_src.resolve(), **codes}
    plan = Plan(
        sizes=args.sizes or ([1_000] if args.quick else FULL_SIZES),
        stores=args.stores or (["sqlite"] if args.quick else ["sqlite", "redis"]),
        codes=codes,
        warm=not (args.quick or args.no_warm),
        interval_s=args.interval_s or (2.0 if args.quick else None),
        bytecode_cache=not args.no_bytecode_cache,
    )

    def report(row: Row) -> None:
        if not args.quick:
            print(json.dumps(asdict(row)), flush=True)

    with tempfile.TemporaryDirectory(prefix="sentinel-startup-") as workdir:
        rows = asyncio.run(run_all(plan, Path(workdir), report))
    if not (args.quick or args.no_write):
        command = "python bench/startup.py"
        command += f" --sizes {' '.join(map(str, plan.sizes))}" if args.sizes else ""
        command += f" --compare-src {args.compare_src}" if args.compare_src else ""
        write_results(section(rows, command))
        print(f"bench: wrote {RESULTS}", file=sys.stderr)
    summary = {
        "bench": "startup",
        "rows": [{k: v for k, v in asdict(r).items() if k in SUMMARY_KEYS} for r in rows],
    }
    print(json.dumps(summary), flush=True)
    return 0 if all(r.polled == r.n for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
