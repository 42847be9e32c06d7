"""Session memory and bounded requests through a running service, against a fake OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.callbacks.sessions import compaction, memory
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract, Observation
from sentinel_hooks.testing import FakeOpenAIServer
from tests.support import Sink, wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 60000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
limits: {{maxPayloadChars: {payload_chars}}}
models:
  local: {{type: openai, baseUrl: "{model_url}", model: small-model, timeoutMs: 10000, maxTurns: 8}}
targets:
  hook: {{type: webhook, url: "{sink}"}}
watchers:
"""

WATCHERS = """\
watchers:
  - {id: a, strategy: webhook, deliveryTargets: [hook], fire: {eventName: disk_high}}
  - {id: b, strategy: webhook, deliveryTargets: [hook], fire: {eventName: queue_stuck}}
"""

Start = Callable[..., Awaitable[Service]]


@pytest.fixture
async def model() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        server.reply_text_when(is_summary_request, "SUMMARY: the history was checked, nothing new")
        yield server


@pytest.fixture
async def start(tmp_path: Path, sink: Sink, model: FakeOpenAIServer) -> AsyncIterator[Start]:
    """Start a service on ``tmp_path`` (again: a restart on the same state)."""
    services: list[Service] = []

    async def run(payload_chars: int = 2500) -> Service:
        text = CONFIG.format(model_url=model.url, sink=sink.url("/in"), payload_chars=payload_chars)
        (tmp_path / "sentinel.yaml").write_text(text.replace("watchers:\n", ""))
        (tmp_path / "watchers").mkdir(exist_ok=True)
        (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
        await service.start()
        services.append(service)
        return service

    yield run
    for service in services:
        await service.stop()


def is_summary_request(body: dict[str, Any]) -> bool:
    return bool(body["messages"]) and compaction.SUMMARY_PROMPT == body["messages"][0].get("content")


async def fire(service: Service, watcher_id: str, payload: Any) -> Contract:
    outcome = await service.manager.ingest(watcher_id, payload)
    assert outcome.contract is not None
    return outcome.contract


async def finished(service: Service, contract: Contract) -> str:
    return await wait_for(
        lambda: service.sessions.queue.finished.get(contract.callback_id), what="the session"
    )


def first_request_of(model: FakeOpenAIServer, n: int) -> dict[str, Any]:
    """The ``n``-th request that opened a callback's conversation (system + first user message)."""
    return [r for r in model.requests if len(r["messages"]) == 2 and not is_summary_request(r)][n]


async def test_the_second_callback_sees_what_the_first_did(
    start: Start, model: FakeOpenAIServer, sink: Sink
) -> None:
    """The model answering a watcher's second callback reads the first one's notify, as plain text."""
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "disk at 97% on db-1"})
    model.reply_text("Notified.")
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "disk still at 97%"})
    service = await start()
    first = await fire(service, "a", {"disk": 97})
    assert "done" == await finished(service, first)
    second = await fire(service, "a", {"disk": 97})
    assert "done" == await finished(service, second)
    messages = first_request_of(model, 1)["messages"]
    assert ["system", "user"] == [m["role"] for m in messages]
    prompt = messages[1]["content"]
    told = prompt[prompt.index("## Earlier callbacks in this session") : prompt.index("## Callback envelope")]
    assert "disk_high on a (match, normal)" in told
    assert 'notified hook: "disk at 97% on db-1"' in told
    assert "contract fulfilled" in told
    assert second.callback_id in prompt[prompt.index("## Callback envelope") :]
    assert ["disk at 97% on db-1", "disk still at 97%"] == [b["message"] for b in sink.bodies("notify")]


async def test_earlier_callbacks_are_told_with_their_ids_and_payloads(
    start: Start, model: FakeOpenAIServer
) -> None:
    """The request for a watcher's third callback names both earlier callbacks by callbackId, each
    with its own payload, on its own line (SPEC §5.1: tell a repeat from a new problem)."""
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "disk at 97% on db-1"})
    model.reply_text("Notified.")
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "disk at 99% on db-2"})
    model.reply_text("Notified.")
    service = await start()
    first = await fire(service, "a", {"disk": 97, "host": "db-1"})
    assert "done" == await finished(service, first)
    second = await fire(service, "a", {"disk": 99, "host": "db-2"})
    assert "done" == await finished(service, second)
    assert "done" == await finished(service, await fire(service, "a", {"disk": 99, "host": "db-2"}))
    prompt = first_request_of(model, 2)["messages"][1]["content"]
    told = prompt[prompt.index("## Earlier callbacks in this session") : prompt.index("## Callback envelope")]
    lines = [line for line in told.splitlines() if line.startswith("- ")]
    assert 2 == len(lines)
    for line, contract, payload in zip(
        lines, (first, second), ('{"disk":97,"host":"db-1"}', '{"disk":99,"host":"db-2"}'), strict=True
    ):
        assert f"callback {contract.callback_id}: disk_high on a" in line
        assert f"payload {payload}" in line


