"""A running service with one webhook watcher and a local sink, and the tools of one of its
callbacks, for tests that play the agent (the hand-off to sessions only logs)."""

from __future__ import annotations

from pathlib import Path

from sentinel_hooks.callbacks.backends.base import ToolCall
from sentinel_hooks.callbacks.intake.intake import LoggingSink
from sentinel_hooks.callbacks.sessions.tools import ToolBox
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract
from sentinel_hooks.store.shortcuts import get_envelope
from tests.support import Sink

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: {timeout_ms}
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
delivery: {{maxAttempts: 3, baseMs: 100, maxMs: 200, maxElapsedMs: 60000}}
actionPolicy: {{default: needs_approval, approvalTimeoutMs: 600000}}
targets: {{hook: {{type: webhook, url: "{url}"}}}}
"""

WATCHERS = """\
watchers:
  - {id: w, strategy: webhook, deliveryTargets: [hook]}
"""

NOTIFY = ToolCall("call-1", "sentinel_act", {"action": "notify", "message": "db-1 disk is fine again"})


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
    envelope = await get_envelope(service.store, contract.callback_id)
    assert envelope is not None
    return toolbox_for(service, contract, envelope), contract


def toolbox_for(service: Service, contract: Contract, envelope: Envelope, notified: int = 0) -> ToolBox:
    """The tools of one callback, wired as a session would (``notified`` notifies so far)."""
    return ToolBox(
        envelope=envelope,
        contract=contract,
        store=service.store,
        relay=service.relay,
        inbox=service.inbox,
        clock=service.clock,
        service=service.config.service,
        commands=service.sessions.gate,
        notified=notified,
    )
