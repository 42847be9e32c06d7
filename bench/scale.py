"""Benchmark: linear scale-out of `sentinel run` replicas on one Redis, each capped in CPU.

    flock /tmp/sentinel-bench.lock python bench/scale.py --cpu-quota 0.5 --rebalance
    python bench/scale.py --quick --no-write   # 1 and 3 replicas, 6,000 watchers, short windows

Each replica is a real `sentinel run` process of one shared project (its own API port and state
directory from the environment); with ``--cpu-quota Q`` each runs in its own cgroup capped at
``Q`` cores (cgroup v1 ``cpu.cfs_quota_us``, or v2 ``cpu.max``; ``scalebench/cgroup.py``), made
for the run and removed after it, however it ends. The load (``--watchers`` http-poll watchers
every ``--interval-ms``, 60,000 @10 s by default: 6,000 polls/s offered) is more than one capped
replica can poll, so the ratio of completed polls/s shows how far throughput scales.

The watched endpoint (and webhook sink) is a bare asyncio HTTP/1.1 server with keep-alive,
pinned to one core (``scalebench/endpoint.py``): it records every poll (time, watcher, replica
from an ``X-Replica`` header the watchers send) so the run can count polls per replica per
watcher and find **double polls**: a watcher polled by two replicas within one interval
(tests/cluster/chaos.py's overlapping polls). Its CPU, Redis's and the load from outside the
benchmark are in every row, so a saturated machine shows. Redis is a ``redis-server`` of its own
(or ``--redis URL``, whose database is flushed).

``--rebalance``, after the last row's window with its replicas still running: a replica
**joins** (one more, capped alike), one **leaves** gracefully (SIGTERM), one is **killed**
(SIGKILL), one after the other. For each: how long until every lease in Redis is held by the
replica rendezvous hashing gives it among the live ones ("leases settled"), and until every
watcher is polled by exactly one replica again ("polls settled": its run of polls by its final
replica began), both against 2 x leaseMs; the watchers moved, the longest gap between two polls
of a watcher, the double polls. A join counts from the new replica's first heartbeat.

Last line: one JSON object. Results go to RESULTS.md between the ``scale-results`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scalebench.cgroup import CpuCgroups
from scalebench.endpoint import parse_dump
from scalebench.polls import by_watcher, double_polls, settled
from watchbench.procfs import cpu_seconds, machine_busy_seconds
from watchbench.report import machine

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
BEGIN = "<!-- scale-results:begin (written by bench/scale.py; edit outside these markers) -->"
END = "<!-- scale-results:end -->"
PREFIX = "sentinel:"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--redis", help="Redis URL (its db is flushed); default: a redis-server of its own")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--watchers", type=int, default=60_000)
    parser.add_argument("--interval-ms", type=int, default=10_000)
    parser.add_argument("--lease-ms", type=int, default=10_000, help="cluster.leaseMs")
    parser.add_argument(
        "--period", type=float, default=0.0, help="seconds between changes of a counter (0: never, no fires)"
    )
    parser.add_argument("--cpu-quota", type=float, help="cap each replica at this many cores (a cgroup each)")
    parser.add_argument("--window", type=float, default=60.0, help="seconds measured per replica count")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds between ready and the window")
    parser.add_argument("--rebalance", action="store_true", help="then join, leave and kill a replica")
    parser.add_argument(
        "--observe", type=float, help="seconds per rebalance event (default 2 x leaseMs + 2 intervals)"
    )
    parser.add_argument("--endpoint-cpu", type=int, help="pin the endpoint to this core (default: the last)")
    parser.add_argument("--scrape-every", type=float, help="scrape /metrics this often (s) in the window")
    parser.add_argument("--quick", action="store_true", help="6,000 watchers, 20 s windows")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # internal: run the endpoint
    return parser.parse_args(argv)


def serve(port: int, period_s: float, cpu: int | None) -> None:
    """The endpoint process: pinned to ``cpu``, until killed."""
    import asyncio

    from scalebench.endpoint import serve as run

    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    asyncio.run(run(port, period_s))


# -- orchestration -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        return bytes(reply.read())


def wait(probe: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if probe():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"scale: timed out after {timeout_s:.0f} s waiting for {what}")


def write_project(folder: Path, args: argparse.Namespace, endpoint: str) -> None:
    (folder / "sentinel.yaml").write_text(
        f"store: {args.redis}\n"
        'server: {host: 127.0.0.1, port: "${env:SCALE_API_PORT}"}\n'
        'allowedHosts: ["127.0.0.1"]\n'
        "notificationPayloadMode: none\n"
        "hookResponseTimeoutMs: 30000\n"
        f"cluster: {{leaseMs: {args.lease_ms}}}\n"
        f"limits: {{maxWatchers: {max(100_000, args.watchers)}}}\n"
        f'targets: {{sink: {{type: webhook, url: "{endpoint}/deliver"}}}}\n'
    )
    (folder / "watchers").mkdir(exist_ok=True)
    lines = ["watchers:"]
    for i in range(args.watchers):
        lines += [
            f"  - id: w{i:05d}",
            "    strategy: http-poll",
            f'    endpoint: "{endpoint}/poll/w{i:05d}"',
            '    headers: {X-Replica: "${env:SCALE_REPLICA}"}',
            f"    intervalMs: {args.interval_ms}",
            "    timeoutMs: 5000",
            "    conditions: [{path: n, op: changed}]",
            "    fire: {eventName: tick}",
            "    deliveryTargets: [sink]",
        ]
    (folder / "watchers" / "all.yaml").write_text("\n".join(lines) + "\n")


def sentinel_command() -> list[str]:
    script = Path(sys.executable).parent / "sentinel"
    return [str(script)] if script.exists() else [sys.executable, "-m", "sentinel_hooks"]


class Replica:
    def __init__(self, name: str, folder: Path, cgroups: CpuCgroups | None, *, row: int) -> None:
        self.name, self.port = name, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        home = folder / name
        home.mkdir(exist_ok=True)
        self.log = home / "service.log"
        self.group = cgroups.make(f"row{row}-{name}") if cgroups else None
        env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
        env.update(SCALE_REPLICA=name, SCALE_API_PORT=str(self.port), SENTINEL_STATE_DIR=str(home))
        self.started = time.time()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [*sentinel_command(), "run", "-c", str(folder / "sentinel.yaml")],
                stdout=log,
                stderr=log,
                env=env,
                preexec_fn=CpuCgroups.joiner(self.group) if self.group else None,
            )

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            last = "\n".join(self.log.read_text(errors="replace").splitlines()[-3:])
            raise SystemExit(f"scale: {self.name} exited ({self.proc.returncode}); its log ends:\n{last}")
        get(self.url + "/readyz", timeout=10)  # 503 (an OSError) until started; saturated: late
        return True

    def metrics(self) -> dict[str, float]:
        """Summed counters this benchmark reads (fires, polls, poll lag sum and count, dropped)."""
        sums = {"fires": 0.0, "polls": 0.0, "lag_sum": 0.0, "lag_count": 0.0, "dropped": 0.0}
        names = {
            "sentinel_fires_total{": "fires",
            "sentinel_polls_total{": "polls",
            "sentinel_poll_lag_seconds_sum": "lag_sum",
            "sentinel_poll_lag_seconds_count": "lag_count",
            "sentinel_observations_dropped_total{": "dropped",
        }
        for attempt in range(10):  # a busy replica's /metrics can fail (its store calls time out)
            try:
                text = get(self.url + "/metrics", timeout=30).decode()
                break
            except OSError:
                if attempt == 9:
                    raise
                time.sleep(0.2)
        for line in text.splitlines():
            for prefix, key in names.items():
                if line.startswith(prefix):
                    sums[key] += float(line.rsplit(" ", 1)[1])
        return sums

    def log_problems(self) -> list[str]:
        """The warning and error lines of the replica's log (JSON lines, as `sentinel run` writes)."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                level = json.loads(line).get("level")
            except (ValueError, AttributeError):
                continue
            if level in ("warning", "error", "critical"):
                found.append(line)
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def replica_id(self, members: list[str]) -> str | None:
        """This process's replica id among the ``replicas`` set's (``<host>-<pid>-<hex>``)."""
        return next((m for m in members if m.rsplit("-", 2)[-2] == str(self.proc.pid)), None)