async def test_another_watchers_callbacks_are_not_told(start: Start, model: FakeOpenAIServer) -> None:
    """Memory is per session: a different watcher's session starts with none."""
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "disk at 97% on db-1"})
    service = await start()
    assert "done" == await finished(service, await fire(service, "a", {"disk": 97}))
    assert "done" == await finished(service, await fire(service, "b", {"stuck": 3}))
    prompt = first_request_of(model, 1)["messages"][1]["content"]
    assert "## Earlier callbacks" not in prompt
    assert "disk at 97%" not in prompt


async def test_a_memory_of_another_version_is_folded_again_from_the_start(
    start: Start, model: FakeOpenAIServer
) -> None:
    """A memory checkpoint the code no longer reads (another version) is started afresh: the
    whole transcript is folded, not only what follows the place that checkpoint holds."""
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "disk at 97% on db-1"})
    model.reply_text("Notified.")
    service = await start()
    first = await fire(service, "a", {"disk": 97})
    assert "done" == await finished(service, first)
    key = memory.memory_key(first.session_key)
    await service.store.put_checkpoint(key, {"version": -1, "through_seq": 10_000})
    assert "done" == await finished(service, await fire(service, "a", {"disk": 98}))
    assert 'notified hook: "disk at 97% on db-1"' in first_request_of(model, 1)["messages"][1]["content"]


async def test_a_restarted_session_sends_the_same_memory(
    start: Start, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    """A session cut off by a stop resumes with the very conversation it had, memory included."""
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "disk at 97% on db-1"})
    model.reply_text("Notified.")
    model.hang()
    service = await start()
    assert "done" == await finished(service, await fire(service, "a", {"disk": 97}))
    second = await fire(service, "a", {"disk": 98})
    await wait_for(lambda: len(model.requests) == 3, what="the second callback's request")
    await service.stop()
    restarted = await start()
    assert "done" == await finished(restarted, second)
    cut_off, resumed = model.requests[2]["messages"], model.requests[3]["messages"]
    assert 'notified hook: "disk at 97% on db-1"' in cut_off[1]["content"]
    assert cut_off == resumed


async def test_big_tool_results_never_push_a_request_past_the_budget(
    start: Start, model: FakeOpenAIServer, sink: Sink
) -> None:
    """With a large maxPayloadChars and huge history results, every request fits the budget and
    summaries are made now and then, not on every turn."""
    payload_chars = 20_000
    service = await start(payload_chars=payload_chars)
    at = datetime.now(UTC) - timedelta(hours=1)
    for n in range(40):  # about 4 times maxPayloadChars of history per sentinel_history call
        value = {"n": n, "blob": "x" * 2_500}
        await service.store.write_watcher_batch(
            [("a", Observation(at=at + timedelta(seconds=n), value=value))], {}
        )
    turns = 7
    for _ in range(turns):
        model.reply_tool_call("sentinel_history", {"limit": 500})
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "history is flat"})
    contract = await fire(service, "a", {"disk": 97})
    assert "done" == await finished(service, contract)
    budget = compaction.budget(payload_chars)
    assert [] == [size for size in model.request_sizes if size > budget]
    summaries = sum(1 for body in model.requests if is_summary_request(body))
    assert 1 <= summaries <= (turns + 1) // 3
    agent_requests = [body for body in model.requests if not is_summary_request(body)]
    assert turns + 1 == len(agent_requests)
    assert any(
        "characters cut here to fit the model's context" in str(m.get("content"))
        for m in agent_requests[-1]["messages"]
        if m["role"] == "tool"
    )
    assert ["history is flat"] == [b["message"] for b in sink.bodies("notify")]
