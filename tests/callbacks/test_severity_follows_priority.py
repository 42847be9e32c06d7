"""Severity follows priority (SPEC §8, §6.2): the inbox items of a ``critical`` watcher are critical,
and the messages announcing them (webhook body, console line) call them critical, never "normal"."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.inbox.severity import message_priority, severity_for
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import InboxItem
from sentinel_hooks.testing import FakeOpenAIServer
from tests.support import Sink, wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 20000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  local: {{type: openai, baseUrl: "{model_url}", model: small-model, timeoutMs: 5000}}
defaultHookModel: local
targets:
  hook: {{type: webhook, url: "{sink}"}}
  broken: {{type: webhook, url: "{broken}"}}
  stdout: {{type: console}}
escalationTargets: [hook, stdout]
delivery: {{maxAttempts: 1}}
actionPolicy: {{default: needs_approval}}
"""
WATCHERS = """\
watchers:
  - {id: vault, strategy: webhook, deliveryTargets: [hook], fire: {eventName: vault_low, priority: critical}}
  - {id: dead, strategy: webhook, deliveryTargets: [broken], fire: {eventName: dead_low, priority: critical}}
  - {id: chatty, strategy: webhook, deliveryTargets: [hook], fire: {eventName: chatty, priority: low}}
"""

Start = Callable[[], Awaitable[Service]]


@pytest.fixture
async def start(tmp_path: Path, sink: Sink, model: FakeOpenAIServer) -> AsyncIterator[Start]:
    services: list[Service] = []

    async def run() -> Service:
        text = CONFIG.format(model_url=model.url, sink=sink.url("/in"), broken=sink.url("/broken"))
        (tmp_path / "sentinel.yaml").write_text(text)
        (tmp_path / "watchers").mkdir(exist_ok=True)
        (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
        await service.start()
        services.append(service)
        return service

    yield run
    for service in services:
        await service.stop()


async def only_item(service: Service, kind: str) -> InboxItem:
    async def listed() -> list[InboxItem]:
        return (await service.store.list_inbox(kind=kind)).items  # type: ignore[arg-type]

    [item] = await wait_for(listed, what=f"a {kind} item")
    return item


def announced(sink: Sink, item: InboxItem) -> dict[str, Any]:
    """The webhook body of the item's step 0 (Idempotency-Key ``{itemId}:hook:escalation.0``)."""
    key = f"{item.id}:hook:escalation.0"
    [raw] = [r["raw"] for r in sink.received if r["headers"].get("Idempotency-Key") == key]
    body: dict[str, Any] = json.loads(raw)
    return body


async def test_escalation_of_a_critical_watcher_is_critical(
    start: Start, model: FakeOpenAIServer, sink: Sink
) -> None:
    """sentinel_escalate without a severity on a critical watcher files a critical item, sent as critical."""
    model.reply_tool_call("sentinel_escalate", {"reason": "vault health low"})
    service = await start()
    await service.manager.ingest("vault", {"health": 0.1})
    item = await only_item(service, "escalation")
    assert "critical" == item.severity
    await wait_for(lambda: sink.bodies("escalation.0"), what="the escalation step")
    assert "critical" == announced(sink, item)["priority"]


async def test_console_line_calls_a_critical_item_critical(
    start: Start, model: FakeOpenAIServer, sink: Sink, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console target's line for a critical watcher's escalation starts ``[sentinel] critical``."""
    model.reply_tool_call("sentinel_escalate", {"reason": "vault health low"})
    service = await start()
    await service.manager.ingest("vault", {"health": 0.1})
    seen: list[str] = []

    def printed() -> str | None:
        seen.append(capsys.readouterr().out)
        return next((line for line in "".join(seen).splitlines() if "escalation on vault" in line), None)

    line = await wait_for(printed, what="the console line of the escalation")
    assert line.startswith(
        "[sentinel] critical escalation on vault: Unacknowledged for 0s: vault health low "
        "(escalation, critical, watcher vault)"
    )


async def test_approval_of_a_critical_watcher_is_critical(
    start: Start, model: FakeOpenAIServer, sink: Sink
) -> None:
    """A run_command that needs approval on a critical watcher files a critical approval, sent as critical."""
    model.reply_tool_call("sentinel_act", {"action": "run_command", "command": "uname"})
    service = await start()
    await service.manager.ingest("vault", {"health": 0.1})
    item = await only_item(service, "approval")
    assert "critical" == item.severity
    await wait_for(lambda: sink.bodies("escalation.0"), what="the approval request")
    assert "critical" == announced(sink, item)["priority"]


async def test_failed_delivery_of_a_critical_fire_is_critical(
    start: Start, model: FakeOpenAIServer, sink: Sink
) -> None:
    """A critical watcher's notify that fails for good becomes a critical delivery_failure item."""
    sink.statuses = [400]
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "vault is down"})
    service = await start()
    await service.manager.ingest("dead", {"health": 0})
    item = await only_item(service, "delivery_failure")
    assert "critical" == item.severity


async def test_a_low_watcher_escalates_as_info_unless_the_agent_says_more(
    start: Start, model: FakeOpenAIServer, sink: Sink
) -> None:
    """A low watcher's escalation without a severity is info; an explicit critical one stays critical."""
    model.reply_tool_call("sentinel_escalate", {"reason": "odd but fine"})
    model.reply_text("done")
    model.reply_tool_call("sentinel_escalate", {"reason": "on fire", "severity": "critical"})
    service = await start()
    await service.manager.ingest("chatty", {"n": 1})
    await wait_for(lambda: len(sink.bodies("escalation.0")) >= 1, what="the first escalation")
    await service.manager.ingest("chatty", {"n": 2})
    await wait_for(lambda: len(sink.bodies("escalation.0")) >= 2, what="the second escalation")
    items = sorted((await service.store.list_inbox(kind="escalation")).items, key=lambda i: i.created_at)
    assert ["info", "critical"] == [i.severity for i in items]
    assert ["low", "critical"] == [announced(sink, i)["priority"] for i in items]


@pytest.mark.parametrize(
    ("priority", "severity"),
    [("low", "info"), ("normal", "warning"), ("high", "warning"), ("critical", "critical")],
)
def test_severity_of_each_priority(priority: str, severity: str) -> None:
    """Each priority maps to one inbox severity (PagerDuty's mapping on three levels)."""
    assert severity == severity_for(priority)


def test_message_priority_is_never_below_the_fire() -> None:
    """A step's priority is the fire's, raised (never lowered) by a more severe item."""
    assert ("high", "critical", "normal", "low") == (
        message_priority("warning", "high"),
        message_priority("critical", "normal"),
        message_priority("warning", None),
        message_priority("info", "low"),
    )
