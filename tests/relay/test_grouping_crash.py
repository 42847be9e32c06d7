"""Exactly one page per group across faults (SPEC §19), with real `sentinel run` processes: kill -9
between a group's first fire and the end of its waitMs, and two replicas on one Redis taking the
same storm. Groups live in the store, so a restart or another replica finds them there."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import sentinel_command
from tests.relay.test_relay_crash import http, lay_out, ready, start
from tests.service.test_process import free_port
from tests.support import Sink, wait_for

pytestmark = pytest.mark.slow

CONFIG = """\
store: "{store}"
server: {{host: 127.0.0.1, port: {port}}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 1000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
delivery: {{maxAttempts: 5, baseMs: 100, maxMs: 500}}
models:
  down: {{type: openai, baseUrl: "http://127.0.0.1:{dead_port}/v1", model: m, timeoutMs: 500}}  # LLM down
targets:
  hook: {{type: webhook, url: "{url}"}}
"""
WATCHER = """\
id: w
strategy: webhook
deliveryTargets: [hook]
fire:
  group: {by: [payload.name], waitMs: 8000, intervalMs: 60000}
"""


async def push(base: str, name: str, n: int) -> None:
    status, answer = await http("POST", f"{base}/hooks/ingest/w", {"name": name, "n": n})
    assert 202 == status, answer


def delivered(sink: Sink) -> list[dict[str, Any]]:
    """The messages at the sink, one per Idempotency-Key in arrival order: a delivery retried after
    an answer that came too late (or a kill -9 during the request) resends the same key, which a
    receiver drops (SPEC §6.2); two keys for one callback's page would be two pages."""
    by_key: dict[str, dict[str, Any]] = {}
    for request in sink.received:
        if request["status"] < 300:
            by_key.setdefault(request["headers"].get("Idempotency-Key", ""), json.loads(request["raw"]))
    return list(by_key.values())


def page_bodies(sink: Sink) -> list[dict[str, Any]]:
    """The pages at the sink, once each."""
    return [body for body in delivered(sink) if body.get("page")]


def pages(sink: Sink) -> Counter[str]:
    """Pages at the sink, by callback id."""
    return Counter(str(body["callbackId"]) for body in page_bodies(sink))


async def no_pending(base: str) -> bool:
    _, page = await http("GET", f"{base}/api/v1/callbacks?limit=500&state=pending")
    return not page["items"]  # type: ignore[index]


async def cli(base: str, *args: str) -> str:
    """`sentinel ARGS --url BASE`'s output, run in a thread: the sink shares this event loop, and a
    loop blocked for the CLI's run would make a delivery time out and be sent again."""
    command = [*sentinel_command(), *args, "--url", base]
    done = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, timeout=60, check=False
    )
    assert 0 == done.returncode, done.stderr
    return done.stdout


def laid_out(tmp_path: Path, sink: Sink, store: str, watcher: str) -> tuple[Path, str, Path]:
    """The config (``CONFIG`` over ``store``, a free port, the LLM down) and ``watcher`` in
    ``tmp_path``: the config's path, the service's base URL and its log's path."""
    port = free_port()
    text = CONFIG.format(store=store, port=port, url=sink.url("/in"), dead_port=free_port())
    return lay_out(tmp_path, text, watcher), f"http://127.0.0.1:{port}", tmp_path / "service.log"


async def test_kill_9_before_the_wait_ends_still_pages_each_group_once(tmp_path: Path, sink: Sink) -> None:
    """Fires of two keys, SIGKILL inside waitMs, restart, one more fire of a key: one page per
    group, naming the fires it holds then; `callbacks show` of a member names its group and of
    the group lists its four members."""
    config, base, log = laid_out(tmp_path, sink, "sqlite:///state.db", WATCHER)
    proc = start(config, log)
    try:
        await wait_for(lambda: ready(base), timeout_s=60, what="the service")
        for n in range(3):
            await push(base, "db", n)
        await push(base, "web", 3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert {} == pages(sink), "killed before any group's waitMs ended"
        proc = start(config, log)
        await wait_for(lambda: ready(base), timeout_s=60, what="the restarted service")
        await push(base, "db", 4)
        await wait_for(lambda: no_pending(base), timeout_s=20, what="every group paged")
        await wait_for(lambda: len(pages(sink)) >= 2 or None, timeout_s=10, what="two pages")
        await asyncio.sleep(0)  # nothing else to wait for: the pending contracts are settled
        paged = pages(sink)
        assert [1, 1] == sorted(paged.values())
        firsts = sorted(str(b["message"]).split(" fires of ")[0] for b in page_bodies(sink))
        # the fire after the restart joined before the page (a slow restart: after it, as a follow-up)
        assert firsts in (["Sentinel: 1", "Sentinel: 4"], ["Sentinel: 1", "Sentinel: 3"])
        _, listed = await http("GET", f"{base}/api/v1/callbacks?limit=500&state=grouped")
        members: list[dict[str, Any]] = listed["items"]  # type: ignore[index]
        assert 3 == len(members)
        group_id = str(members[0]["groupId"])
        assert group_id in paged
        shown_member = await cli(base, "callbacks", "show", str(members[0]["callbackId"]))
        assert f"groupId: {group_id}" in shown_member
        shown_group = await cli(base, "callbacks", "show", group_id)
        assert '4 fires, grouped by payload.name="db"' in shown_group
        assert all(str(m["callbackId"]) in shown_group for m in members)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    assert [1, 1] == sorted(pages(sink).values()), "no page after the groups' pages"


@pytest.mark.redis
async def test_two_replicas_on_one_redis_page_each_group_once(
    tmp_path: Path, sink: Sink, redis_url: str
) -> None:
    """Two `sentinel run` replicas on one Redis take a storm of three keys pushed to both at once:
    three groups, one page each."""
    bases, procs = [], []
    for replica in ("a", "b"):
        port = free_port()
        text = CONFIG.format(store=redis_url, port=port, url=sink.url("/in"), dead_port=free_port())
        home = tmp_path / replica
        home.mkdir()
        config = lay_out(home, text, WATCHER)
        procs.append(start(config, home / "service.log"))
        bases.append(f"http://127.0.0.1:{port}")
    try:
        for base in bases:
            await wait_for(lambda base=base: ready(base), timeout_s=60, what=f"replica {base}")
        await asyncio.gather(*(push(bases[n % 2], ("db", "web", "cache")[n % 3], n) for n in range(30)))
        await wait_for(lambda: no_pending(bases[0]), timeout_s=30, what="every group paged")
        await wait_for(lambda: len(pages(sink)) >= 3 or None, timeout_s=10, what="three pages")
        _, listed = await http("GET", f"{bases[0]}/api/v1/callbacks?limit=500&state=grouped")
        assert 27 == len(listed["items"])  # type: ignore[index]
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=20)
    assert [1, 1, 1] == sorted(pages(sink).values())