# -- Redis ---------------------------------------------------------------------------------------


class OwnRedis:
    """A redis-server of the benchmark's own (no persistence), so its CPU is the benchmark's."""

    def __init__(self) -> None:
        server = shutil.which("redis-server")
        if server is None:
            raise SystemExit("scale: no redis-server on PATH; install it or pass --redis URL")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [server, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


def redis_client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def members(client: Any) -> list[str]:
    return [m.decode() for m in client.zrange(f"{PREFIX}replicas", 0, -1)]


def lease_holders(client: Any, watchers: int) -> list[str | None]:
    """Who holds each watcher's lease now (replica id), None when free."""
    holders: list[str | None] = []
    for begin in range(0, watchers, 10_000):
        keys = [f"{PREFIX}lease:w{i:05d}" for i in range(begin, min(watchers, begin + 10_000))]
        holders += [v.rsplit(b":", 1)[0].decode() if v else None for v in client.mget(keys)]
    return holders


# -- one row -------------------------------------------------------------------------------------


class Endpoint:
    def __init__(self, url: str, pid: int) -> None:
        self.url, self.pid = url, pid

    def count(self) -> int:
        return int(json.loads(get(self.url + "/stats"))["polls"])

    def polls(self, start: int) -> tuple[Any, Any, Any, list[str]]:
        """The records from number ``start`` on, and the replica names by number."""
        blob = get(self.url + f"/dump/{start}", timeout=60)
        names = json.loads(get(self.url + "/stats"))["replicas"]
        return (*parse_dump(blob), names)


def measure(
    n: int, args: argparse.Namespace, endpoint: Endpoint, redis_server: int | None, cgroups: CpuCgroups | None
) -> dict[str, Any]:
    interval_s = args.interval_ms / 1000
    with tempfile.TemporaryDirectory(prefix="sentinel-scale-") as tmp:
        folder = Path(tmp)
        write_project(folder, args, endpoint.url)
        with redis_client(args.redis) as client:
            client.flushdb()
        replicas = [Replica(f"r{i + 1}", folder, cgroups, row=n) for i in range(n)]
        everyone = list(replicas)
        events: list[dict[str, Any]] = []
        try:
            for replica in replicas:
                wait(replica.ready, 300, f"{replica.name} to be ready")
            time.sleep(args.settle)  # ownership settles, the startup burst passes
            pids = [r.proc.pid for r in replicas] + [endpoint.pid] + ([redis_server] if redis_server else [])
            load0 = os.getloadavg()[0]
            ours0 = {pid: cpu_seconds(pid) for pid in pids}
            throttle0 = [cgroups.throttling(r.group) for r in replicas if r.group] if cgroups else []
            busy0, t0, wall0 = machine_busy_seconds(), time.monotonic(), time.time()
            before = [r.metrics() for r in replicas]
            mark = endpoint.count()
            scrapes = scrape_through(replicas, args.window, args.scrape_every)
            after = [r.metrics() for r in replicas]
            elapsed, wall1 = time.monotonic() - t0, time.time()
            ours = {pid: cpu_seconds(pid) - ours0[pid] for pid in pids}
            other = max(0.0, machine_busy_seconds() - busy0 - sum(ours.values())) / elapsed
            throttle1 = [cgroups.throttling(r.group) for r in replicas if r.group] if cgroups else []
            load1 = os.getloadavg()[0]
            at, watcher, replica, names = endpoint.polls(mark)
            window = by_watcher(at, watcher, replica, wall0, wall1)
            if args.rebalance and n == max(args.replicas):
                try:
                    events = rebalance(list(replicas), everyone, folder, args, endpoint, cgroups, mark)
                except SystemExit as exc:  # the row's window figures are kept, with why it stopped
                    events = [{"event": "rebalance stopped", "error": str(exc)}]
        finally:
            for one in everyone:
                one.stop()
        problems = [line for one in everyone for line in one.log_problems()]
    for line in problems[:5]:
        print(f"scale: replica log: {line}", file=sys.stderr)
    per_replica = Counter(names[who] for polls in window.values() for _, who in polls)
    polls = sum(per_replica.values())
    doubles = double_polls(window, interval_s)
    fires = sum(a["fires"] - b["fires"] for a, b in zip(after, before, strict=True))
    lag_n = sum(a["lag_count"] - b["lag_count"] for a, b in zip(after, before, strict=True))
    lag_s = sum(a["lag_sum"] - b["lag_sum"] for a, b in zip(after, before, strict=True))
    replica_cpu = sum(ours[r.proc.pid] for r in replicas)
    periods = sum(b["periods"] - a["periods"] for a, b in zip(throttle0, throttle1, strict=True))
    throttled = sum(b["throttled"] - a["throttled"] for a, b in zip(throttle0, throttle1, strict=True))
    return {
        "replicas": n,
        "cpu_quota": args.cpu_quota,
        "polls_per_s": round(polls / elapsed, 1),
        "polls_by_replica": dict(sorted(per_replica.items())),
        "offered_polls_per_s": round(args.watchers * 1000 / args.interval_ms, 1),
        "fires_per_s": round(fires / elapsed, 1),
        "mean_poll_lag_ms": round(1000 * lag_s / lag_n, 1) if lag_n else None,
        "cpu_ms_per_poll": round(1000 * replica_cpu / polls, 3) if polls else None,
        "replica_cpu_cores": round(replica_cpu / elapsed, 2),
        "throttled_share": round(throttled / periods, 2) if periods else None,
        "redis_cpu_cores": round(ours[redis_server] / elapsed, 2) if redis_server else None,
        "endpoint_cpu_cores": round(ours[endpoint.pid] / elapsed, 2),
        "other_load_cores": round(other, 2),
        "load_average": [round(load0, 2), round(load1, 2)],
        "window_s": round(elapsed, 1),
        "double_polls": len(doubles),
        "double_poll_examples": doubles[:3],
        "dropped": sum(a["dropped"] - b["dropped"] for a, b in zip(after, before, strict=True)),
        "scrapes": scrapes,
        "log_problems": len(problems),
        "rebalance": events,
    }


def scrape_through(replicas: list[Replica], window_s: float, every_s: float | None) -> int:
    """Sleep ``window_s``, scraping every replica's /metrics every ``every_s``; the scrapes made."""
    if not every_s:
        time.sleep(window_s)
        return 0
    rounds, start = 0, time.monotonic()
    while (due := start + (rounds + 1) * every_s) < start + window_s - every_s / 2:
        time.sleep(max(0.0, due - time.monotonic()))  # on a fixed cadence, however long a scrape takes
        for replica in replicas:
            replica.metrics()
        rounds += 1
    time.sleep(max(0.0, start + window_s - time.monotonic()))
    return rounds * len(replicas)


# -- rebalancing ---------------------------------------------------------------------------------


def rebalance(
    running: list[Replica],
    everyone: list[Replica],
    folder: Path,
    args: argparse.Namespace,
    endpoint: Endpoint,
    cgroups: CpuCgroups | None,
    mark: int,
) -> list[dict[str, Any]]:
    """Join, graceful leave, kill: one after the other, each followed for ``--observe`` seconds."""
    if len(running) < 2:
        raise SystemExit("scale: --rebalance needs at least 2 replicas in the last row")
    events = []
    with redis_client(args.redis) as client:
        joiner = Replica(f"r{len(everyone) + 1}", folder, cgroups, row=len(running))
        everyone.append(joiner)
        deadline = time.monotonic() + 300
        while joiner.replica_id(members(client)) is None:  # joined: its first heartbeat
            if joiner.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"scale: {joiner.name} did not join; see {joiner.log}")
            time.sleep(0.05)
        t0 = time.time()
        running.append(joiner)
        events.append(follow("join", t0, running, client, args, endpoint, mark))
        events[-1]["startup_s"] = round(t0 - joiner.started, 1)
        wait(joiner.ready, 300, f"{joiner.name} to be ready")

        leaving = running.pop(0)
        t0 = time.time()
        leaving.proc.send_signal(signal.SIGTERM)
        events.append(follow("leave (SIGTERM)", t0, running, client, args, endpoint, mark))
        leaving.stop()

        killed = running.pop(0)
        t0 = time.time()
        killed.proc.kill()
        killed.proc.wait()
        events.append(follow("kill -9", t0, running, client, args, endpoint, mark))
    return events


