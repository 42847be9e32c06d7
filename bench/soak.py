"""Retention soak benchmark: a steady fire rate for minutes, the store's size sampled all along.

Each run starts a Sentinel process (``soakbench/service.py``: a whole ``Service`` with eight
``webhook`` watchers and the ``scripted`` model notifying the console) and pushes matching
events at ``--rate`` per second for ``--duration-s``; every fire is a contract, a fan-out and a
notify delivery, a scripted session's transcript entries and checkpoints. Every ``--sample-s``
it measures the store (``soakbench/probes.py``): SQLite's file after a checkpoint and its live
bytes, Redis's ``used_memory`` and key count. With retention on, the pruner keeps settled
callbacks, closed items and idle sessions ``--retention-s`` seconds (instead of days) and runs
every ``--prune-every-s``, and ``observationsPerWatcher`` is 100; off, every limit is 0.

    python bench/soak.py                 SQLite and Redis, retention on and off, 150 s each (~11 min);
                                         then bench/RESULTS.md's "Retention soak" section
    python bench/soak.py --quick         SQLite, retention on, 40 s (RESULTS.md left alone)

Redis runs use a redis-server of their own on a free port (never one that is already running).
The last line printed is one JSON object per run: store, retention, fires/s, size at a third of
the run and at the end, growth per minute over the last two thirds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent / "src")]  # the package is not installed

from soakbench.probes import (  # noqa: E402  (after the path)
    cpu_seconds,
    machine_busy_seconds,
    own_redis,
    redis_size,
    sqlite_size,
)

RESULTS = BENCH / "RESULTS.md"
BEGIN = "<!-- soak-results:begin (written by bench/soak.py; edit outside these markers) -->"
END = "<!-- soak-results:end -->"
WATCHERS = 8
WATCHER = """\
id: {id}
strategy: webhook
conditions: [{{path: status, op: eq, value: down}}]
deliveryTargets: [console]
"""


@dataclass(frozen=True)
class Plan:
    store: str  # sqlite | redis
    retention: bool
    duration_s: float
    rate: float
    retention_s: float
    prune_every_s: float
    sample_s: float

    @property
    def label(self) -> str:
        return f"{self.store}, retention {'on' if self.retention else 'off'}"


@dataclass
class Run:
    plan: Plan
    samples: list[dict[str, Any]] = field(default_factory=list)
    fired: dict[str, Any] = field(default_factory=dict)
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    other_load: float = 0.0
    sentinel_cores: float = 0.0
    redis_version: str | None = None

    @property
    def size_key(self) -> str:
        return "file_bytes" if self.plan.store == "sqlite" else "used_memory"

    def size_at(self, fraction: float) -> int:
        """The store size of the first sample at or after ``fraction`` of the run."""
        wanted = fraction * self.plan.duration_s
        for sample in self.samples:
            if sample["t"] >= wanted - 0.5:
                return int(sample[self.size_key])
        return int(self.samples[-1][self.size_key])

    def summary(self) -> dict[str, Any]:
        third, end = self.size_at(1 / 3), self.size_at(1.0)
        minutes = (self.samples[-1]["t"] - self.plan.duration_s / 3) / 60
        return {
            "store": self.plan.store,
            "retention": self.plan.retention,
            "fires_per_s": round(self.fired.get("fired", 0) / max(1e-9, self.fired.get("seconds", 1)), 1),
            "errors": self.fired.get("errors", 0),
            "size_at_third": third,
            "size_at_end": end,
            "growth_per_min": round((end - third) / minutes) if minutes > 0 else None,
            "contracts_at_end": self.samples[-1]["contracts"],
            "pruned": self.fired.get("pruned", {}),
            "other_load_cores": round(self.other_load, 2),
            "load_before": self.load_before,
            "load_after": self.load_after,
        }


def write_project(folder: Path, store: str, *, retention: bool) -> Path:
    """sentinel.yaml and the watchers; with retention off every limit is 0."""
    (folder / "watchers").mkdir(parents=True)
    for i in range(WATCHERS):
        (folder / "watchers" / f"w{i}.yaml").write_text(WATCHER.format(id=f"w{i}"))
    keep = 100 if retention else 0
    lines = [
        f"store: {json.dumps(store)}",
        'server: {host: "127.0.0.1", port: 0}',
        "models: {rules: {type: scripted}}",
        "targets: {console: {type: console}}",
        "retention: {callbacksDays: 0, inboxClosedDays: 0, transcriptsDays: 0, "
        f"observationsPerWatcher: {keep}}}",
    ]
    path = folder / "sentinel.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@contextlib.contextmanager
def store_for(plan: Plan, folder: Path) -> Iterator[tuple[str, int | None, str | None]]:
    """The store URL, the Redis server's pid and version (None for SQLite)."""
    if plan.store == "sqlite":
        yield f"sqlite:///{folder / 'state.db'}", None, None
        return
    (folder / "redis").mkdir()
    with own_redis(folder / "redis") as (url, pid, version):
        yield url, pid, version


