"""Two in-process Services on one Redis: each watcher is polled by exactly one of them, and when
one stops, the other takes its watchers over."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store import open_store
from sentinel_hooks.store.shortcuts import last_observation
from tests.cluster.conftest import (
    SERVICE_LEASE_MS,
    poll_watcher,
    running,
    settle_within_s,
    settled,
    stop_all,
)
from tests.support import Endpoint, wait_for

pytestmark = pytest.mark.redis

INTERVAL_MS = 200
SETTLE_S = settle_within_s(SERVICE_LEASE_MS)
IDS = [f"probe-{i:02d}" for i in range(20)]

CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
cluster: {{leaseMs: {lease_ms}}}
limits: {{minIntervalMs: 100, requestTimeoutMs: 2000}}
targets: {{console: {{type: console}}}}
"""


class Recorder(Endpoint):
    """An endpoint that records when each path was requested."""

    def __init__(self) -> None:
        super().__init__()
        self.hits: list[tuple[str, float]] = []
        self.handler = self._record

    async def _record(self, request: web.Request) -> web.StreamResponse:
        self.hits.append((request.path, time.monotonic()))
        return web.json_response({"status": "ok"})

    def counts_since(self, mark: int) -> Counter[str]:
        return Counter(path.lstrip("/") for path, _ in self.hits[mark:])


@dataclass
class Replicas:
    """Services started on one project and one Redis; ``stop`` one to take it out."""

    config_path: Path
    started: list[Service] = field(default_factory=list)

    async def start(self) -> Service:
        service = Service(load_config(self.config_path, environ={}))
        self.started.append(service)
        await service.start()
        return service

    async def stop(self, service: Service) -> None:
        self.started.remove(service)
        await service.stop()

    async def stop_all(self) -> None:
        services, self.started = self.started, []
        await stop_all(services)


@pytest.fixture
async def recorder() -> AsyncIterator[Recorder]:
    server = Recorder()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def replicas(tmp_path: Path, redis_url: str, recorder: Recorder) -> AsyncIterator[Replicas]:
    """A project with 20 http-poll watchers (one path each) on the test Redis."""
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(store=redis_url, lease_ms=SERVICE_LEASE_MS))
    (tmp_path / "watchers").mkdir()
    for watcher_id in IDS:
        text = poll_watcher(watcher_id, recorder.url(f"/{watcher_id}"), interval_ms=INTERVAL_MS)
        (tmp_path / "watchers" / f"{watcher_id}.yaml").write_text(text)
    made = Replicas(tmp_path / "sentinel.yaml")
    yield made
    await made.stop_all()


async def test_each_watcher_is_polled_by_exactly_one_service(replicas: Replicas, recorder: Recorder) -> None:
    """Counted at the endpoint over a window: no path is polled more often than one poller can."""
    a, b = await replicas.start(), await replicas.start()
    await wait_for(lambda: settled([a, b], IDS), timeout_s=SETTLE_S, what="ownership to settle")
    owners = {w: name for name, s in (("a", a), ("b", b)) for w in running(s)}
    mark, started_at = len(recorder.hits), time.monotonic()
    await wait_for(
        lambda: all(recorder.counts_since(mark)[w] >= 8 for w in IDS), timeout_s=10, what="8 polls of each"
    )
    window_s = time.monotonic() - started_at
    counts = recorder.counts_since(mark)
    most = window_s / (INTERVAL_MS / 1000) + 2  # one poller's polls in the window, plus slack
    by_service = Counter({name: counts[w] for w, name in owners.items()})
    assert {} == {w: n for w, n in counts.items() if n > most}, (window_s, by_service)
    assert (set(IDS), set()) == (running(a) | running(b), running(a) & running(b))
    assert owners == {w: name for name, s in (("a", a), ("b", b)) for w in running(s)}


async def test_stopping_a_service_moves_its_watchers_to_the_other(
    replicas: Replicas, recorder: Recorder
) -> None:
    """After A stops gracefully, B runs all 20 within 2 x leaseMs and polls A's former paths."""
    a, b = await replicas.start(), await replicas.start()
    await wait_for(lambda: settled([a, b], IDS), timeout_s=SETTLE_S, what="ownership to settle")
    moved = running(a)
    await replicas.stop(a)
    await wait_for(lambda: running(b) == set(IDS), timeout_s=2 * SERVICE_LEASE_MS / 1000, what="B runs all")
    mark = len(recorder.hits)
    await wait_for(
        lambda: all(recorder.counts_since(mark)[w] >= 2 for w in moved), timeout_s=5, what="B polls them"
    )
    assert moved


async def test_a_poll_in_flight_at_a_graceful_stop_is_acted_on(tmp_path: Path, redis_url: str) -> None:
    """A graceful stop releases leases only after the runners stopped, so the answer of a poll
    still in flight is stored, not dropped as if the lease were gone."""
    answered, release = asyncio.Event(), asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        if answered.is_set():
            release.set()  # the second poll is the one in flight at the stop
            await asyncio.sleep(0.3)
            return web.json_response({"status": "late"})
        answered.set()
        return web.json_response({"status": "early"})

    endpoint = Endpoint()
    endpoint.handler = slow
    await endpoint.start()
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(store=redis_url, lease_ms=SERVICE_LEASE_MS))
    (tmp_path / "watchers").mkdir()
    text = poll_watcher("w", endpoint.url("/w"), interval_ms=INTERVAL_MS)
    (tmp_path / "watchers" / "w.yaml").write_text(text)
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
    try:
        await service.start()
        await asyncio.wait_for(release.wait(), timeout=10)
    finally:
        await service.stop()
        await endpoint.stop()
    dropped = service.metrics.registry.get_sample_value(
        "sentinel_observations_dropped_total", {"reason": "lease_lost"}
    )
    store = open_store(redis_url, base_dir=tmp_path)
    await store.open()
    try:
        last = await last_observation(store, "w")
    finally:
        await store.close()
    assert ({"status": "late"}, 0.0) == (last and last.value, dropped)
