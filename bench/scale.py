"""Benchmark: polls/s and fires/s with 1, 2 and 3 `sentinel run` replicas on one Redis.

    flock /tmp/sentinel-bench.lock python bench/scale.py --redis redis://127.0.0.1:6379/13
    python bench/scale.py --quick --no-write   # 1 and 2 replicas, short windows

Each replica is a real `sentinel run` process of one shared project (its own API port and state
directory from the environment). The watched endpoint and the delivery sink are one aiohttp
process (this script with ``--serve``): ``GET /poll/{id}`` answers a counter that changes every
``--period`` seconds, so each watcher's ``changed`` condition fires that often, and counts the
polls per replica (``X-Replica`` header); ``POST /deliver`` is the webhook target of the scripted
notifies. The load (``--watchers`` at ``--interval-ms``) is meant to be more than one replica can
poll, so adding replicas shows how far throughput scales. Fires are the replicas'
``sentinel_fires_total``, summed. The database given by ``--redis`` is flushed before each run.
With ``--scrape-every S`` each replica's /metrics is scraped every S seconds during the window
(as Prometheus would); every row reports the observations the replicas dropped
(``sentinel_observations_dropped_total``) and the warning and error lines of their logs.
Last line: one JSON object. Results go to RESULTS.md between the ``scale-results`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
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

from watchbench.procfs import cpu_seconds, machine_busy_seconds
from watchbench.report import machine

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
BEGIN = "<!-- scale-results:begin (written by bench/scale.py; edit outside these markers) -->"
END = "<!-- scale-results:end -->"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/13", help="Redis URL (its db is flushed)")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--watchers", type=int, default=600)
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--period", type=float, default=5.0, help="seconds between changes of a counter")
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured per replica count")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds between ready and the window")
    parser.add_argument("--scrape-every", type=float, help="scrape /metrics this often (s) in the window")
    parser.add_argument("--quick", action="store_true", help="1 and 2 replicas, 12 s windows")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # internal: run the endpoint
    return parser.parse_args(argv)


# -- the endpoint process ------------------------------------------------------------------------


def serve(port: int, period_s: float) -> None:
    """The watched endpoint and the sink, until killed."""
    from aiohttp import web

    polls: Counter[str] = Counter()
    deliveries = Counter[str]()

    async def poll(request: web.Request) -> web.Response:
        polls[request.headers.get("X-Replica", "?")] += 1
        phase = (sum(map(ord, request.match_info["watcher_id"])) % 97) / 97 * period_s
        return web.json_response({"n": int((time.time() + phase) // period_s)})

    async def deliver(request: web.Request) -> web.Response:
        deliveries[request.headers.get("Idempotency-Key", "").rsplit(":", 1)[-1]] += 1
        await request.read()
        return web.json_response({"ok": True})

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"polls": dict(polls), "deliveries": dict(deliveries)})

    app = web.Application()
    app.router.add_get("/poll/{watcher_id}", poll)
    app.router.add_post("/deliver", deliver)
    app.router.add_get("/stats", stats)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, backlog=4096)


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
    def __init__(self, name: str, folder: Path) -> None:
        self.name, self.port = name, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        home = folder / name
        home.mkdir(exist_ok=True)
        self.log = home / "service.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
        env.update(SCALE_REPLICA=name, SCALE_API_PORT=str(self.port), SENTINEL_STATE_DIR=str(home))
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [*sentinel_command(), "run", "-c", str(folder / "sentinel.yaml")],
                stdout=log,
                stderr=log,
                env=env,
            )

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise SystemExit(f"scale: {self.name} exited; see {self.log}")
        get(self.url + "/readyz", timeout=2)  # 503 (an OSError) until started
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


def redis_pid(url: str) -> int | None:
    import redis

    with redis.Redis.from_url(url) as client:
        client.flushdb()
        return int(client.info("server")["process_id"])


def measure(n: int, args: argparse.Namespace, endpoint: str, endpoint_pid: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sentinel-scale-") as tmp:
        folder = Path(tmp)
        write_project(folder, args, endpoint)
        server_pid = redis_pid(args.redis)
        replicas = [Replica(f"r{i + 1}", folder) for i in range(n)]
        try:
            for replica in replicas:
                wait(replica.ready, 120, f"{replica.name} to be ready")
            time.sleep(args.settle)  # ownership settles, the startup burst passes
            pids = [r.proc.pid for r in replicas] + [endpoint_pid] + ([server_pid] if server_pid else [])
            ours0 = {pid: cpu_seconds(pid) for pid in pids}
            busy0, t0 = machine_busy_seconds(), time.monotonic()
            before = [r.metrics() for r in replicas]
            polls0 = json.loads(get(endpoint + "/stats"))["polls"]
            scrapes = scrape_through(replicas, args.window, args.scrape_every)
            polls1 = json.loads(get(endpoint + "/stats"))["polls"]
            after = [r.metrics() for r in replicas]
            elapsed = time.monotonic() - t0
            ours = {pid: cpu_seconds(pid) - ours0[pid] for pid in pids}
            other = max(0.0, machine_busy_seconds() - busy0 - sum(ours.values())) / elapsed
        finally:
            for replica in replicas:
                replica.stop()
        problems = [line for replica in replicas for line in replica.log_problems()]
    for line in problems[:5]:
        print(f"scale: replica log: {line}", file=sys.stderr)
    polls = sum(polls1.get(r.name, 0) - polls0.get(r.name, 0) for r in replicas)
    fires = sum(a["fires"] - b["fires"] for a, b in zip(after, before, strict=True))
    lag_n = sum(a["lag_count"] - b["lag_count"] for a, b in zip(after, before, strict=True))
    lag_s = sum(a["lag_sum"] - b["lag_sum"] for a, b in zip(after, before, strict=True))
    return {
        "replicas": n,
        "polls_per_s": round(polls / elapsed, 1),
        "fires_per_s": round(fires / elapsed, 1),
        "offered_polls_per_s": round(args.watchers * 1000 / args.interval_ms, 1),
        "mean_poll_lag_ms": round(1000 * lag_s / lag_n, 1) if lag_n else None,
        "replica_cpu_cores": round(sum(ours[r.proc.pid] for r in replicas) / elapsed, 2),
        "redis_cpu_cores": round(ours.get(server_pid, 0.0) / elapsed, 2) if server_pid else None,
        "endpoint_cpu_cores": round(ours[endpoint_pid] / elapsed, 2),
        "other_load_cores": round(other, 2),
        "window_s": round(elapsed, 1),
        "dropped": sum(a["dropped"] - b["dropped"] for a, b in zip(after, before, strict=True)),
        "scrapes": scrapes,
        "log_problems": len(problems),
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


def efficiency(rows: list[dict[str, Any]]) -> None:
    one = next((r for r in rows if r["replicas"] == 1), None)
    for row in rows:
        for key in ("polls_per_s", "fires_per_s"):
            base = one[key] if one else 0
            row[key.replace("_per_s", "_efficiency")] = (
                round(row[key] / (row["replicas"] * base), 2) if base else None
            )


def section(rows: list[dict[str, Any]], args: argparse.Namespace, command: str) -> str:
    header = (
        "| replicas | polls/s (offered) | fires/s | scaling efficiency polls / fires | mean poll lag ms "
        "| CPU cores: replicas / redis / endpoint | other load (cores) |\n"
        "|---:|---:|---:|---:|---:|---|---:|\n"
    )
    body = "".join(
        f"| {r['replicas']} | {r['polls_per_s']:,.1f} ({r['offered_polls_per_s']:,.0f}) "
        f"| {r['fires_per_s']:,.1f} "
        f"| {r['polls_efficiency']} / {r['fires_efficiency']} | {r['mean_poll_lag_ms']} "
        f"| {r['replica_cpu_cores']} / {r['redis_cpu_cores']} / {r['endpoint_cpu_cores']} "
        f"| {r['other_load_cores']} |\n"
        for r in rows
    )
    return (
        f"{BEGIN}\n\nMeasured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine()}.\n\n"
        f"Load: {args.watchers:,} http-poll watchers every {args.interval_ms} ms, each firing every "
        f"{args.period:g} s (a `changed` condition; scripted notify to a webhook sink), Redis store, "
        f"default `leaseMs` (10 s); {args.window:g} s measured per replica count after "
        f"{args.settle:g} s settling.\n\n"
        + header
        + body
        + "\nScaling efficiency = throughput(n) / (n * throughput(1)). CPU columns are cores kept busy "
        "over the window; other load = cores busy with processes outside the benchmark (the machine "
        "is shared).\n\n"
        f"Reproduce: `flock /tmp/sentinel-bench.lock {command}`.\n\n{END}"
    )


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
        serve(args.serve, args.period)
        return 0
    if args.quick:
        args.replicas, args.window, args.settle = [1, 2], 12.0, 6.0
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the children on SIGTERM too
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--period", str(args.period)],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait(lambda: get(endpoint + "/stats", timeout=2), 30, "the endpoint")
        rows = []
        for n in args.replicas:
            row = measure(n, args, endpoint, child.pid)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        child.terminate()
        child.wait()
    efficiency(rows)
    if not args.no_write:
        write_results(section(rows, args, "python bench/scale.py " + " ".join(argv or sys.argv[1:])))
    print(json.dumps({"benchmark": "scale", "watchers": args.watchers, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
