"""What a model is sent, read from a fake model server's recorded request bodies: tool results
with secrets masked, and only the tools (and schema) the watcher's autonomy allows."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.testing import FakeOpenAIServer
from tests.support import wait_for

MODEL_KEY = "mk_Zr7Qp2Lx9Vw4Tn8B"

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  local: {{type: openai, baseUrl: "{model_url}", model: m, apiKey: "${{env:MODEL_KEY}}", timeoutMs: 5000}}
targets: {{console: {{type: console}}}}
actionPolicy:
  default: deny
  rules:
    - {{id: cat-ok, priority: 10, decision: auto, conditions: [{{path: argv0, op: eq, value: cat}}]}}
"""

WATCHERS = """\
watchers:
  - {id: act, strategy: webhook, deliveryTargets: [console]}
  - {id: notify-only, strategy: webhook, deliveryTargets: [console], autonomy: notify_only}
  - {id: escalate-only, strategy: webhook, deliveryTargets: [console], autonomy: escalate_only}
"""

Start = Callable[[], Awaitable[Service]]


@pytest.fixture
async def start(tmp_path: Path, model: FakeOpenAIServer) -> AsyncIterator[Start]:
    services: list[Service] = []

    async def run() -> Service:
        (tmp_path / "sentinel.yaml").write_text(CONFIG.format(model_url=model.url))
        (tmp_path / "watchers").mkdir(exist_ok=True)
        (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={"MODEL_KEY": MODEL_KEY}))
        await service.start()
        services.append(service)
        return service

    yield run
    for service in services:
        await service.stop()


async def session_of(service: Service, watcher_id: str, payload: Any) -> str:
    """Fire ``watcher_id`` with ``payload`` and wait for its session's final status."""
    outcome = await service.manager.ingest(watcher_id, payload)
    assert outcome.contract is not None
    callback_id = outcome.contract.callback_id
    return await wait_for(lambda: service.sessions.queue.finished.get(callback_id), what="the session")


def tools_sent(model: FakeOpenAIServer) -> dict[str, dict[str, Any]]:
    """The tools of the first request, by name."""
    return {t["function"]["name"]: t["function"] for t in model.requests[0]["tools"]}


async def test_tool_results_reach_the_model_with_secrets_masked(
    start: Start, model: FakeOpenAIServer, tmp_path: Path
) -> None:
    """A command printing a secret and a history holding one: the next request carries ``***``."""
    leak = tmp_path / "leak.txt"
    leak.write_text(f"token={MODEL_KEY}\n")
    model.reply_tool_calls(
        [
            ("sentinel_act", {"action": "run_command", "command": "cat", "args": [str(leak)]}),
            ("sentinel_history", {"limit": 5}),
        ]
    )
    service = await start()
    assert "done" == await session_of(service, "act", {"echo": f"key {MODEL_KEY}"})
    ran, history = [json.loads(m["content"]) for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert (True, "token=***\n") == (ran["ok"], ran["stdout"])
    assert "key ***" == history["observations"][0]["value"]["echo"]
    assert [] == [i for i, body in enumerate(model.requests) if MODEL_KEY in json.dumps(body)]


async def test_notify_only_offers_sentinel_act_without_run_command(
    start: Start, model: FakeOpenAIServer
) -> None:
    """Under notify_only the sentinel_act schema allows "notify" only, and nothing speaks of commands."""
    service = await start()
    assert "done" == await session_of(service, "notify-only", {"n": 1})
    act = tools_sent(model)["sentinel_act"]
    properties = act["parameters"]["properties"]
    assert ["notify"] == properties["action"]["enum"]
    assert {"action", "message", "targets"} == set(properties)
    assert "run_command" not in json.dumps(model.requests[0])


async def test_escalate_only_offers_escalate_and_history_only(start: Start, model: FakeOpenAIServer) -> None:
    """Under escalate_only only sentinel_escalate and sentinel_history are offered or named."""
    service = await start()
    assert "done" == await session_of(service, "escalate-only", {"n": 1})
    assert {"sentinel_escalate", "sentinel_history"} == set(tools_sent(model))
    sent = json.dumps(model.requests[0])
    assert ("run_command" in sent, "sentinel_act" in sent) == (False, False)


async def test_act_offers_every_tool(start: Start, model: FakeOpenAIServer) -> None:
    """Under act (the default) sentinel_act offers both actions."""
    service = await start()
    assert "done" == await session_of(service, "act", {"n": 1})
    properties = tools_sent(model)["sentinel_act"]["parameters"]["properties"]
    assert ["notify", "run_command"] == properties["action"]["enum"]


async def test_a_transient_model_failure_is_asked_again(start: Start, model: FakeOpenAIServer) -> None:
    """A 503 on the first request: the same request is sent again and the session ends normally."""
    model.fail(503)
    service = await start()
    assert "done" == await session_of(service, "act", {"n": 1})
    assert [model.requests[0]["messages"]] * 2 == [body["messages"] for body in model.requests]


async def test_a_model_failing_three_times_fails_the_session(start: Start, model: FakeOpenAIServer) -> None:
    """Three 503s in a row (MODEL_BACKOFF's attempts): the session fails after the third request."""
    model.fail(503).fail(503).fail(503)
    service = await start()
    assert "failed" == await session_of(service, "act", {"n": 1})
    assert 3 == len(model.requests)


async def test_a_refused_model_request_is_not_asked_again(start: Start, model: FakeOpenAIServer) -> None:
    """A 400 will fail alike: the session fails after one request."""
    model.fail(400)
    service = await start()
    assert "failed" == await session_of(service, "act", {"n": 1})
    assert 1 == len(model.requests)
