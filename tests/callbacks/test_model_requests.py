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
async def model() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as server:
        yield server


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