SCRIPTED = """\
store: "{store}"
server: {{host: 127.0.0.1, port: {port}}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 15000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
cluster: {{leaseMs: 1000}}
delivery: {{maxAttempts: 5, baseMs: 100, maxMs: 500}}
targets:
  hook: {{type: webhook, url: "{url}"}}
"""
WAITING = WATCHER.replace("waitMs: 8000", "waitMs: 4000")


@pytest.mark.redis
async def test_the_replica_that_opened_a_group_killed_inside_wait_ms_another_starts_its_session(
    tmp_path: Path, sink: Sink, redis_url: str
) -> None:
    """Replica a opens a group and is killed with SIGKILL inside waitMs, never restarted: replica b
    starts the group's session (the scripted agent's notify is the page, not the fallback), once."""
    bases, procs = [], []
    for replica in ("a", "b"):
        port = free_port()
        home = tmp_path / replica
        home.mkdir()
        config = lay_out(home, SCRIPTED.format(store=redis_url, port=port, url=sink.url("/in")), WAITING)
        procs.append(start(config, home / "service.log"))
        bases.append(f"http://127.0.0.1:{port}")
    try:
        for base in bases:
            await wait_for(lambda base=base: ready(base), timeout_s=60, what=f"replica {base}")
        for n in range(3):
            await push(bases[0], "db", n)
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(timeout=10)
        assert {} == pages(sink), "killed inside waitMs"
        await wait_for(lambda: len(pages(sink)) >= 1 or None, timeout_s=14, what="the group's page from b")
        await wait_for(lambda: no_pending(bases[1]), timeout_s=20, what="the group settled")
        await asyncio.sleep(0)
        page = page_bodies(sink)[0]
        assert "no response from the agent" not in str(page["message"]), "the notify, not the fallback"
        _, listed = await http("GET", f"{bases[1]}/api/v1/callbacks?limit=500&state=grouped")
        assert {str(page["callbackId"])} == {str(m["groupId"]) for m in listed["items"]}  # type: ignore[index]
    finally:
        procs[1].send_signal(signal.SIGTERM)
        procs[1].wait(timeout=20)
    assert [1] == list(pages(sink).values())


AFTER_THE_PAGE = WATCHER.replace("waitMs: 8000, intervalMs: 60000", "waitMs: 500, intervalMs: 12000")


def follow_ups(sink: Sink, group_id: str) -> list[str]:
    """The messages in reply to the group's page, in arrival order."""
    replies = (b for b in delivered(sink) if not b.get("page") and b.get("inReplyTo") == group_id)
    return [str(b["message"]) for b in replies]


@pytest.mark.parametrize("store", ["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def test_kill_9_inside_interval_ms_delivers_the_pending_joins_as_one_follow_up(
    tmp_path: Path, sink: Sink, store: str, request: pytest.FixtureRequest
) -> None:
    """A group pages, three fires join after the page, SIGKILL before their follow-up is due
    (intervalMs), restart: the three joins reach people as one follow-up, once; no second page."""
    store_url = "sqlite:///state.db" if store == "sqlite" else request.getfixturevalue("redis_url")
    config, base, log = laid_out(tmp_path, sink, store_url, AFTER_THE_PAGE)
    proc = start(config, log)
    try:
        await wait_for(lambda: ready(base), timeout_s=60, what="the service")
        await push(base, "db", 0)
        await wait_for(lambda: len(pages(sink)) >= 1 or None, timeout_s=20, what="the group's page")
        group_id = next(iter(pages(sink)))
        for n in range(1, 4):
            await push(base, "db", n)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert [] == follow_ups(sink, group_id), "killed before the joins' follow-up was due"
        proc = start(config, log)
        await wait_for(lambda: ready(base), timeout_s=60, what="the restarted service")
        await wait_for(lambda: follow_ups(sink, group_id) or None, timeout_s=30, what="the joins' follow-up")
        shown = await cli(base, "callbacks", "show", group_id)
        assert '4 fires, grouped by payload.name="db"' in shown
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    sent = follow_ups(sink, group_id)
    assert 1 == len(sent), sent
    assert sent[0].startswith("3 more fires:\n"), sent[0]
    assert 4 == len(sent[0].splitlines()), "one line per join"
    assert {group_id: 1} == dict(pages(sink)), "paged once, never again"
