"""Resolved before the page (SPEC.md §6.4), through a running service: Alertmanager sends a firing
alert, then its resolution while the agent (a model stand-in that has not answered yet) is still
working. The contract settles ``resolved``: one line, PagerDuty gets ``resolve`` and never a
``trigger`` after it, no fallback at the deadline, and the agent's late notify is refused.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.callbacks.sessions.session import progress_key
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.core.alertmanager import alert_callback_id
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract
from sentinel_hooks.store.shortcuts import get_checkpoint
from sentinel_hooks.testing import FakeOpenAIServer
from tests.delivery.pagerduty_api import ROUTING_KEY, PagerDutyApi, pagerduty_api
from tests.service.test_alertmanager_ingest import TOKEN, alert, push
from tests.support import Sink, wait_for

__all__ = ["pagerduty_api"]

TIMEOUT_MS = 4000

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: {timeout}
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
delivery: {{maxAttempts: 3, baseMs: 50, maxMs: 200, maxElapsedMs: 60000}}
models:
  local: {{type: openai, baseUrl: "{model}", model: m, timeoutMs: 60000}}
targets:
  page: {{type: pagerduty, routingKey: "${{env:PD_ROUTING_KEY}}", apiBase: "{api}"}}
  team: {{type: webhook, url: "{sink}"}}
"""

WATCHER = """\
id: am
strategy: webhook
format: alertmanager
auth: {{bearerToken: "${{env:AM_TOKEN}}"}}
conditions: [{{path: labels.severity, op: eq, value: critical}}]
deliveryTargets: [page, team]
fire: {{eventName: prom_alert{fire}}}
"""

Start = Callable[..., Awaitable[Service]]


@pytest.fixture
async def start(
    tmp_path: Path, sink: Sink, model: FakeOpenAIServer, pagerduty_api: PagerDutyApi
) -> AsyncIterator[Start]:
    """``await start(fire=", notifyResolved: false")`` → a started service paging the stand-ins."""
    running: list[Service] = []

    async def make(*, fire: str = "") -> Service:
        text = CONFIG.format(
            timeout=TIMEOUT_MS, model=model.url, api=pagerduty_api.base(), sink=sink.url("/t")
        )
        (tmp_path / "sentinel.yaml").write_text(text)
        (tmp_path / "watchers").mkdir(exist_ok=True)
        (tmp_path / "watchers" / "am.yaml").write_text(WATCHER.format(fire=fire))
        environ = {"AM_TOKEN": TOKEN, "PD_ROUTING_KEY": ROUTING_KEY}
        service = Service(load_config(tmp_path / "sentinel.yaml", environ=environ))
        await service.start()
        running.append(service)
        return service

    yield make
    for service in running:
        await service.stop()


def slow_notify(model: FakeOpenAIServer) -> asyncio.Event:
    """The agent's first answer, a notify, held until the returned event is set."""
    answered = asyncio.Event()
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "Load is high."}, after=answered)
    return answered


async def contract_of(service: Service, callback_id: str) -> Contract:
    found = await service.store.get_contract(callback_id)
    assert found is not None
    return found


async def past_the_deadline(service: Service, contract: Contract) -> None:
    """Wait until the contract's deadline has passed, then let the relay and the outbox run once
    more (their loops run too: this only makes sure a pass came after the deadline)."""
    due = contract.deadline + timedelta(milliseconds=100)
    await wait_for(lambda: service.clock.now() > due, timeout_s=TIMEOUT_MS / 1000 + 10, what="the deadline")
    await service.relay.settle_due()
    await service.dispatcher.drain_due()


async def tool_results(service: Service, contract: Contract) -> list[Any]:
    """The tool results the agent was given in this callback's session."""
    entries = await service.store.get_transcript(contract.session_key)
    messages = [
        e.entry["message"]
        for e in entries
        if e.entry.get("callbackId") == contract.callback_id and e.entry.get("kind") == "message"
    ]
    contents = [m["content"] for m in messages if m.get("role") == "tool"]
    return [json.loads(c) if isinstance(c, str) else c for c in contents]


