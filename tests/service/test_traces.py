"""Traces (SPEC §22) through a running service: a fire whose session calls a model, runs a command
(its policy decision) and notifies a webhook is one trace, received by a local OTLP/HTTP
collector stand-in; its id is on the contract, in the API and in ``sentinel callbacks show``.
Without an endpoint nothing of OpenTelemetry is loaded."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.testing import FakeOpenAIServer
from tests.cli.conftest import remote_lines
from tests.service.test_api import call
from tests.support import HeldModel, Sink, wait_for

trace_pb = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
telemetry: {{otlpEndpoint: "{collector}"}}
models:
  agent: {{type: openai, baseUrl: "{model_url}", model: agent-model, timeoutMs: 5000}}
targets:
  hook: {{type: webhook, url: "{sink}"}}
actionPolicy:
  default: deny
  rules:
    - {{id: echo-ok, priority: 10, decision: auto, conditions: [{{path: argv0, op: eq, value: echo}}]}}
"""

WATCHER = """\
id: w
strategy: webhook
conditions: [{path: disk, op: gt, value: 90}]
deliveryTargets: [hook]
"""

RUN = {"action": "run_command", "command": "echo", "args": ["checked"]}
NOTIFY = {"action": "notify", "message": "disk at 97%"}


class Collector:
    """An OTLP/HTTP receiver on 127.0.0.1: ``POST /v1/traces`` (protobuf), every span kept."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _traces(self, request: web.Request) -> web.Response:
        export = trace_pb.ExportTraceServiceRequest()
        export.ParseFromString(await request.read())
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                self.spans.extend(scope.spans)
        body = trace_pb.ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=body, content_type="application/x-protobuf")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def collector() -> AsyncIterator[Collector]:
    server = Collector()
    await server.start()
    yield server
    await server.stop()


def attributes(span: Any) -> dict[str, Any]:
    """A span's attributes as plain values."""
    found: dict[str, Any] = {}
    for item in span.attributes:
        kind = item.value.WhichOneof("value")
        found[item.key] = getattr(item.value, kind)
    return found


async def fired(tmp_path: Path, config: str) -> tuple[Service, str]:
    """A started service on ``config`` with watcher ``w``, fired once: it and the callback id."""
    (tmp_path / "sentinel.yaml").write_text(config)
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w.yaml").write_text(WATCHER)
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
    await service.start()
    outcome = await service.manager.ingest("w", {"disk": 97})
    assert outcome.contract is not None
    return service, outcome.contract.callback_id


@pytest.mark.slow
async def test_a_fire_is_one_trace_from_observation_to_delivery(
    tmp_path: Path, sink: Sink, model: FakeOpenAIServer, collector: Collector
) -> None:
    model.usage = (120, 30)
    model.reply_tool_calls([("sentinel_act", RUN), ("sentinel_act", NOTIFY)])
    service, callback_id = await fired(
        tmp_path, CONFIG.format(collector=collector.url, model_url=model.url, sink=sink.url("/in"))
    )
    try:
        await wait_for(lambda: service.sessions.queue.finished.get(callback_id), what="the session")
        await wait_for(lambda: sink.bodies(), what="the notify delivered")
        contract = await service.store.get_contract(callback_id)
        assert contract is not None
        assert contract.trace_id is not None
        trace_id = contract.trace_id
        _, body = await call(service, "GET", f"/api/v1/callbacks/{callback_id}")
        assert trace_id == body["callback"]["traceId"]
        lines = await remote_lines(service.url, tmp_path, "callbacks", "show", callback_id)
        assert f"traceId: {trace_id}" in lines
    finally:
        await service.stop()  # flushes the batch of spans
    assert {trace_id} == {span.trace_id.hex() for span in collector.spans}
    by_name = spans_by_name(collector)
    [observation] = by_name["sentinel.observation"]
    [conditions] = by_name["sentinel.conditions"]
    [fire] = by_name["sentinel.fire"]
    [session] = by_name["sentinel.session"]
    assert observation.parent_span_id == b""  # the root
    assert observation.span_id == conditions.parent_span_id == fire.parent_span_id
    assert contract.trace_parent == fire.span_id.hex()
    assert session.parent_span_id == fire.span_id
    assert [{"index": 0, "path": "disk", "op": "gt", "actual": "97", "result": True}] == [
        attributes(event) for event in conditions.events
    ]
    assert ("pending", False, "w") == (
        attributes(fire)["sentinel.state"],
        attributes(fire)["sentinel.deduped"],
        attributes(observation)["sentinel.watcher_id"],
    )
    assert "done" == attributes(session)["sentinel.status"]

    model_calls = by_name["sentinel.model_call"]
    assert model_calls
    assert {session.span_id} == {span.parent_span_id for span in model_calls}
    assert (120, 30) == (
        attributes(model_calls[0])["gen_ai.usage.input_tokens"],
        attributes(model_calls[0])["gen_ai.usage.output_tokens"],
    )
    tools = [
        (a["sentinel.tool"], a["sentinel.policy.decision"])
        for a in map(attributes, by_name["sentinel.tool_call"])
    ]
    assert [("sentinel_act", "auto"), ("sentinel_act", "ok")] == tools
    [policy] = by_name["sentinel.policy_decision"]
    assert ("echo-ok", "auto") == (
        attributes(policy)["sentinel.policy.rule_id"],
        attributes(policy)["sentinel.policy.decision"],
    )
    [relay] = by_name["sentinel.relay"]
    assert ("fulfilled", "agent") == (attributes(relay)["sentinel.state"], attributes(relay)["sentinel.page"])
    [delivery] = by_name["sentinel.delivery"]
    assert fire.span_id == delivery.parent_span_id == relay.parent_span_id
    assert ("hook", "notify", "delivered", 1) == (
        attributes(delivery)["sentinel.target"],
        attributes(delivery)["sentinel.delivery.kind"],
        attributes(delivery)["sentinel.delivery.status"],
        attributes(delivery)["sentinel.delivery.attempt"],
    )


