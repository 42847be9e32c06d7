"""The scripted backend's default message through a running service: event, watcher, priority, payload."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from tests.support import Endpoint, Sink, wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 20000
hookResponseDedupeWindowMs: 0
limits: {{minIntervalMs: 100}}
targets:
  hook: {{type: webhook, url: "{sink}"}}
"""

WATCHER = """\
id: vault-7
strategy: http-poll
endpoint: "{url}"
intervalMs: 100
headers: {{Authorization: "Bearer ${{env:VAULT_TOKEN}}"}}
conditions: [{{path: health, op: lt, value: 1.2}}]
deliveryTargets: [hook]
fire: {{eventName: liquidation_risk, priority: high}}
"""

TOKEN = "tok-4f9a2c7e1b"  # the endpoint echoes it back: it must reach nobody


@pytest.fixture
async def endpoint() -> AsyncIterator[Endpoint]:
    server = Endpoint()

    async def vault(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "health": 1.05,
                "vault": 7,
                "owner": "ops",
                "echo": request.headers.get("Authorization", ""),
                "positions": [{"asset": "ETH", "size": n} for n in range(20)],
                "zz_last": "x" * 1000,
            }
        )

    server.handler = vault
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def service(tmp_path: Path, sink: Sink, endpoint: Endpoint) -> AsyncIterator[Service]:
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(sink=sink.url("/in")))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "v.yaml").write_text(WATCHER.format(url=endpoint.url("/vault")))
    running = Service(load_config(tmp_path / "sentinel.yaml", environ={"VAULT_TOKEN": TOKEN}))
    await running.start()
    yield running
    await running.stop()


async def test_default_message_names_event_watcher_priority_and_payload(service: Service, sink: Sink) -> None:
    """With no messageTemplate the delivered notify carries the event, watcher, priority and a
    bounded payload summary, secrets redacted."""
    [body] = await wait_for(lambda: sink.bodies("notify"), what="the scripted notify")
    message = body["message"]
    assert message.startswith("liquidation_risk fired on vault-7 (high): ")
    assert ["health=1.05", 'owner="ops"', "vault=7"] == [
        part for part in ("health=1.05", 'owner="ops"', "vault=7") if part in message
    ]
    assert (False, True, False) == (TOKEN in message, len(message) <= 300, "\n" in message)
