"""schemathesis against a running service: requests generated from the generated OpenAPI document
(valid ones and, in its negative mode, invalid ones) get no 5xx and no answer the document does not
describe (status code, content type, body schema, headers).

The service is real (127.0.0.1, SQLite in a temp folder, an API token) and runs in a thread of its
own, since schemathesis's tests are synchronous. What is not checked: that every request the
schemas allow is accepted (``positive_data_acceptance``): the service also checks what JSON
Schema cannot say (a watcher's endpoint host in allowedHosts, a silence ending in the future, a
known delivery target), and refuses such requests with a documented 400.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from sentinel_hooks.api.openapi import build_openapi
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service

pytestmark = pytest.mark.slow  # 20 to 40 s for every operation together

TOKEN = "schemathesis-token-0123456789"
EXAMPLES = 25  # per operation and generation mode: enough to find a 5xx, bounded for CI
CONFIG = f"""\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0, apiToken: {TOKEN}}}
allowedHosts: ["127.0.0.1"]
limits: {{minIntervalMs: 100, maxResponseBytes: 4096, requestTimeoutMs: 2000}}
targets: {{console: {{type: console}}}}
"""
WATCHERS = {
    "hook.yaml": "id: hook\nstrategy: webhook\nconditions: [{path: level, op: eq, value: crit}]\n"
    "deliveryTargets: [console]\n",
    "alerts.yaml": "id: alerts\nstrategy: webhook\nformat: alertmanager\ndeliveryTargets: [console]\n",
    "signed.yaml": "id: signed\nstrategy: webhook\nsecret: s3cret-s3cret\ndeliveryTargets: [console]\n",
}


# schemathesis's own configuration (its schemathesis.toml format): the token as the document's
# bearer scheme, so schemathesis knows it for the credentials and also checks that a request
# without them, or with others, is refused (given as a plain header instead, it was taken for
# credentials of its own making, and a request it generated a header for was reported, now and
# then, as "API accepts invalid authentication" for being accepted with the valid token);
# an unknown query parameter is ignored, as HTTP APIs do (OpenAPI does not close the list), so a
# request with one is not "invalid data" the service must refuse; a body past the route's limit
# is refused with 413 before its content is read, which is a refusal too; and the coverage phase,
# which walks every keyword of a schema, gets half a minute through a watcher definition (nine
# strategies), so watcher creation gets the examples and random requests only.
SETTINGS = f"""
[auth.openapi.bearerAuth]
bearer = "{TOKEN}"

[generation]
allow-extra-parameters = false

[checks.positive_data_acceptance]
enabled = false

[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422"]

[[operations]]
include-operation-id = "createWatcher"
phases.coverage.enabled = false
"""

schema = schemathesis.openapi.from_dict(
    build_openapi(bearer=True), config=schemathesis.config.SchemathesisConfig.from_str(SETTINGS)
)


class ServiceThread:
    """A Service started from ``folder``'s sentinel.yaml, on an event loop in a thread of its own."""

    def __init__(self, folder: Path) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="schemathesis-service")
        self._service = Service(load_config(folder / "sentinel.yaml", environ={}))

    def start(self) -> str:
        """Start the service; its URL."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._service.start(), self._loop).result(timeout=30)
        return self._service.url

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._service.stop(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()


@pytest.fixture(scope="module")
def service_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running service with three webhook watchers (they never poll) and an API token."""
    folder = tmp_path_factory.mktemp("schemathesis")
    (folder / "sentinel.yaml").write_text(CONFIG)
    (folder / "watchers").mkdir()
    for name, text in WATCHERS.items():
        (folder / "watchers" / name).write_text(text)
    running = ServiceThread(folder)
    url = running.start()
    yield url
    running.stop()


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
def test_the_service_answers_as_its_document_says(case: schemathesis.Case, service_url: str) -> None:
    """No 5xx, and every answer's status, content type, headers and body are the documented ones."""
    case.call_and_validate(base_url=service_url)