def follow(
    event: str,
    t0: float,
    live: list[Replica],
    client: Any,
    args: argparse.Namespace,
    endpoint: Endpoint,
    mark: int,
) -> dict[str, Any]:
    """Until ``t0 + observe``: when the leases settled (checked twice a second), then the polls."""
    from sentinel_hooks.cluster.rendezvous import owner

    interval_s = args.interval_ms / 1000
    observe_s = args.observe or 2 * args.lease_ms / 1000 + 2 * interval_s
    ids = sorted(i for r in live if (i := r.replica_id(members(client))))
    if len(ids) != len(live):
        raise SystemExit(f"scale: {event}: {len(ids)} of {len(live)} live replicas in the replicas set")
    expected = [owner(f"w{i:05d}", ids) for i in range(args.watchers)]
    lease_settled: float | None = None
    wrong = args.watchers
    while (now := time.time()) < t0 + observe_s:
        holders = lease_holders(client, args.watchers)
        wrong = sum(1 for held, should in zip(holders, expected, strict=True) if held != should)
        if wrong == 0 and lease_settled is None:
            lease_settled = now - t0
        elif wrong:
            lease_settled = None  # settled only if it stays so
        time.sleep(max(0.0, 0.5 - (time.time() - now)))
    t_end = time.time()
    at, watcher, replica, _names = endpoint.polls(mark)
    polls = by_watcher(at, watcher, replica, t0 - 1.5 * interval_s, t_end)
    seen = settled(polls, args.watchers, t0, t_end, interval_s)
    row = {
        "event": event,
        "lease_ms": args.lease_ms,
        "leases_settled_s": round(lease_settled, 2) if lease_settled is not None else None,
        "leases_wrong_at_end": wrong,
        "polls_settled_s": seen.settle_s,
        "moved": seen.moved,
        "unsettled": seen.unsettled,
        "max_poll_gap_s": seen.max_gap_s,
        "double_polls": seen.doubles,
        "observed_s": round(t_end - t0, 1),
        "load_average": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(row), flush=True)
    return row


