"""A notify and the fallback never both reach people for one fire: the notify holds the
contract from the relay while it is sent, and is refused once the fallback is under way."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sentinel_hooks.callbacks.backends.base import ToolCall
from sentinel_hooks.callbacks.envelope import Envelope
from sentinel_hooks.callbacks.intake import LoggingSink
from sentinel_hooks.callbacks.tools import ToolBox
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract
from tests.support import Sink, wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: {timeout_ms}
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
targets: {{hook: {{type: webhook, url: "{url}"}}}}
"""

WATCHERS = """\
watchers:
  - {id: w, strategy: webhook, deliveryTargets: [hook]}
"""

NOTIFY = ToolCall("call-1", "sentinel_act", {"action": "notify", "message": "db-1 disk is fine again"})


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    server = Sink()
    await server.start()
    yield server
    await server.stop()


def kinds(sink: Sink) -> list[str]:
    """What each request at the sink was (the Idempotency-Key ends in the delivery's kind)."""
    return [r["headers"]["Idempotency-Key"].rsplit(":", 1)[1] for r in sink.received]


async def started(tmp_path: Path, sink: Sink, timeout_ms: int) -> Service:
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(url=sink.url("/in"), timeout_ms=timeout_ms))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}), sink=LoggingSink())
    await service.start()
    return service


async def toolbox(service: Service) -> tuple[ToolBox, Contract]:
    outcome = await service.manager.ingest("w", {"disk": 97})
    assert outcome.contract is not None
    contract = outcome.contract
    raw = await service.store.get_envelope(contract.callback_id)
    box = ToolBox(
        envelope=Envelope.model_validate(raw),
        contract=contract,
        store=service.store,
        dispatcher=service.dispatcher,
        inbox=service.inbox,
        clock=service.clock,
        service=service.config.service,
        commands=service.sessions.gate,
    )
    return box, contract


async def test_a_notify_after_the_fallback_is_refused_and_not_sent(tmp_path: Path, sink: Sink) -> None:
    """The agent answers after its deadline: people already have the fallback, so the late
    notify gets a clear error and nothing more reaches the target."""
    service = await started(tmp_path, sink, timeout_ms=300)
    try:
        box, contract = await toolbox(service)
        await wait_for(lambda: sink.bodies("fallback") or None, what="the fallback at the sink")
        result = await box.execute(NOTIFY, history=[])
        assert (False, []) == (result["ok"], result["delivered"])
        assert "too late" in result["error"]
        current = await service.store.get_contract(contract.callback_id)
        assert current is not None
        assert "fallback_sent" == current.state
        assert ["fallback"] == kinds(sink)
    finally:
        await service.stop()


async def test_a_notify_in_time_fulfils_and_no_fallback_follows(tmp_path: Path, sink: Sink) -> None:
    """The usual case keeps working: notify before the deadline fulfils; a repeat on the
    fulfilled contract is not refused (it is the same delivery, so it reaches people once)."""
    service = await started(tmp_path, sink, timeout_ms=20_000)
    try:
        box, contract = await toolbox(service)
        first = await box.execute(NOTIFY, history=[])
        second = await box.execute(NOTIFY, history=[])
        assert (True, "fulfilled", True) == (first["ok"], first["contract"], second["ok"])
        assert ["notify"] == kinds(sink)
        assert [] == await service.store.claim_due(contract.deadline)
    finally:
        await service.stop()
