"""A hook session takes one of the ``hookConcurrency`` slots when it runs, not while it waits: a
group's session waiting out its ``waitMs`` (SPEC §19) leaves the slot to another watcher's fire,
on SQLite (the wait resumed after a restart) and on Redis (the group queued on the session
stream at once)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from tests.service.test_api import call
from tests.support import Sink, wait_for

CONFIG = """\
store: "{store}"
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookConcurrency: 1
hookResponseTimeoutMs: 20000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
targets: {{hook: {{type: webhook, url: "{url}"}}}}
"""
GROUPED = """\
id: grouped
strategy: webhook
deliveryTargets: [hook]
fire:
  group: {by: [payload.name], waitMs: 60000, intervalMs: 60000}
"""
SINGLE = """\
id: single
strategy: webhook
deliveryTargets: [hook]
"""


def started(tmp_path: Path, store: str, sink: Sink) -> Service:
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(store=store, url=sink.url("/in")))
    watchers = tmp_path / "watchers"
    watchers.mkdir(exist_ok=True)
    (watchers / "grouped.yaml").write_text(GROUPED)
    (watchers / "single.yaml").write_text(SINGLE)
    return Service(load_config(tmp_path / "sentinel.yaml", environ={}))


async def push(service: Service, watcher_id: str) -> None:
    status, answer = await call(service, "POST", f"/hooks/ingest/{watcher_id}", body={"name": "db"})
    assert 202 == status, answer


@pytest.mark.parametrize("store", ["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def test_a_group_waiting_out_wait_ms_leaves_the_only_slot_to_another_fire(
    tmp_path: Path, sink: Sink, store: str, request: pytest.FixtureRequest
) -> None:
    """hookConcurrency 1, a group's session waiting (60 s of waitMs, resumed after a restart):
    another watcher's fire gets its session at once, and its agent's notify is its page."""
    url = f"sqlite:///{tmp_path}/state.db" if store == "sqlite" else request.getfixturevalue("redis_url")
    service = started(tmp_path, url, sink)
    await service.start()
    try:
        await push(service, "grouped")
    finally:
        await service.stop()  # the group's wait is resumed by the next start's queue
    service = started(tmp_path, url, sink)
    await service.start()
    try:
        await push(service, "single")
        [page] = await wait_for(lambda: sink.bodies("notify") or None, timeout_s=10, what="the notify")
        assert page["watcherId"] == "single"
        assert page["page"]
    finally:
        await service.stop()
    assert [] == [b for b in sink.bodies() if b["watcherId"] == "grouped"], "the group still waits"
