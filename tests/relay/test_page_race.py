"""The page is decided once, in the store (SPEC §6.4): two agent notifies handed over at the same
moment — on two replicas over one store, SQLite or Redis — give one page and one follow-up, never
two pages. And after ``expired`` (fallback mode none: nobody was paged) a notify is a follow-up,
not refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sentinel_hooks.callbacks.backends.base import ToolCall
from sentinel_hooks.callbacks.intake.intake import LoggingSink
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.shortcuts import get_envelope
from tests.relay.rig import toolbox_for
from tests.support import Sink, wait_for

CONFIG = """\
store: {store}
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: {timeout_ms}
hookResponseDedupeWindowMs: 0
hookResponseFallbackMode: {mode}
notificationPayloadMode: none
delivery: {{maxAttempts: 3, baseMs: 100, maxMs: 200, maxElapsedMs: 60000}}
targets: {{hook: {{type: webhook, url: "{url}"}}}}
"""
WATCHERS = "watchers:\n  - {id: w, strategy: webhook, deliveryTargets: [hook]}\n"


def notify(text: str) -> ToolCall:
    return ToolCall(f"call-{text}", "sentinel_act", {"action": "notify", "message": text})


async def replicas(tmp_path: Path, sink: Sink, store: str, *, timeout_ms: int, mode: str) -> list[Service]:
    """Two running services (replicas) over one store."""
    (tmp_path / "sentinel.yaml").write_text(
        CONFIG.format(store=store, url=sink.url("/in"), timeout_ms=timeout_ms, mode=mode)
    )
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
    started = []
    for _ in range(2):
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}), sink=LoggingSink())
        await service.start()
        started.append(service)
    return started


async def state_of(service: Service, callback_id: str) -> str | None:
    current = await service.store.get_contract(callback_id)
    return None if current is None else current.state


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
async def test_two_notifies_at_once_on_two_replicas_page_once(
    tmp_path: Path, sink: Sink, kind: str, request: pytest.FixtureRequest
) -> None:
    """A session's notify 1 on one replica and notify 2 on another (resumed there), handed over
    at the same moment, before any target answered: exactly one ``page: true``; the other is a
    follow-up (``page: false``, ``inReplyTo``) and says so to the model."""
    store = "sqlite:///state.db" if kind == "sqlite" else str(request.getfixturevalue("redis_url"))
    one, two = await replicas(tmp_path, sink, store, timeout_ms=20_000, mode="concise")
    try:
        outcome = await one.manager.ingest("w", {"disk": 97})
        contract = outcome.contract
        assert contract is not None
        envelope = await get_envelope(one.store, contract.callback_id)
        assert envelope is not None
        first = toolbox_for(one, contract, envelope, notified=0)
        second = toolbox_for(two, contract, envelope, notified=1)
        results = await asyncio.gather(
            first.execute(notify("db-1 disk at 97%"), history=[]),
            second.execute(notify("db-1 disk: logrotate stuck"), history=[]),
        )
        assert [True, True] == [r["ok"] for r in results]
        assert 1 == sum(r.get("deliveredAs") == "followup" for r in results), results
        await wait_for(lambda: len(sink.bodies()) == 2 or None, what="both messages at the sink")
        pages = sorted(body["page"] for body in sink.bodies())
        assert [False, True] == pages, sink.bodies()
        [follow_up] = [body for body in sink.bodies() if not body["page"]]
        assert contract.callback_id == follow_up["inReplyTo"]
        assert "fulfilled" == await state_of(one, contract.callback_id)
    finally:
        for service in (one, two):
            await service.stop()


async def test_a_notify_after_expired_is_a_follow_up(tmp_path: Path, sink: Sink) -> None:
    """Fallback mode none: the silent agent's contract expires at its deadline and nobody is paged;
    the agent's findings later are delivered as a follow-up (never refused, SPEC §6.4), and the
    contract stays ``expired`` (one final state)."""
    one, two = await replicas(tmp_path, sink, "sqlite:///state.db", timeout_ms=200, mode="none")
    try:
        outcome = await one.manager.ingest("w", {"disk": 97})
        contract = outcome.contract
        assert contract is not None

        async def expired() -> bool | None:
            return await state_of(one, contract.callback_id) == "expired" or None

        await wait_for(expired, what="the contract expired")
        envelope = await get_envelope(one.store, contract.callback_id)
        assert envelope is not None
        result = await toolbox_for(two, contract, envelope).execute(notify("db-1: found it"), history=[])
        assert (True, "followup", ["hook"]) == (result["ok"], result["deliveredAs"], result["delivered"])
        [body] = sink.bodies()
        assert (False, contract.callback_id) == (body["page"], body["inReplyTo"])
        assert "expired" == await state_of(one, contract.callback_id)
    finally:
        for service in (one, two):
            await service.stop()
