"""A secret inside a target URL never leaves redacted: not in the API, the CLI, the store or telemetry.

The webhook target's URL carries a key from the environment; the receiver answers 500 with an
error page that echoes the URL it was asked for, as many frameworks do.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from tests.cli.conftest import sentinel_command
from tests.service.test_api import call
from tests.support import Endpoint, wait_for

pytestmark = pytest.mark.slow

HOOK_KEY = "hk_8f3Kq9ZpW2xVb7Lm"

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
targets:
  hook: {{type: webhook, url: "http://127.0.0.1:{port}/hook?key=${{env:HOOK_KEY}}"}}
delivery: {{maxAttempts: 1}}
telemetry: {{eventsFile: events.jsonl}}
"""

WATCHER = """\
id: w
strategy: webhook
conditions: [{path: v, op: gt, value: 10}]
deliveryTargets: [hook]
"""


@pytest.fixture
async def echoing() -> AsyncIterator[Endpoint]:
    """A receiver whose 500 page echoes the URL it was asked for."""

    async def fail(request: web.Request) -> web.StreamResponse:
        page = f"<html><title>Error at {request.url}</title><body>({request.path_qs})</body></html>"
        return web.Response(status=500, text=page, content_type="text/html")

    server = Endpoint()
    server.handler = fail
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def service(tmp_path: Path, echoing: Endpoint) -> AsyncIterator[Service]:
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(port=echoing.port))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w.yaml").write_text(WATCHER)
    running = Service(load_config(tmp_path / "sentinel.yaml", environ={"HOOK_KEY": HOOK_KEY}))
    await running.start()
    yield running
    await running.stop()


async def cli(service: Service, *args: str) -> str:
    """``sentinel ARGS --url …`` in a subprocess; its stdout and stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    done = await asyncio.to_thread(
        subprocess.run,
        [*sentinel_command(), *args, "--url", service.url, "-c", str(service.config.path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**env, "HOOK_KEY": HOOK_KEY, "COLUMNS": "250"},
    )
    assert 0 == done.returncode, done.stderr
    return done.stdout + done.stderr


def store_rows(path: Path) -> str:
    """Every row of every table of the SQLite store, as text."""
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return "\n".join(repr(row) for table in tables for row in db.execute(f'SELECT * FROM "{table}"'))


async def test_a_secret_echoed_by_a_failing_target_is_shown_nowhere(
    service: Service, echoing: Endpoint
) -> None:
    """Dead letter, delivery lastError, CLI, store rows and telemetry show ``***``, never the key."""
    outcome = await service.manager.ingest("w", {"v": 11})
    assert outcome.contract is not None
    callback_id = outcome.contract.callback_id

    async def dead_letter() -> list[dict[str, object]]:
        _, body = await call(service, "GET", "/api/v1/inbox?kind=delivery_failure")
        return list(body["items"])

    items = await wait_for(dead_letter, what="the delivery_failure item")
    item_id = str(items[0]["id"])
    shown = [
        repr(items),
        repr(await call(service, "GET", f"/api/v1/inbox/{item_id}")),
        repr(await call(service, "GET", f"/api/v1/callbacks/{callback_id}")),
        repr(await call(service, "GET", "/api/v1/callbacks")),
        await cli(service, "inbox", "list"),
        await cli(service, "inbox", "show", item_id),
        await cli(service, "inbox", "show", item_id, "--json"),
        await cli(service, "callbacks", "show", callback_id),
        await cli(service, "callbacks", "show", callback_id, "--json"),
    ]
    await service.stop()  # flush every write before reading the files
    shown += [
        store_rows(service.config.base_dir / "state.db"),
        (service.config.base_dir / "events.jsonl").read_text(),
    ]
    assert echoing.requests >= 1
    assert "Error at" in shown[1]  # the echoed page is there, masked
    assert [] == [text[:400] for text in shown if HOOK_KEY in text]
    assert "key=***" in shown[1]