# -- results -------------------------------------------------------------------------------------


def ratios(rows: list[dict[str, Any]]) -> None:
    one = next((r for r in rows if r["replicas"] == 1), None)
    for row in rows:
        base = one["polls_per_s"] if one else 0
        row["polls_ratio"] = round(row["polls_per_s"] / base, 2) if base else None
        row["polls_efficiency"] = round(row["polls_per_s"] / (row["replicas"] * base), 2) if base else None


def section(rows: list[dict[str, Any]], args: argparse.Namespace, command: str, cgroups: str) -> str:
    quota = f"each replica capped at {args.cpu_quota:g} CPU ({cgroups})" if args.cpu_quota else "no CPU cap"
    header = (
        "| replicas | polls/s (offered) | ratio to 1 replica | CPU ms per poll | replica CPU cores "
        "(throttled periods) | CPU cores: redis / endpoint | other load (cores) "
        "| load average before → after | double polls |\n|---:|---:|---:|---:|---|---|---:|---|---:|\n"
    )
    body = "".join(
        f"| {r['replicas']} | {r['polls_per_s']:,.1f} ({r['offered_polls_per_s']:,.0f}) "
        f"| {_or(r['polls_ratio'], '-', None)} | {_or(r['cpu_ms_per_poll'], '-', None)} "
        f"| {r['replica_cpu_cores']} ({_share(r['throttled_share'])}) "
        f"| {r['redis_cpu_cores']} / {r['endpoint_cpu_cores']} | {r['other_load_cores']} "
        f"| {r['load_average'][0]} → {r['load_average'][1]} | {r['double_polls']} |\n"
        for r in rows
    )
    stopped = [e["error"] for r in rows for e in r["rebalance"] if "error" in e]
    events = [e for r in rows for e in r["rebalance"] if "error" not in e]
    moves = ""
    if events:
        moves = (
            f"\nRebalancing with {rows[-1]['replicas']} replicas running, `leaseMs` {args.lease_ms} "
            f"(2 x leaseMs = {2 * args.lease_ms / 1000:g} s), each event followed for "
            f"{events[0]['observed_s']:g} s:\n\n"
            "| event | leases settled s | polls settled s | watchers moved | longest gap between polls s "
            "| double polls | load average |\n|---|---:|---:|---:|---:|---:|---:|\n"
            + "".join(
                f"| {e['event']} "
                f"| {_or(e['leases_settled_s'], 'not settled ({} wrong)', e['leases_wrong_at_end'])} "
                f"| {_or(e['polls_settled_s'], 'not settled ({} watchers)', e['unsettled'])} "
                f"| {e['moved']:,} "
                f"| {e['max_poll_gap_s']} | {e['double_polls']} | {e['load_average']} |\n"
                for e in events
            )
        )
    return (
        f"{BEGIN}\n\nMeasured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine()}.\n\n"
        f"Load: {args.watchers:,} http-poll watchers every {args.interval_ms / 1000:g} s on one Redis, "
        + (f"each firing every {args.period:g} s" if args.period else "no fires (the value never changes)")
        + f", `leaseMs` {args.lease_ms}; {quota}; {args.window:g} s measured per replica count after "
        f"{args.settle:g} s settling.\n\n"
        + header
        + body
        + "\nCPU columns are cores kept busy over the window; throttled periods = the share of the "
        "cgroups' 100 ms periods in which a replica used up its quota; other load = cores busy with "
        "processes outside the benchmark (the machine is shared). Double polls: a watcher polled by "
        "two replicas within one interval.\n"
        + moves
        + "".join(f"\nThe rebalancing stopped early: {why}\n" for why in stopped)
        + f"\nReproduce: `flock /tmp/sentinel-bench.lock {command}`.\n\n{END}"
    )


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _or(value: Any, otherwise: str, detail: Any) -> str:
    return otherwise.format(detail) if value is None else str(value)