async def _expect(proc: asyncio.subprocess.Process, tag: str, timeout_s: float, log: Path) -> dict[str, Any]:
    assert proc.stdout is not None
    async with asyncio.timeout(timeout_s):
        while True:
            line = await proc.stdout.readline()
            if not line:
                raise SystemExit(f"soak bench: the service exited before {tag}; see {log}")
            text = line.decode(errors="replace").strip()
            if text.startswith(tag + " "):
                data: dict[str, Any] = json.loads(text[len(tag) + 1 :])
                return data


def _sample(plan: Plan, url: str, folder: Path) -> dict[str, Any]:
    return sqlite_size(folder / "state.db") if plan.store == "sqlite" else redis_size(url)


async def run(plan: Plan, *, keep: bool) -> Run:
    """One run in a fresh folder (removed afterwards unless ``keep``)."""
    folder = Path(tempfile.mkdtemp(prefix="soak-bench-"))
    result = Run(plan)
    try:
        with store_for(plan, folder) as (url, redis_pid, version):
            result.redis_version = version
            await _measure(plan, folder, url, redis_pid, result)
    finally:
        if keep:
            print(f"soak bench: the run's files are in {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return result


async def _measure(plan: Plan, folder: Path, url: str, redis_pid: int | None, result: Run) -> None:
    config = write_project(folder, url, retention=plan.retention)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BENCH), str(BENCH.parent / "src")]))
    log = folder / "service.log"
    args = ["--rate", str(plan.rate), "--prune-every-s", str(plan.prune_every_s)]
    args += ["--retention-s", str(plan.retention_s if plan.retention else 0)]
    with log.open("ab") as log_file:
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "soakbench.service", "-c", str(config), *args),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=log_file,
            env=env,
        )
    try:
        await _expect(proc, "READY", 60, log)
        assert proc.stdin is not None
        result.load_before = os.getloadavg()
        busy, wall = machine_busy_seconds(), time.monotonic()
        ours = _our_cpu(proc.pid, redis_pid)
        sentinel_cpu = cpu_seconds(proc.pid)
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        start = time.monotonic()
        while (elapsed := time.monotonic() - start) < plan.duration_s:
            await asyncio.sleep(min(plan.sample_s, plan.duration_s - elapsed))
            sample = await asyncio.to_thread(_sample, plan, url, folder)
            sample["t"] = round(time.monotonic() - start, 1)
            result.samples.append(sample)
            print(f"soak bench: {plan.label}: {json.dumps(sample)}", file=sys.stderr, flush=True)
        seconds = time.monotonic() - wall
        result.sentinel_cores = (cpu_seconds(proc.pid) - sentinel_cpu) / seconds
        ours = _our_cpu(proc.pid, redis_pid) - ours
        result.other_load = max(0.0, (machine_busy_seconds() - busy - ours) / seconds)
        result.load_after = os.getloadavg()
        proc.stdin.close()
        result.fired = await _expect(proc, "FIRED", 120, log)
        await asyncio.wait_for(proc.wait(), timeout=30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _our_cpu(sentinel_pid: int, redis_pid: int | None) -> float:
    """CPU seconds of this process, the Sentinel process and our redis-server (other load is the rest)."""
    return cpu_seconds(os.getpid()) + cpu_seconds(sentinel_pid) + (cpu_seconds(redis_pid) if redis_pid else 0)


# -- RESULTS.md ---------------------------------------------------------------------------------


def _mb(value: int) -> str:
    return f"{value / 1e6:,.1f}"


def _table(runs: list[Run]) -> list[str]:
    columns = [
        "store",
        "retention",
        "fires/s",
        "size at 1/3 of the run MB",
        "size at the end MB",
        "growth over the last 2/3 MB/min",
        "contracts in the store at the end",
        "rows pruned",
        "Sentinel CPU cores",
        "load average (1 min) before → after",
        "other load (cores)",
    ]
    rows = ["| " + " | ".join(columns) + " |", "|---|---|---:|---:|---:|---:|---:|---|---:|---|---:|"]
    for r in runs:
        s = r.summary()
        pruned = ", ".join(f"{k} {int(v):,}" for k, v in sorted(s["pruned"].items()) if v) or "-"
        growth = (s["growth_per_min"] or 0) / 1e6
        rows.append(
            f"| {r.plan.store} | {'on' if r.plan.retention else 'off'} | {s['fires_per_s']} "
            f"| {_mb(s['size_at_third'])} | {_mb(s['size_at_end'])} | {growth:+,.2f} "
            f"| {s['contracts_at_end']:,} | {pruned} | {r.sentinel_cores:.2f} "
            f"| {s['load_before'][0]:.2f} → {s['load_after'][0]:.2f} | {s['other_load_cores']} |"
        )
    return rows


def _series(runs: list[Run]) -> list[str]:
    """Size over time, one column per run (SQLite: file after checkpoint / live bytes; Redis:
    used_memory / keys)."""
    head = "| t s | " + " | ".join(r.plan.label for r in runs) + " |"
    rows = [head, "|---:|" + "---:|" * len(runs)]
    for i in range(max(len(r.samples) for r in runs)):
        cells = []
        for r in runs:
            if i >= len(r.samples):
                cells.append("")
                continue
            s = r.samples[i]
            if r.plan.store == "sqlite":
                cells.append(
                    f"{_mb(s['file_bytes'])} / {_mb(s['live_bytes'])} MB, {s['contracts']:,} contracts"
                )
            else:
                cells.append(f"{_mb(s['used_memory'])} MB, {s['keys']:,} keys, {s['contracts']:,} contracts")
        rows.append(
            f"| {runs[0].samples[min(i, len(runs[0].samples) - 1)]['t']:.0f} | " + " | ".join(cells) + " |"
        )
    return rows


def update_results(runs: list[Run], args: argparse.Namespace) -> None:
    """Replace the text between the markers in RESULTS.md (append the section when missing)."""
    from sentinel_hooks import __version__

    version = next((r.redis_version for r in runs if r.redis_version), None)
    body = [
        BEGIN,
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} CPU, Linux "
        f"{platform.release()}, Python {platform.python_version()}, Redis {version}, "
        f"sentinel-hooks {__version__}. "
        f"{args.rate:g} events/s for {args.duration_s:g} s per run, each a fire; retention "
        f"{args.retention_s:g} s (callbacks, closed items, idle sessions) and `observationsPerWatcher: 100`, "
        f"the pruner every {args.prune_every_s:g} s; off: every limit 0.",
        "",
        *_table(runs),
        "",
        "Size over time (SQLite: file after a checkpoint / live pages; Redis: `used_memory`, keys):",
        "",
        *_series(runs),
        "",
        f"Reproduce: `python bench/soak.py --duration-s {args.duration_s:g} --rate {args.rate:g}` "
        "(needs the redis-server binary; starts its own on a free port).",
        "",
        END,
    ]
    text = RESULTS.read_text() if RESULTS.exists() else ""
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
        text = before + "\n".join(body) + after
    else:
        text = text.rstrip("\n") + "\n\n## Retention soak (`bench/soak.py`)\n\n" + "\n".join(body) + "\n"
    RESULTS.write_text(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="SQLite, retention on, 40 s")
    parser.add_argument("--stores", default="sqlite,redis", help="comma-separated: sqlite, redis")
    parser.add_argument("--duration-s", type=float, default=None, help="per run (default 150, quick 40)")
    parser.add_argument("--rate", type=float, default=20.0, help="events (fires) per second (default 20)")
    parser.add_argument("--retention-s", type=float, default=30.0, help="retention, seconds (default 30)")
    parser.add_argument("--prune-every-s", type=float, default=5.0, help="between pruner passes (default 5)")
    parser.add_argument("--sample-s", type=float, default=10.0, help="between size samples (default 10)")
    parser.add_argument("--keep", action="store_true", help="keep each run's folder")
    args = parser.parse_args(argv)
    args.duration_s = args.duration_s or (40.0 if args.quick else 150.0)
    return args


def plans(args: argparse.Namespace) -> list[Plan]:
    stores = ["sqlite"] if args.quick else [s.strip() for s in args.stores.split(",") if s.strip()]
    modes = [True] if args.quick else [True, False]
    common = {
        "duration_s": args.duration_s,
        "rate": args.rate,
        "retention_s": args.retention_s,
        "prune_every_s": args.prune_every_s,
        "sample_s": args.sample_s,
    }
    return [Plan(store=store, retention=mode, **common) for store in stores for mode in modes]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs: list[Run] = []
    for plan in plans(args):
        print(
            f"soak bench: {plan.label}, {plan.duration_s:g} s at {plan.rate:g}/s …",
            file=sys.stderr,
            flush=True,
        )
        runs.append(asyncio.run(run(plan, keep=args.keep)))
    if not args.quick and len(runs) == 4:
        update_results(runs, args)
        print(f"soak bench: updated {RESULTS}", file=sys.stderr)
    print(json.dumps([r.summary() for r in runs]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
