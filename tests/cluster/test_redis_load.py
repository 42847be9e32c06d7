"""10,000 watchers on Redis for a minute, /metrics scraped every 5 s: no observation is dropped.

One in-process ``Service`` on the tests' own redis-server (its own database) polls a local JSON
endpoint. The watchers are validated with ``validate_watcher`` (what API-created watchers go
through) instead of being parsed from YAML, which alone takes 15-30 s for 10,000 on a 2-core
machine; everything after that is the real service: store, leases, pools, scheduler, API.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from pathlib import Path

import aiohttp
import pytest

from sentinel_hooks.config.linemap import LineMap
from sentinel_hooks.config.loaded import LoadedWatcher, WatcherSource
from sentinel_hooks.config.loader import (
    LoadedConfig,
    load_config,
    validate_watcher,
)
from sentinel_hooks.service import Service
from tests.support import Endpoint, wait_for

pytestmark = [pytest.mark.redis, pytest.mark.slow]

WATCHERS = 10_000
INTERVAL_MS = 20_000  # 500 polls/s: the service and the endpoint share this process's core
WINDOW_S = 60.0  # about 30,000 polls
SCRAPE_EVERY_S = 5.0

CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
limits: {{maxWatchers: 100000, minIntervalMs: 1000, requestTimeoutMs: 5000}}
targets: {{console: {{type: console}}}}
"""


@pytest.fixture
def redis_db() -> int:
    """This test's own database of the tests' redis-server (``redis_url``; no other suite uses it)."""
    return 13


def many_watchers(config: LoadedConfig, endpoint: Endpoint) -> LoadedConfig:
    """``config`` with WATCHERS http-poll watchers of ``endpoint`` whose condition never holds."""
    loaded = []
    for i in range(WATCHERS):
        data = {
            "id": f"w{i:05d}",
            "strategy": "http-poll",
            "endpoint": endpoint.url(f"/w/{i}"),
            "intervalMs": INTERVAL_MS,
            "timeoutMs": 5000,
            "conditions": [{"path": "status", "op": "eq", "value": "down"}],
            "deliveryTargets": ["console"],
        }
        spec, issues = validate_watcher(
            data,
            display="load",
            lines=LineMap(),
            service=config.service,
            skills=config.skills,
            base_dir=config.base_dir,
        )
        assert spec is not None, issues
        loaded.append(LoadedWatcher.of(spec, data, WatcherSource("load", None)))
    return dataclasses.replace(config, watchers=tuple(loaded))


def metric_total(text: str, name: str) -> float | None:
    """The sum of every sample of ``name`` in a Prometheus exposition (None: no such family)."""
    samples = [line for line in text.splitlines() if line.startswith((f"{name}{{", f"{name} "))]
    if not samples and f"# TYPE {name.removesuffix('_total')} " not in text:
        return None
    return sum(float(line.rsplit(" ", 1)[1]) for line in samples)


@pytest.mark.timeout(180)
async def test_ten_thousand_watchers_on_redis_drop_no_observation(
    tmp_path: Path, redis_url: str, endpoint: Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    """Tens of thousands of polls, scraped every 5 s: zero dropped, zero Redis errors logged."""
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(store=redis_url))
    (tmp_path / "watchers").mkdir()
    config = many_watchers(load_config(tmp_path / "sentinel.yaml", environ={}), endpoint)
    caplog.set_level(logging.WARNING, logger="sentinel_hooks")
    service = Service(config)
    scrapes: list[int] = []
    try:
        await service.start()
        await wait_for(
            lambda: sum(1 for r in service.manager.runners() if r.running) == WATCHERS,
            timeout_s=60,
            interval_s=0.5,
            what="every watcher to run",
        )
        mark, began = endpoint.requests, time.monotonic()
        async with aiohttp.ClientSession() as http:
            while (elapsed := time.monotonic() - began) < WINDOW_S:
                async with http.get(f"{service.url}/metrics") as reply:
                    scrapes.append(reply.status)
                    await reply.read()
                await asyncio.sleep(min(SCRAPE_EVERY_S, max(0.0, WINDOW_S - elapsed)))
            polled = endpoint.requests - mark
            async with http.get(f"{service.url}/metrics") as reply:
                exposition = await reply.text()
    finally:
        await service.stop()
    troubles = [f"{r.levelname} {r.name}: {r.getMessage()}" for r in caplog.records]
    dropped_logged = sum("observation dropped" in line for line in troubles)
    redis_errors = [line for line in troubles if "redis" in line.lower()]
    print(  # the numbers behind docs/scaling.md; shown with -s
        f"redis load: {polled} polls in {WINDOW_S:g} s, {len(scrapes)} scrapes, "
        f"{dropped_logged} dropped, {len(redis_errors)} Redis errors logged"
    )
    assert (0, []) == (dropped_logged, redis_errors[:5]), f"{polled} polls; {len(redis_errors)} Redis errors"
    assert 0 == metric_total(exposition, "sentinel_observations_dropped_total")
    assert polled >= 0.6 * WATCHERS * WINDOW_S / (INTERVAL_MS / 1000), polled
    assert [200] * len(scrapes) == scrapes
