"""A heartbeat watcher on two replicas of one Redis (SPEC.md §23, §11): the replica holding the
lease watches the due time, pings may reach either, and the state moves with the lease: pings the
other replica took keep it quiet, each missed period fires once, and after a hand-off the new
holder fires none of them again and a ping there resolves them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sentinel_hooks.service import Service
from tests.cluster.conftest import SERVICE_LEASE_MS, running, settle_within_s, settled
from tests.cluster.test_service_cluster import Replicas
from tests.service.test_api import call
from tests.support import Sink, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

KEY = "cluster-ping-key-0123456789"
PERIOD_S = 3.0
GRACE_S = 3.0  # a ping may be this late: the test's own pings, stalled on a loaded machine, stay on time
CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
cluster: {{leaseMs: {lease_ms}}}
hookResponseTimeoutMs: 20000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
targets:
  team: {{type: webhook, url: "{sink}"}}
"""
WATCHER = f"""\
id: beat
strategy: heartbeat
pingKey: {KEY}
periodMs: {int(PERIOD_S * 1000)}
graceMs: {int(GRACE_S * 1000)}
deliveryTargets: [team]
"""


@pytest.fixture
async def replicas(tmp_path: Path, redis_url: str, sink: Sink) -> AsyncIterator[Replicas]:
    text = CONFIG.format(store=redis_url, lease_ms=SERVICE_LEASE_MS, sink=sink.url("/t"))
    (tmp_path / "sentinel.yaml").write_text(text)
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "beat.yaml").write_text(WATCHER)
    made = Replicas(tmp_path / "sentinel.yaml")
    yield made
    await made.stop_all()


async def fires(service: Service) -> int:
    return len((await service.store.list_contracts(watcher_id="beat")).items)


async def ping(service: Service) -> None:
    code, body = await call(service, "POST", f"/hooks/ping/{KEY}")
    assert 200 == code, body


async def test_the_state_moves_with_the_lease(replicas: Replicas) -> None:
    a, b = await replicas.start(), await replicas.start()
    await wait_for(lambda: settled([a, b], ["beat"]), timeout_s=settle_within_s(SERVICE_LEASE_MS))
    holder, other = (a, b) if "beat" in running(a) else (b, a)
    await ping(other)
    before = await fires(holder)  # a slow settling may have passed the first due time already
    # pings to the replica without the lease, for two periods: the holder stays quiet
    until = time.monotonic() + 2 * PERIOD_S
    while time.monotonic() < until:
        await ping(other)
        await asyncio.sleep(PERIOD_S / 6)  # a job's pace, not a wait for anything
    assert before == await fires(holder)
    # the pings stop: a fire per missed period, each for a due time of its own
    await wait_for(lambda: _more(holder, before), timeout_s=PERIOD_S * 3 + GRACE_S, what="the overdue fire")
    await wait_for(lambda: _more(holder, before + 1), timeout_s=PERIOD_S * 3, what="the next period's")
    # the holder goes: the other takes the lease and the open fires with it
    await replicas.stop(holder)
    await wait_for(lambda: "beat" in running(other), timeout_s=settle_within_s(SERVICE_LEASE_MS))
    count = await fires(other)
    await wait_for(lambda: _more(other, count), timeout_s=PERIOD_S * 3, what="a period on the new holder")
    dues = await due_times(other)
    assert len(dues) == len(set(dues)), "no period fired twice across the hand-off"
    code, body = await call(other, "GET", "/api/v1/watchers/beat")
    assert (200, True) == (code, body["status"]["firing"])
    await ping(other)
    code, body = await call(other, "GET", "/api/v1/watchers/beat")
    assert (False, False) == (body["status"]["firing"], body["status"]["overdue"])


async def due_times(service: Service) -> list[str]:
    """The ``dueAt`` of each missed-period fire."""
    page = await service.store.list_contracts(watcher_id="beat")
    ids = [contract.callback_id for contract in page.items]
    envelopes = await service.store.get_envelopes(ids)
    return [envelopes[i].payload["dueAt"] for i in ids if "dueAt" in envelopes[i].payload]


async def _more(service: Service, than: int) -> bool:
    return await fires(service) > than
