"""kill -9 of ``sentinel run`` while paced PagerDuty events wait for their slot (SPEC §16): they wait in
the store, so after the restart every one is sent, once, and none before its slot.

The routing key's window is filled beforehand through the store (as a storm an instant ago would
have), ending 30 s after the service is ready, so the test waits seconds, not a minute, on the wall clock.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from sentinel_hooks.clock import SystemClock
from sentinel_hooks.delivery.targets.pagerduty import PACE_LIMIT, PACE_WINDOW_MS, pace_key
from sentinel_hooks.store import Store
from sentinel_hooks.store.redis import RedisStore
from sentinel_hooks.store.sqlite import SqliteStore
from tests.delivery.pagerduty_api import ROUTING_KEY, PagerDutyApi, pagerduty_api
from tests.relay.test_relay_crash import http, lay_out, ready, start
from tests.service.test_process import free_port
from tests.support import wait_for

__all__ = ["pagerduty_api"]
pytestmark = pytest.mark.slow

FIRES = 20
FREE_IN_S = 30  # the filled window's first slot frees this long after the service is ready

CONFIG = """\
store: "{store}"
server: {{host: 127.0.0.1, port: {port}}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 1000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
delivery: {{maxAttempts: 3, baseMs: 100, maxMs: 500, maxElapsedMs: 120000}}
models:
  down: {{type: openai, baseUrl: "http://127.0.0.1:{dead_port}/v1", model: m, timeoutMs: 500}}  # LLM down
targets:
  page: {{type: pagerduty, routingKey: "{key}", apiBase: "{api}"}}
"""
WATCHER = "id: w\nstrategy: webhook\ndeliveryTargets: [page]\n"


@pytest.fixture
def redis_db() -> int:
    """This test's own database of the tests' redis-server (only the Redis variant asks for it)."""
    return 7


async def waiting(store: Store, ids: list[str]) -> int:
    """How many of the fires' fallbacks wait in the outbox for a slot (pending, no attempt spent)."""
    found = 0
    for cid in ids:
        found += sum(
            1
            for d in await store.list_deliveries(cid)
            if d.state == "pending" and d.attempts == 0 and d.target == "page"
        )
    return found


@pytest.mark.parametrize("store", ["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def test_kill_9_with_events_waiting_loses_none_and_sends_none_twice(
    tmp_path: Path, pagerduty_api: PagerDutyApi, store: str, request: pytest.FixtureRequest
) -> None:
    port = free_port()
    store_url = "sqlite:///state.db" if store == "sqlite" else request.getfixturevalue("redis_url")
    text = CONFIG.format(
        store=store_url, port=port, dead_port=free_port(), key=ROUTING_KEY, api=pagerduty_api.base()
    )
    config = lay_out(tmp_path, text, WATCHER)
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "service.log"
    reader: Store = SqliteStore(tmp_path / "state.db") if store == "sqlite" else RedisStore(store_url)
    await reader.open()
    proc = start(config, log)
    try:
        await wait_for(lambda: ready(base), timeout_s=45, what="the service")
        window_start = (
            SystemClock().now() - timedelta(milliseconds=PACE_WINDOW_MS) + timedelta(seconds=FREE_IN_S)
        )
        frees_at = time.monotonic() + FREE_IN_S
        for n in range(PACE_LIMIT):
            key, holder = pace_key(ROUTING_KEY), f"storm{n}"
            slot = await reader.take_pace_slot(
                key, holder=holder, limit=PACE_LIMIT, window_ms=PACE_WINDOW_MS, at=window_start
            )
            assert slot is None
        ids = []
        for i in range(FIRES):
            status, answer = await http("POST", f"{base}/api/v1/watchers/w/fire", {"payload": {"i": i}})
            assert 202 == status
            ids.append(answer["callbackId"])  # type: ignore[index]

        async def all_waiting() -> bool:
            return await waiting(reader, ids) == FIRES

        await wait_for(all_waiting, timeout_s=FREE_IN_S - 8, what="every fallback waiting for its slot")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert [] == pagerduty_api.events  # nothing went out past the pace
        proc = start(config, log)
        await wait_for(lambda: ready(base), timeout_s=45, what="the restarted service")
        await wait_for(
            lambda: len(pagerduty_api.events) >= FIRES, timeout_s=FREE_IN_S + 60, what="every page sent"
        )
        assert time.monotonic() >= frees_at - 1  # none before its slot (1 s for the clocks' rounding)
        sent = Counter(dedup for action, dedup in pagerduty_api.actions() if action == "trigger")
        assert set(ids) == set(sent)
        assert {1} == set(sent.values()), sent  # none twice

        async def none_waiting() -> bool:
            return await waiting(reader, ids) == 0

        await wait_for(none_waiting, timeout_s=10, what="every outcome recorded")
    finally:
        await reader.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