def spans_by_name(collector: Collector) -> dict[str, list[Any]]:
    by_name: dict[str, list[Any]] = {}
    for span in collector.spans:
        by_name.setdefault(span.name, []).append(span)
    return by_name


@pytest.mark.slow
async def test_a_fallback_and_the_agents_late_follow_up_are_in_the_fires_trace(
    tmp_path: Path, sink: Sink, collector: Collector
) -> None:
    """The deadline passes while the agent thinks: the relay's span says the fallback paged, and
    the fallback's delivery and the agent's later notify (a follow-up) hang under the fire."""
    async with HeldModel() as model:
        model.reply_tool_call("sentinel_act", NOTIFY).reply_text("done")
        text = CONFIG.format(collector=collector.url, model_url=model.url, sink=sink.url("/in"))
        service, callback_id = await fired(
            tmp_path, text + "hookResponseTimeoutMs: 500\ndefaultHookModel: agent\n"
        )
        try:
            await wait_for(lambda: sink.bodies("fallback"), what="the fallback delivered")
            model.answer.set()  # the agent answers after the deadline
            await wait_for(lambda: sink.bodies("notify"), what="the follow-up delivered")
            await wait_for(lambda: service.sessions.queue.finished.get(callback_id), what="the session")
            contract = await service.store.get_contract(callback_id)
            assert contract is not None
        finally:
            await service.stop()
    assert {contract.trace_id} == {span.trace_id.hex() for span in collector.spans}
    by_name = spans_by_name(collector)
    [fire] = by_name["sentinel.fire"]
    [relay] = by_name["sentinel.relay"]
    assert ("fallback_sent", "fallback") == (
        attributes(relay)["sentinel.state"],
        attributes(relay)["sentinel.page"],
    )
    assert attributes(relay)["sentinel.lateness_ms"] >= 0
    deliveries = sorted(
        (attributes(span)["sentinel.delivery.kind"], attributes(span)["sentinel.delivery.follow_up"])
        for span in by_name["sentinel.delivery"]
        if span.parent_span_id == fire.span_id
    )
    assert [("fallback", False), ("notify", True)] == deliveries


NO_ENDPOINT = """\
import asyncio, pathlib, sys
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service

async def main() -> None:
    root = pathlib.Path(sys.argv[1])
    (root / "sentinel.yaml").write_text(
        "store: sqlite:///state.db\\nserver: {host: 127.0.0.1, port: 0}\\nhookResponseDedupeWindowMs: 0\\n"
        "targets: {console: {type: console}}\\n"
    )
    (root / "watchers").mkdir()
    (root / "watchers" / "w.yaml").write_text("id: w\\nstrategy: webhook\\ndeliveryTargets: [console]\\n")
    service = Service(load_config(root / "sentinel.yaml", environ={}))
    await service.start()
    try:
        outcome = await service.manager.ingest("w", {"disk": 97})
        assert outcome.contract is not None and outcome.contract.trace_id is None
        assert service.events.tracing is None
    finally:
        await service.stop()
    loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter")))
    assert not loaded, loaded

asyncio.run(main())
"""


def test_without_an_endpoint_no_opentelemetry_is_loaded(tmp_path: Path) -> None:
    """No endpoint, no cost: a service that fires loads neither the SDK nor the exporter and makes
    no span (the API's MCP library loads the OpenTelemetry API for itself; no tracer is made)."""
    done = subprocess.run(
        [sys.executable, "-c", NO_ENDPOINT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
