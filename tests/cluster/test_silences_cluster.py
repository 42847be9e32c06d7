"""Two in-process Services on one Redis share silences (SPEC.md §14): a silence made through A's
API mutes B's fires within a second, and expiring it on B lets A's fires through again."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from tests.cluster.conftest import SERVICE_LEASE_MS, stop_all
from tests.service.test_api import call
from tests.support import wait_for

pytestmark = pytest.mark.redis

CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: 0}}
cluster: {{leaseMs: {lease_ms}}}
hookResponseDedupeWindowMs: 0
targets: {{console: {{type: console}}}}
"""
WATCHER = "id: hook\nstrategy: webhook\ndeliveryTargets: [console]\n"
PROPAGATION_S = 1.0  # documented: another replica applies a new silence within a second


@pytest.fixture
async def pair(tmp_path: Path, redis_url: str) -> AsyncIterator[tuple[Service, Service]]:
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(store=redis_url, lease_ms=SERVICE_LEASE_MS))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "hook.yaml").write_text(WATCHER)
    services = [Service(load_config(tmp_path / "sentinel.yaml", environ={})) for _ in range(2)]
    try:
        for service in services:
            await service.start()
        yield services[0], services[1]
    finally:
        await stop_all(services)


async def fire_state(service: Service) -> str:
    status, fired = await call(service, "POST", "/api/v1/watchers/hook/fire", body={})
    assert 202 == status, fired
    state: str = fired["state"]
    return state


async def test_a_silence_made_on_one_replica_mutes_the_others_fires(pair: tuple[Service, Service]) -> None:
    """Created on A, it mutes a fire on B within a second; expired on B, A fires again at once."""
    a, b = pair
    assert "pending" == await fire_state(b)  # B has read the (empty) silences already
    status, made = await call(
        a,
        "POST",
        "/api/v1/silences",
        body={
            "matchers": [{"path": "watcherId", "op": "eq", "value": "hook"}],
            "durationMs": 60_000,
            "comment": "c",
        },
    )
    assert (201, "silenced") == (status, await fire_state(a))  # at once on the replica that made it
    started = time.monotonic()
    await wait_for(lambda: _is_silenced(b), timeout_s=PROPAGATION_S + 0.5, what="B to apply the silence")
    took_s = time.monotonic() - started
    listed = await call(b, "GET", "/api/v1/silences?state=active")
    await call(b, "DELETE", f"/api/v1/silences/{made['silence']['id']}")
    after = await wait_for(lambda: _is_pending(a), timeout_s=PROPAGATION_S + 0.5, what="A to see the expiry")
    assert (True, [made["silence"]["id"]], True) == (
        took_s <= PROPAGATION_S,
        [s["id"] for s in listed[1]["items"]],
        after,
    ), took_s


async def _is_silenced(service: Service) -> bool:
    return await fire_state(service) == "silenced"


async def _is_pending(service: Service) -> bool:
    return await fire_state(service) == "pending"