async def test_an_alert_resolved_while_the_agent_works_resolves_and_never_triggers(
    start: Start, sink: Sink, model: FakeOpenAIServer, pagerduty_api: PagerDutyApi
) -> None:
    """firing, then resolved before the agent answered: PagerDuty gets one ``resolve`` and no
    ``trigger`` ever (not the fallback at the deadline, not the agent's late notify); the team
    gets the one resolved line; the contract is ``resolved`` and the session stopped."""
    answered = slow_notify(model)
    service = await start()
    firing = alert("db-1")
    assert (202, {"accepted": True, "fired": 1}) == await push(service, firing)
    callback_id = alert_callback_id("am", firing)
    await wait_for(lambda: model.requests, what="the agent to start thinking")
    assert (202, {"accepted": True, "fired": 0}) == await push(service, alert("db-1", status="resolved"))
    contract = await contract_of(service, callback_id)
    await wait_for(lambda: pagerduty_api.events, what="the resolve at PagerDuty")
    answered.set()  # the agent answers now: its notify is refused, the session stops
    await past_the_deadline(service, contract)
    assert [("resolve", callback_id)] == pagerduty_api.actions()
    assert "resolved" == contract.state
    await wait_for(lambda: _stopped(service, callback_id), what="the session to stop", timeout_s=20)
    [line] = [body["message"] for body in sink.bodies()]
    matched_at = contract.trigger.matched_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert line.startswith(f"Sentinel: prom_alert on am fired at {matched_at} and resolved ")
    assert line.endswith(" later, before the agent answered.")
    assert [] == sink.bodies("fallback")
    assert [{"ok": False, "error": "the fire resolved"}] == await tool_results(service, contract)
    assert 1 == len(model.requests)  # stopped: the model was not asked again
    final = await contract_of(service, callback_id)
    assert ("resolved", contract.settled_at) == (final.state, final.settled_at)


async def test_with_notify_resolved_off_nobody_hears_anything(
    start: Start, sink: Sink, model: FakeOpenAIServer, pagerduty_api: PagerDutyApi
) -> None:
    """``notifyResolved: false``: resolved before the page sends nothing at all, and no fallback."""
    answered = slow_notify(model)
    service = await start(fire=", notifyResolved: false")
    firing = alert("db-2")
    await push(service, firing)
    callback_id = alert_callback_id("am", firing)
    await wait_for(lambda: model.requests, what="the agent to start thinking")
    await push(service, alert("db-2", status="resolved"))
    contract = await contract_of(service, callback_id)
    assert "resolved" == contract.state
    answered.set()
    await wait_for(lambda: _stopped(service, callback_id), what="the session to stop", timeout_s=20)
    await past_the_deadline(service, contract)
    assert ([], []) == (pagerduty_api.events, sink.bodies())


async def test_after_the_page_a_resolution_is_a_follow_up(
    start: Start, sink: Sink, model: FakeOpenAIServer, pagerduty_api: PagerDutyApi
) -> None:
    """The agent answered first (the page): the resolution is the ordinary resolved line, after it."""
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "Load is high."})
    service = await start()
    firing = alert("db-3")
    await push(service, firing)
    callback_id = alert_callback_id("am", firing)
    await wait_for(lambda: pagerduty_api.events, what="the notify's trigger")
    await wait_for(lambda: _state_is(service, callback_id, "fulfilled"), what="the contract to be fulfilled")
    await push(service, alert("db-3", status="resolved"))
    await wait_for(lambda: len(pagerduty_api.events) == 2, what="the resolve")
    assert [("trigger", callback_id), ("resolve", callback_id)] == pagerduty_api.actions()
    assert "fulfilled" == (await contract_of(service, callback_id)).state
    lines = [body["message"] for body in sink.bodies("resolved")]
    assert [True] == [line.startswith("Sentinel: prom_alert on am resolved after") for line in lines]


async def _stopped(service: Service, callback_id: str) -> bool:
    done = await get_checkpoint(service.store, progress_key(callback_id))
    return done is not None and done.get("stopped") == "the fire resolved"


async def _state_is(service: Service, callback_id: str, state: str) -> bool:
    return (await contract_of(service, callback_id)).state == state
