"""``retention.observationsPerWatcher`` bounds what a reader sees (SPEC §18, §5.3): the agent's
``sentinel_history`` never gets more than the configured number of observations."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.testing import FakeOpenAIServer
from tests.support import wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
hookResponseTimeoutMs: 20000
notificationPayloadMode: none
retention: {{observationsPerWatcher: 5}}
models:
  local: {{type: openai, baseUrl: "{model_url}", model: small-model, timeoutMs: 5000}}
defaultHookModel: local
targets:
  stdout: {{type: console}}
"""
WATCHER = """\
id: a
strategy: webhook
deliveryTargets: [stdout]
conditions: [{path: go, op: eq, value: true}]
"""


@pytest.fixture
async def service(tmp_path: Path, model: FakeOpenAIServer) -> AsyncIterator[Service]:
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(model_url=model.url))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "a.yaml").write_text(WATCHER)
    started = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
    await started.start()
    yield started
    await started.stop()


async def test_sentinel_history_returns_at_most_the_kept_observations(
    service: Service, model: FakeOpenAIServer
) -> None:
    """40 observations with ``observationsPerWatcher: 5``: history asked for 500 gets the newest 5."""
    for n in range(40):
        await service.manager.ingest("a", {"n": n, "go": False})

    async def newest() -> bool:
        found = await service.store.observations("a", limit=1)
        return bool(found) and found[0].value["n"] == 39

    await wait_for(newest, what="the 40th observation written")
    model.reply_tool_call("sentinel_history", {"limit": 500})
    model.reply_text("done")
    outcome = await service.manager.ingest("a", {"n": 40, "go": True})
    assert outcome.contract is not None
    callback_id = outcome.contract.callback_id
    await wait_for(lambda: service.sessions.queue.finished.get(callback_id), what="the session")
    [result] = [json.loads(m["content"]) for m in model.requests[1]["messages"] if m["role"] == "tool"]
    values = [o["value"]["n"] for o in result["observations"]]
    assert 5 == len(values), result
    assert values == sorted(values, reverse=True)
    assert len(await service.store.observations("a", limit=500)) <= 5
