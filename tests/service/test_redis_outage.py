"""A Redis outage under `sentinel run`: a short log whatever its length and the number of watchers,
and the service comes back by itself, doing what fell due meanwhile.

Real parts: the test's own redis-server (AOF on), stopped for 10 s and started again on the same
port with the same data; `sentinel run` as a process; a local HTTP endpoint the watchers poll and
a webhook sink (``tests.cluster.chaos.LocalHttp``).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import sentinel_command
from tests.cluster.chaos import LocalHttp
from tests.redis_server import RestartableRedis
from tests.service.test_process import Running, free_port
from tests.support import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.redis]

WATCHERS = 30
OUTAGE_S = 10.0
# Warnings and errors while Redis is away: about one per loop that talks to it (the outbox, the
# relay, the session queue's two loops, the subscription, the heartbeat, the lease keeper, the
# watchers' writes and lease checks, the leases lost), whatever the outage's length or the number
# of watchers. Before: 164 lines in 20 s with 5 watchers, one more per watcher.
MAX_OUTAGE_LINES = 16

CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: {port}}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 2000
notificationPayloadMode: none
cluster: {{leaseMs: 3000}}
targets: {{sink: {{type: webhook, url: "{sink}"}}}}
"""

WATCHER = """\
  - id: {id}
    strategy: http-poll
    endpoint: "{url}"
    intervalMs: 1000
    conditions: [{{path: n, op: gt, value: 0}}]
    fire: {{eventName: tick, escalate: true}}
    deliveryTargets: [sink]
"""


@pytest.fixture
def http() -> Iterator[LocalHttp]:
    server = LocalHttp()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RestartableRedis]:
    (tmp_path / "redis").mkdir()
    server = RestartableRedis(str(tmp_path / "redis"))
    server.start()
    yield server
    server.stop()


def log_lines(service: Running) -> list[dict[str, Any]]:
    """The service's JSON log lines so far (the start-up line and console output left out)."""
    found = []
    for line in service.log.read_text().splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
    return found


def fallbacks(http: LocalHttp, watcher_id: str, service: Running) -> set[str]:
    """Callback ids of ``watcher_id`` whose fallback reached the sink (none while the API answers
    503: the store's first command after the outage may still find a dead connection)."""
    delivered = {d.callback_id for d in list(http.deliveries) if d.kind == "fallback"}
    status, page = service.call("GET", f"/api/v1/callbacks?watcherId={watcher_id}&limit=50")
    if status == 503:
        return set()
    assert 200 == status, page
    return delivered & {c["callbackId"] for c in page["items"]}


def diagnosis(service: Running, watcher_id: str) -> str:
    """What a failed wait shows: the watcher's status and contracts, the log's warnings."""
    status = service.call("GET", f"/api/v1/watchers/{watcher_id}")[1]
    contracts = service.call("GET", f"/api/v1/callbacks?watcherId={watcher_id}")[1]
    warnings = [line["message"][:200] for line in log_lines(service) if line["level"] != "debug"]
    return f"status {status}, contracts {contracts}, log {warnings[-20:]}"


@pytest.mark.timeout(120)
def test_a_redis_outage_logs_a_few_lines_and_the_service_recovers(
    tmp_path: Path, http: LocalHttp, redis_server: RestartableRedis
) -> None:
    """Redis stopped for 10 s under 30 watchers: at most a handful of warnings (one per loop, not one
    per pass or per watcher), each loop says when it works again, the fallback that fell due
    during the outage is sent after it, and the watchers poll and fire again."""
    ids = [f"w{i:03d}" for i in range(WATCHERS)]
    http.frozen = dict.fromkeys(ids, 0)  # no fires until the test raises a value above 0
    port = free_port()
    (tmp_path / "sentinel.yaml").write_text(
        CONFIG.format(store=redis_server.url, port=port, sink=http.url("/deliver"))
    )
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "all.yaml").write_text(
        "watchers:\n" + "".join(WATCHER.format(id=i, url=http.url(f"/poll/{i}")) for i in ids)
    )
    service = Running(tmp_path / "sentinel.yaml", port)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    try:
        with service.log.open("ab") as log:
            service.proc = subprocess.Popen(
                [*sentinel_command(), "run", "-c", str(service.config)],
                stdout=log,
                stderr=log,
                env={**env, "SENTINEL_STATE_DIR": str(tmp_path)},
            )
        wait_until(service.ready, timeout_s=30, what=f"the service to be ready (log: {service.log})")
        wait_until(lambda: {p.watcher_id for p in http.polls} >= set(ids), timeout_s=20, what="every poll")

        assert http.frozen is not None
        http.frozen["w000"] += 1  # a fire whose fallback falls due during the outage
        try:
            wait_until(
                lambda: service.call("GET", "/api/v1/callbacks?watcherId=w000&state=pending")[1]["items"],
                what="the fire's contract, pending",
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {diagnosis(service, 'w000')}") from exc
        before = len(log_lines(service))
        redis_server.stop()
        stopped = time.monotonic()
        time.sleep(OUTAGE_S)  # the outage itself: its length is the point, not a synchronisation
        during = log_lines(service)[before:]
        redis_server.start()
        restarted = time.monotonic()

        wait_until(lambda: fallbacks(http, "w000", service), timeout_s=30, what="the fallback due meanwhile")
        http.frozen["w001"] += 1
        wait_until(lambda: fallbacks(http, "w001", service), timeout_s=30, what="a fire after the outage")
        wait_until(
            lambda: any(p.at > restarted for p in http.polls if p.watcher_id == "w029"),
            what="polls after the outage",
        )
        after = log_lines(service)[before + len(during) :]
    finally:
        if service.proc is not None and service.proc.poll() is None:
            service.kill()

    troubles = [line for line in during if line["level"] in ("warning", "error")]
    shown = "\n".join(f"{line['level']} {line['logger']}: {line['message'][:160]}" for line in during)
    assert len(troubles) <= MAX_OUTAGE_LINES, f"{len(troubles)} lines in {OUTAGE_S:g} s:\n{shown}"
    per_logger = Counter(line["logger"] for line in troubles)
    assert max(per_logger.values()) <= 4, per_logger  # a few loops per module, never a line per pass
    assert restarted - stopped >= OUTAGE_S
    recovered = [line["message"] for line in after if "works again after" in line["message"]]
    assert any(message.startswith("lease keeper works again") for message in recovered), recovered
    assert not [line for line in after if line["level"] == "error"], after