def write_results(text: str) -> None:
    current = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    if BEGIN in current and END in current:
        before, rest = current.split(BEGIN, 1)
        RESULTS.write_text(before + text + rest.split(END, 1)[1])
    else:
        RESULTS.write_text(
            current.rstrip("\n") + "\n\n## Scale-out (replicas on one Redis)\n\n" + text + "\n"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve is not None:
        serve(args.serve, args.period, args.endpoint_cpu)
        return 0
    if args.quick:
        args.watchers, args.window, args.settle = 6_000, 20.0, 10.0
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # clean up on SIGTERM too
    cgroups = CpuCgroups(args.cpu_quota) if args.cpu_quota else None
    own_redis: OwnRedis | None = None
    child: subprocess.Popen[bytes] | None = None
    try:
        if args.redis is None:
            own_redis = OwnRedis()
            args.redis = own_redis.url
            wait(lambda: redis_client(args.redis).ping(), 30, "redis-server")
        with redis_client(args.redis) as client:
            redis_server = int(client.info("server")["process_id"]) if own_redis else None
        port = free_port()
        cpu = args.endpoint_cpu if args.endpoint_cpu is not None else max(os.sched_getaffinity(0))
        child = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve",
                str(port),
                "--period",
                str(args.period),
                "--endpoint-cpu",
                f"{cpu}",
            ],
            stdout=subprocess.DEVNULL,
        )
        endpoint = Endpoint(f"http://127.0.0.1:{port}", child.pid)
        wait(lambda: get(endpoint.url + "/stats", timeout=2), 30, "the endpoint")
        rows = []
        for n in args.replicas:
            row = measure(n, args, endpoint, redis_server, cgroups)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        if child is not None:
            child.terminate()
            child.wait()
        if own_redis is not None:
            own_redis.stop()
        if cgroups is not None:
            cgroups.close()
    ratios(rows)
    if not args.no_write:
        where = cgroups.describe() if cgroups else ""
        write_results(section(rows, args, "python bench/scale.py " + " ".join(argv or sys.argv[1:]), where))
    print(json.dumps({"benchmark": "scale", "watchers": args.watchers, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
