"""kill -9 of a real ``sentinel run`` across a heartbeat's due time: the restart fires it once
(the period's anchor and the open fire are in the store), and a second restart not again."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.relay.test_relay_crash import http, ready, start
from tests.service.test_heartbeat import KEY, WATCHER, curl
from tests.service.test_process import free_port
from tests.support import Sink, wait_for

pytestmark = pytest.mark.slow

PERIOD_S = 4.0
CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: {port}}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 20000
notificationPayloadMode: none
targets:
  team: {{type: webhook, url: "{url}"}}
"""


async def status(base: str) -> dict[str, Any]:
    code, body = await http("GET", f"{base}/api/v1/watchers/backup")
    assert 200 == code, body
    assert isinstance(body, dict)
    return dict(body["status"])


async def test_a_due_time_passed_while_killed_fires_once_on_restart(tmp_path: Path, sink: Sink) -> None:
    port = free_port()
    config = tmp_path / "sentinel.yaml"
    config.write_text(CONFIG.format(port=port, url=sink.url("/t")))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "backup.yaml").write_text(
        WATCHER.format(extra=f"periodMs: {int(PERIOD_S * 1000)}\n").replace("${env:BACKUP_PING_KEY}", KEY)
    )
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "service.log"
    proc = start(config, log)
    try:
        await wait_for(lambda: ready(base), timeout_s=15, what="the service")
        assert 0 == (await curl(f"{base}/hooks/ping/{KEY}")).returncode
        pinged_at = time.time()
        pinged = await status(base)
        assert pinged["lastPingAt"] is not None
        assert not pinged["firing"]
        seen = len(sink.bodies())  # a slow start-up may have passed a first due time already
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert time.time() < pinged_at + PERIOD_S, "killed before the due time"
        await wait_for(lambda: time.time() > pinged_at + PERIOD_S + 0.5, what="the due time to pass")
        assert seen == len(sink.bodies())

        proc = start(config, log)
        await wait_for(lambda: ready(base), timeout_s=15, what="the restarted service")
        fired = await wait_for(
            lambda: _fires(base, pinged["fires"] + 1), timeout_s=15, what="the overdue fire after the restart"
        )
        assert fired["firing"]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        proc = start(config, log)
        await wait_for(lambda: ready(base), timeout_s=15, what="the second restart")
        # another period passes: the open fire is not made again
        again = time.time() + PERIOD_S
        await wait_for(lambda: time.time() > again, timeout_s=PERIOD_S + 5, what="another period")
        assert (pinged["fires"] + 1, True) == ((s := await status(base))["fires"], s["firing"])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)


async def _fires(base: str, count: int) -> dict[str, Any] | None:
    found = await status(base)
    return found if found["fires"] == count else None
