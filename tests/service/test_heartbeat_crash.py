"""kill -9 of a real ``sentinel run`` across a heartbeat's due times: the periods that passed while
it was down fire once on restart (the latest of them), a second kill -9 and restart does not fire
that period again, and the next missed period fires once more (its own due time and callback)."""

from __future__ import annotations

import itertools
import signal
import time
from datetime import datetime, timedelta
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


async def due_times(base: str) -> list[datetime]:
    """The ``dueAt`` of every missed-period fire of the watcher, by callback."""
    code, page = await http("GET", f"{base}/api/v1/callbacks?watcherId=backup&limit=100")
    assert 200 == code, page
    assert isinstance(page, dict)
    dues = []
    for item in page["items"]:
        code, detail = await http("GET", f"{base}/api/v1/callbacks/{item['callbackId']}")
        assert 200 == code, detail
        assert isinstance(detail, dict)
        dues.append(datetime.fromisoformat(detail["envelope"]["payload"]["dueAt"]))
    return dues


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
        await wait_for(lambda: ready(base), timeout_s=60, what="the service")
        assert 0 == (await curl(f"{base}/hooks/ping/{KEY}")).returncode
        pinged_at = time.time()
        pinged = await status(base)
        assert pinged["lastPingAt"] is not None
        assert not pinged["firing"]
        seen = len(sink.bodies())  # a slow start-up may have passed a first due time already
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert time.time() < pinged_at + PERIOD_S, "killed before the due time"

        # two due times pass while it is down
        await wait_for(lambda: time.time() > pinged_at + 2 * PERIOD_S + 0.5, what="two due times to pass")
        assert seen == len(sink.bodies())

        proc = start(config, log)
        await wait_for(lambda: ready(base), timeout_s=60, what="the restarted service")
        fired = await wait_for(
            lambda: _fires(base, pinged["fires"] + 1), timeout_s=30, what="the overdue fire after the restart"
        )
        assert (True, True) == (fired["firing"], fired["overdue"])
        last, period = datetime.fromisoformat(pinged["lastPingAt"]), timedelta(seconds=PERIOD_S)
        down = sorted(due for due in await due_times(base) if due > last)
        # the due times passed while down are one fire, the latest; each period after it one more
        assert down[0] >= last + 2 * period, "the latest due time passed while down"
        assert [period] * (len(down) - 1) == [b - a for a, b in itertools.pairwise(down)]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        proc = start(config, log)
        await wait_for(lambda: ready(base), timeout_s=60, what="the second restart")
        # the next period is missed too: a fire for it; none again for those before
        await wait_for(
            lambda: _fires(base, pinged["fires"] + len(down) + 1),
            timeout_s=PERIOD_S * 2 + 10,
            what="the next period's fire",
        )
        dues = sorted(due for due in await due_times(base) if due > last)
        assert down == dues[: len(down)]
        assert len(dues) == len(set(dues))
        assert {timedelta(0)} == {(due - last) % period for due in dues}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)


async def _fires(base: str, count: int) -> dict[str, Any] | None:
    found = await status(base)
    return found if found["fires"] >= count else None
