"""Three `sentinel run` replicas on one Redis, 200 firing watchers, kills and restarts for 60 s:
every fire has exactly one outcome at the sink, no watcher is polled by two replicas in one
interval, and no contract settles more than 2 s after its deadline.

Timeline: SIGKILL replica 1 at 15 s, start it again at 30 s, restart replica 2 gracefully
(SIGTERM, exit 0, start) at 40 s, stop the fires at 60 s, then wait until nothing is pending.
A quarter of the watchers escalate instead of notifying (``fire.escalate``), so their outcome
is the relay's fallback; the rest are fulfilled by the scripted backend's notify.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import sentinel_command
from tests.cluster.chaos import LocalHttp, Poll, Received, instant, judge, overlapping_polls
from tests.service.test_process import Running, free_port
from tests.support import wait_until

WATCHERS = 200
INTERVAL_MS = 2000
PERIOD_S = 30.0  # each watcher's counter changes this often: 200 / 30 = 6.7 fires/s in all
TIMEOUT_MS = 3000  # hookResponseTimeoutMs: the escalating watchers' fallbacks are due this soon
LEASE_MS = 3000
RUN_S = 60.0
LATE_AFTER_S = 2.0

CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: "${{env:CHAOS_API_PORT}}"}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: {timeout_ms}
notificationPayloadMode: none
cluster: {{leaseMs: {lease_ms}}}
targets: {{sink: {{type: webhook, url: "{sink}"}}}}
"""

WATCHER = """\
  - id: {id}
    strategy: http-poll
    endpoint: "{url}"
    headers: {{X-Replica: "${{env:CHAOS_REPLICA}}"}}
    intervalMs: {interval_ms}
    timeoutMs: 2000
    conditions: [{{path: n, op: changed}}]
    fire: {{eventName: tick, escalate: {escalate}}}
    deliveryTargets: [sink]
"""


def write_project(folder: Path, store: str, http: LocalHttp) -> list[str]:
    """sentinel.yaml and one watchers file shared by every replica; the watcher ids."""
    (folder / "sentinel.yaml").write_text(
        CONFIG.format(store=store, timeout_ms=TIMEOUT_MS, lease_ms=LEASE_MS, sink=http.url("/deliver"))
    )
    ids = [f"w{i:03d}" for i in range(WATCHERS)]
    (folder / "watchers").mkdir()
    watchers = "".join(
        WATCHER.format(
            id=watcher_id,
            url=http.url(f"/poll/{watcher_id}"),
            interval_ms=INTERVAL_MS,
            escalate="true" if i % 4 == 0 else "false",
        )
        for i, watcher_id in enumerate(ids)
    )
    (folder / "watchers" / "all.yaml").write_text("watchers:\n" + watchers)
    return ids


class Replica(Running):
    """One `sentinel run` process of the shared project, with its own API port and state dir.

    Each start is a new generation, named ``r1``, ``r1.2``, … in the poll records (the
    ``CHAOS_REPLICA`` variable its watchers send as ``X-Replica``).
    """

    request_timeout_s = 10.0  # three replicas and the load share 2 cores

    def __init__(self, name: str, config: Path) -> None:
        super().__init__(config, free_port())
        self.name = name
        self.home = config.parent / name
        self.home.mkdir()
        self.log = self.home / "service.log"
        self.generation = 0

    @property
    def label(self) -> str:
        return self.name if self.generation <= 1 else f"{self.name}.{self.generation}"

    def spawn(self) -> None:
        self.generation += 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
        env.update(CHAOS_REPLICA=self.label, CHAOS_API_PORT=str(self.port), SENTINEL_STATE_DIR=str(self.home))
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [*sentinel_command(), "run", "-c", str(self.config)], stdout=log, stderr=log, env=env
            )

    def signal(self, sig: int) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=15)

    def contracts(self) -> list[dict[str, Any]]:
        """Every contract in the store, deduped ones included (through this replica's API)."""
        found: list[dict[str, Any]] = []
        cursor = ""
        while True:
            status, page = self.call("GET", f"/api/v1/callbacks?limit=500{cursor}")
            assert 200 == status, page
            found.extend(page["items"])
            if not page["nextCursor"]:
                return found
            cursor = f"&cursor={page['nextCursor']}"


@pytest.fixture
def http() -> Iterator[LocalHttp]:
    server = LocalHttp(period_s=PERIOD_S)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def replicas(tmp_path: Path, redis_url: str, http: LocalHttp) -> Iterator[list[Replica]]:
    write_project(tmp_path, redis_url, http)
    made = [Replica(f"r{i}", tmp_path / "sentinel.yaml") for i in (1, 2, 3)]
    yield made
    for replica in made:
        if replica.proc is not None and replica.proc.poll() is None:
            replica.proc.kill()
            replica.proc.wait()


def report(lines: list[str], capsys: pytest.CaptureFixture[str], record: Any) -> None:
    """Show the counts in the terminal (even without -s) and in the junit report."""
    with capsys.disabled():
        print("\n" + "\n".join(f"chaos: {line}" for line in lines))
    for line in lines:
        name, _, value = line.partition(":")
        record(name.strip().replace(" ", "_"), value.strip())


