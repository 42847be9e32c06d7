"""Retention in a running service: a month later, a fire leaves nothing behind but what is still open.

A whole ``Service`` on a fake clock (started at the real time, so Redis TTLs and the fake clock
agree): callbacks are fired through ``/hooks/ingest``, answered by the scripted backend, then the
clock moves 31 days and the service's own pruner runs one pass.
"""

from __future__ import annotations

import contextlib
import textwrap
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis.asyncio

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.pruning import Pruned
from sentinel_hooks.store.shortcuts import get_checkpoint, get_envelope
from tests.redis_server import running_redis
from tests.support import wait_for

DAYS_31 = 31 * 86400
ANSWERED = """\
id: answered
strategy: webhook
conditions: [{path: status, op: eq, value: down}]
deliveryTargets: [console]
"""
ESCALATED = """\
id: escalated
strategy: webhook
conditions: [{path: status, op: eq, value: down}]
fire: {escalate: true}
deliveryTargets: [console]
"""


@contextlib.asynccontextmanager
async def running(tmp_path: Path, store: str, clock: FakeClock) -> AsyncIterator[Service]:
    """A service on ``store`` with both watchers; contracts wait 40 days for an answer, so the
    escalated one is still pending when the month has passed."""
    (tmp_path / "sentinel.yaml").write_text(
        f"store: {store}\n"
        "server: {host: 127.0.0.1, port: 0}\n"
        "targets: {console: {type: console}}\n"
        "models: {rules: {type: scripted}}\n"
        f"hookResponseTimeoutMs: {40 * 86400 * 1000}\n"
        "retention: {callbacksDays: 30, inboxClosedDays: 90, observationsPerWatcher: 5,"
        " transcriptsDays: 30}\n"
    )
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "answered.yaml").write_text(textwrap.dedent(ANSWERED))
    (tmp_path / "watchers" / "escalated.yaml").write_text(textwrap.dedent(ESCALATED))
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}), clock=clock, state_dir=tmp_path)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def fire(service: Service, watcher_id: str, n: int) -> str:
    """Push a matching event; the new contract's callback id."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{service.url}/hooks/ingest/{watcher_id}", json={"status": "down", "n": n}) as answer,
    ):
        assert 202 == answer.status, await answer.text()
    page = await service.store.list_contracts(watcher_id=watcher_id, limit=1)
    return page.items[0].callback_id


async def state_of(service: Service, callback_id: str) -> str | None:
    found = await service.store.get_contract(callback_id)
    return None if found is None else found.state


async def quiet(service: Service, watcher_id: str) -> None:
    """Push a non-matching event (the firing lifecycle re-arms)."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{service.url}/hooks/ingest/{watcher_id}", json={"status": "up"}) as answer,
    ):
        assert 202 == answer.status


async def fire_both(service: Service) -> tuple[list[str], str]:
    """Three answered callbacks (fulfilled) and one escalated one (pending, an open escalation)."""
    answered = []
    for n in range(3):
        answered.append(await fire(service, "answered", n))
        await quiet(service, "answered")
    escalated = await fire(service, "escalated", 0)
    for cid in answered:
        await wait_for(lambda cid=cid: _is(service, cid, "fulfilled"), what=f"{cid} fulfilled")
    await wait_for(lambda: _escalation_for(service, escalated), what="the escalation")
    return answered, escalated


async def _is(service: Service, callback_id: str, state: str) -> bool:
    return state == await state_of(service, callback_id)


async def _escalation_for(service: Service, callback_id: str) -> Any:
    items = (await service.store.list_inbox(status="open", kind="escalation")).items
    return [i for i in items if i.callback_id == callback_id]


async def test_a_month_later_answered_callbacks_are_gone_and_open_ones_stay(tmp_path: Path) -> None:
    """On SQLite: fulfilled callbacks go with their deliveries, checkpoints and transcript; the
    pending escalated callback, its open escalation and its session stay; the metric counts."""
    clock = FakeClock(datetime.now(UTC))
    async with running(tmp_path, "sqlite:///state.db", clock) as service:
        answered, escalated = await fire_both(service)
        answered_session = (await service.store.get_contract(answered[0])).session_key  # type: ignore[union-attr]
        escalated_session = (await service.store.get_contract(escalated)).session_key  # type: ignore[union-attr]

        clock.advance(DAYS_31)
        done = await service.pruner.prune()

        assert (3, 6) == (done.contracts, done.deliveries)  # a fan-out and a notify each
        assert [None] * 3 == [await state_of(service, cid) for cid in answered]
        for cid in answered:
            assert (None, []) == (
                await get_envelope(service.store, cid),
                await service.store.list_deliveries(cid),
            )
            assert await get_checkpoint(service.store, f"session:{cid}") is None
            assert await get_checkpoint(service.store, f"message:{cid}") is None
        assert [] == await service.store.get_transcript(answered_session)
        assert "pending" == await state_of(service, escalated)
        assert await _escalation_for(service, escalated)
        assert await service.store.get_transcript(escalated_session)
        assert await get_checkpoint(service.store, f"escalation:{escalated}") is not None
        assert 3 == service.metrics.pruned.labels("contracts")._value.get()

        # the pruned session starts afresh
        await quiet(service, "answered")
        new = await fire(service, "answered", 9)
        await wait_for(lambda: _is(service, new, "fulfilled"), what="the new callback fulfilled")
        assert 1 == (await service.store.get_transcript(answered_session))[0].seq


async def keys(client: redis.asyncio.Redis) -> set[str]:
    return {key.decode() async for key in client.scan_iter(match="sentinel:*", count=1000)}


@pytest.mark.redis
async def test_on_redis_every_key_a_fire_made_is_gone_a_month_later(tmp_path: Path) -> None:
    """On the test's own redis-server: after the pass, the only keys left that were not there
    before the fires are dedupe keys (which expire by themselves) and what the open callback holds."""
    clock = FakeClock(datetime.now(UTC))
    with running_redis() as url:
        client = redis.asyncio.Redis.from_url(url)
        try:
            async with running(tmp_path, url, clock) as service:
                before = await keys(client)
                _, escalated = await fire_both(service)
                made = await keys(client) - before
                assert any(key.startswith("sentinel:transcript:") for key in made)

                clock.advance(DAYS_31)
                done = await service.pruner.prune()
                assert (3, 6, 1) == (done.contracts, done.deliveries, done.sessions)

                left = await keys(client) - before
                session = (await service.store.get_contract(escalated)).session_key  # type: ignore[union-attr]
                held_open = {k for k in left if escalated in k}  # contract, checkpoints, deliveries
                inbox = {k for k in left if k.startswith("sentinel:inbox-")}  # the open escalation
                dedupe = {k for k in left if k.startswith("sentinel:dedupe:")}
                shared = {
                    "sentinel:contract-due",
                    "sentinel:contract-index:all",
                    "sentinel:contract-index:watcher:escalated",
                    "sentinel:contract-index:state:pending",
                    "sentinel:contract-index:state-watcher:pending:escalated",
                    f"sentinel:transcript:{session}",
                    "sentinel:sessions",
                    "sentinel:observations:answered",
                    "sentinel:observations:escalated",
                    "sentinel:watcher-states",
                }
                assert set() == left - held_open - inbox - dedupe - shared
                assert all([await client.pttl(k) > 0 for k in dedupe])  # they expire by themselves
                assert 5 == await client.llen("sentinel:observations:answered")  # observationsPerWatcher
                assert Pruned() == await service.pruner.prune()
        finally:
            await client.aclose()
