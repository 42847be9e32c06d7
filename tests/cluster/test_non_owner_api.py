"""API calls on a replica that does not run the watcher: two in-process Services on one Redis.

Disabling through the other replica stops the owner's polls, enabling starts them again, and a
manual fire through it yields one callback, counted in the watcher's status everywhere.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.shortcuts import get_watcher_state
from tests.cluster.conftest import (
    SERVICE_LEASE_MS,
    poll_watcher,
    running,
    settle_within_s,
    settled,
    stop_all,
)
from tests.support import Endpoint, Sink, wait_for

pytestmark = pytest.mark.redis

IDS = [f"probe-{i}" for i in range(6)]
INTERVAL_MS = 100
APPLIED_WITHIN_S = 3.0  # a published change reaches the owner in milliseconds; slack for a loaded CI

CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
notificationPayloadMode: none
cluster: {{leaseMs: {lease_ms}}}
limits: {{minIntervalMs: 100, requestTimeoutMs: 2000}}
targets: {{sink: {{type: webhook, url: "{sink}"}}}}
"""


class Recorder(Endpoint):
    """The watched endpoint: when each path was last requested."""

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[str, float] = {}
        self.handler = self._record

    async def _record(self, request: web.Request) -> web.StreamResponse:
        self.last[request.path.lstrip("/")] = time.monotonic()
        return web.json_response({"status": "ok"})


@pytest.fixture
async def servers() -> AsyncIterator[tuple[Recorder, Sink]]:
    recorder, sink = Recorder(), Sink()
    await recorder.start()
    await sink.start()
    yield recorder, sink
    await recorder.stop()
    await sink.stop()


@pytest.fixture
async def pair(
    tmp_path: Path, redis_url: str, servers: tuple[Recorder, Sink]
) -> AsyncIterator[tuple[Service, Service]]:
    """Two started replicas of one project, ownership settled; the first runs some watchers."""
    recorder, sink = servers
    (tmp_path / "sentinel.yaml").write_text(
        CONFIG.format(store=redis_url, lease_ms=SERVICE_LEASE_MS, sink=sink.url("/in"))
    )
    (tmp_path / "watchers").mkdir()
    for watcher_id in IDS:
        text = poll_watcher(watcher_id, recorder.url(f"/{watcher_id}"), interval_ms=INTERVAL_MS)
        (tmp_path / "watchers" / f"{watcher_id}.yaml").write_text(text.replace("[console]", "[sink]"))
    started: list[Service] = []
    try:
        for _ in range(2):
            service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
            started.append(service)
            await service.start()
        a, b = started
        settle_s = settle_within_s(SERVICE_LEASE_MS)
        await wait_for(lambda: settled([a, b], IDS), timeout_s=settle_s, what="ownership to settle")
        # rendezvous hashing may give all six watchers to one replica: that one is the owner
        yield (a, b) if running(a) else (b, a)
    finally:
        await stop_all(started)


async def api(service: Service, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as client,
        client.request(method, service.url + path, json=body) as reply,
    ):
        return reply.status, await reply.json() if reply.content_length != 0 else None


def polled_since(recorder: Recorder, watcher_id: str, since: float) -> bool:
    return recorder.last.get(watcher_id, 0.0) > since


async def test_disable_and_enable_through_a_non_owner_reach_the_owner(
    pair: tuple[Service, Service], servers: tuple[Recorder, Sink]
) -> None:
    a, b = pair
    recorder, _ = servers
    watcher_id = sorted(running(a))[0]

    status, body = await api(b, "PATCH", f"/api/v1/watchers/{watcher_id}", {"enabled": False})
    assert (200, "disabled") == (status, body["status"]["state"])
    await wait_for(lambda: watcher_id not in running(a), timeout_s=APPLIED_WITHIN_S, what="A stops it")
    stopped_at = time.monotonic()
    stored = await get_watcher_state(a.store, watcher_id)
    assert stored is not None
    assert False is stored["enabled"]
    assert "disabled" == a.manager.status(a.manager.get(watcher_id))["state"]
    assert watcher_id not in running(b)
    others = sorted(set(IDS) - {watcher_id})
    await wait_for(
        lambda: all(polled_since(recorder, w, stopped_at) for w in others), what="the other watchers' polls"
    )
    assert not polled_since(recorder, watcher_id, stopped_at + 0.2), "the disabled watcher is still polled"

    status, body = await api(b, "PATCH", f"/api/v1/watchers/{watcher_id}", {"enabled": True})
    assert 200 == status
    await wait_for(lambda: watcher_id in running(a), timeout_s=APPLIED_WITHIN_S, what="A runs it again")
    enabled_at = time.monotonic()
    await wait_for(lambda: polled_since(recorder, watcher_id, enabled_at), what="polls again")
    stored = await get_watcher_state(a.store, watcher_id)
    assert stored is not None
    assert True is stored["enabled"]
    assert watcher_id not in running(b)


async def test_manual_fire_through_a_non_owner_yields_one_callback(
    pair: tuple[Service, Service], servers: tuple[Recorder, Sink]
) -> None:
    a, b = pair
    _, sink = servers
    watcher_id = sorted(running(a))[0]

    status, body = await api(b, "POST", f"/api/v1/watchers/{watcher_id}/fire", {"payload": {"x": 1}})
    assert (202, "pending") == (status, body["state"])
    callback_id = body["callbackId"]
    await wait_for(lambda: sink.bodies("notify"), what="the notify at the sink")
    await wait_for(
        lambda: a.manager.status(a.manager.get(watcher_id))["fires"] == 1,
        timeout_s=APPLIED_WITHIN_S,
        what="the owner to count the fire",
    )
    contracts = (await a.store.list_contracts(limit=50)).items
    assert [(callback_id, "manual")] == [(c.callback_id, c.trigger.kind) for c in contracts]
    assert [callback_id] == [item["callbackId"] for item in sink.bodies("notify")]

    async def stored_one_fire() -> bool:
        stored = await get_watcher_state(a.store, watcher_id)
        return stored is not None and 1 == stored.get("fires")  # left out while 0 (as a new watcher's)

    # the owner counts the fire in memory first, then stores it with its next (batched) write
    await wait_for(stored_one_fire, timeout_s=APPLIED_WITHIN_S, what="the stored fire count")
    assert watcher_id in running(a)
    assert watcher_id not in running(b)