@pytest.mark.slow
@pytest.mark.redis
@pytest.mark.timeout(180)
def test_three_replicas_under_kills_and_restarts(
    replicas: list[Replica],
    http: LocalHttp,
    capsys: pytest.CaptureFixture[str],
    record_property: Any,
) -> None:
    r1, r2, r3 = replicas
    for replica in replicas:
        replica.spawn()
    for replica in replicas:
        wait_until(replica.ready, timeout_s=30, what=f"{replica.name} to be ready (log: {replica.log})")
    started = time.monotonic()

    def at(second: float) -> None:  # the scenario's timeline, not a synchronisation
        time.sleep(max(0.0, started + second - time.monotonic()))

    at(15)
    r1.signal(signal.SIGKILL)
    at(30)
    r1.spawn()
    wait_until(r1.ready, timeout_s=45, what="r1 to be ready again")
    at(40)
    assert 0 == r2.signal(signal.SIGTERM), r2.log.read_text()[-3000:]
    r2.spawn()
    wait_until(r2.ready, timeout_s=45, what="r2 to be ready again")
    at(RUN_S)
    http.freeze(f"w{i:03d}" for i in range(WATCHERS))
    fires_stopped = time.monotonic()

    def quiet() -> bool:
        """Nothing pending, and no poll that started before the freeze can still fire."""
        status, page = r3.call("GET", "/api/v1/callbacks?state=pending&limit=1")
        return 200 == status and not page["items"] and time.monotonic() - fires_stopped > 3

    wait_until(quiet, timeout_s=30, interval_s=0.25, what="no contract pending")
    contracts = r3.contracts()
    settled = {c["callbackId"] for c in contracts if c["state"] in ("fulfilled", "fallback_sent")}
    wait_until(
        lambda: settled <= {d.callback_id for d in list(http.deliveries)},
        timeout_s=20,
        interval_s=0.25,
        what="an outcome at the sink for every settled contract",
    )
    received: list[Received] = list(http.deliveries)
    polls: list[Poll] = list(http.polls)
    dump = {
        "contracts": contracts,
        "deliveries": [vars(d) for d in received],
        "polls": [vars(p) for p in polls],
    }
    (replicas[0].config.parent / "chaos-data.json").write_text(json.dumps(dump))
    outcomes = judge(contracts, received, late_after_s=LATE_AFTER_S)
    overlaps = overlapping_polls(polls, INTERVAL_MS / 1000)
    lateness = sorted(
        (
            datetime_s(c["settledAt"]) - datetime_s(c["deadline"])
            for c in contracts
            if c["state"] == "fallback_sent" and c.get("settledAt")
        ),
    )
    report(
        [
            f"run: {time.monotonic() - started:.1f} s, {WATCHERS} watchers every {INTERVAL_MS} ms, "
            f"leaseMs {LEASE_MS}, hookResponseTimeoutMs {TIMEOUT_MS}",
            f"polls: {len(polls)} ({dict(sorted(Counter(p.replica for p in polls).items()))})",
            f"fires: {outcomes.contracts} contracts ({outcomes.fulfilled} fulfilled, "
            f"{outcomes.fallback_sent} fallback_sent), {outcomes.deduped} deduped",
            f"deliveries: {len(received)} received, {len({d.key for d in received})} distinct keys, "
            f"{outcomes.redelivered} redelivered with the same key, "
            f"{len(outcomes.late_notify)} notifies also delivered for fallback_sent contracts "
            f"({outcomes.notify_first} of them before the fallback), {outcomes.follow_ups} follow-ups",
            f"fallback lateness: p50 {pct(lateness, 50):.3f} s, max {pct(lateness, 100):.3f} s",
            f"violations: {len(overlaps)} overlapping polls, {outcomes.violations() or 'none'}",
        ],
        capsys,
        record_property,
    )
    assert outcomes.contracts >= WATCHERS * (RUN_S / PERIOD_S) * 0.5, "far fewer fires than the load makes"
    assert outcomes.fulfilled, "no session notified"
    assert outcomes.fallback_sent, "no fallback was due"

    assert {} == outcomes.violations()
    # a notify is held from the relay while sent and refused after the deadline's claim, so a
    # fire never reaches people as both a notify and a fallback
    assert [] == outcomes.late_notify[:10]
    assert outcomes.redelivered <= 3, "the same delivery received again, beyond a SIGKILL mid-send"
    assert [] == overlaps[:20], explain_overlaps(overlaps, polls, replicas, started)


def explain_overlaps(
    overlaps: list[tuple[str, str, str, float]], polls: list[Poll], replicas: list[Replica], started: float
) -> str:
    """When the overlaps happened (seconds into the run) and what the replicas logged about
    their leases: enough to tell a stalled replica from a rebalancing one in a CI log."""
    lines = []
    for watcher_id, _, _, _ in overlaps[:5]:
        times = sorted((p.at - started, p.replica) for p in polls if p.watcher_id == watcher_id)
        lines.append(f"{watcher_id}: " + ", ".join(f"{at:.2f} {replica}" for at, replica in times[:40]))
    for replica in replicas:
        logged = replica.log.read_text(errors="replace").splitlines()
        about = [line for line in logged if "lease" in line or "live replicas" in line or "stall" in line]
        lines.append(f"{replica.name} log ({len(about)} lease lines): " + "\n  ".join(about[-15:]))
    return "\n".join(lines)


def datetime_s(text: str) -> float:
    return instant(text).timestamp()


def pct(values: list[float], p: int) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(len(values) * p / 100))]
