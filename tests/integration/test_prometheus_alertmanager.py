"""Real Prometheus and Alertmanager into Sentinel, end to end (SPEC.md §16; issue 16.3).

Debian's ``prometheus`` (2.42) and ``prometheus-alertmanager`` (0.25) run on 127.0.0.1 with free
ports and temporary config files: Prometheus scrapes a tiny exporter (and Sentinel's own /metrics),
evaluates a rule every second that fires at once on the exporter's value, and sends to
Alertmanager, which routes to a Sentinel ``webhook`` watcher with ``format: alertmanager`` and a
bearer token. The alert reaches a Slack stand-in through a hook session (the scripted model), once
however often Alertmanager repeats it; when the value drops the rule resolves and the resolved line
replies in the fire's thread.

Without the binaries the test skips locally and fails in CI (``CI`` set): .ci/run installs them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from tests.delivery.slack_api import Posted, SlackApi, slack_api
from tests.support import Endpoint, wait_for

__all__ = ["slack_api"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PACKAGES = ("prometheus", "prometheus-alertmanager")
TOKEN = "am-bearer-7f3e9c21d4"
DEADLINE_S = 90.0  # each stage: startup, fire, resolve (seconds; normally a few)

SENTINEL = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 30000
notificationPayloadMode: none
targets:
  ops: {{type: slack, token: xoxb-test-token, channel: "#ops", apiBase: "{slack}"}}
"""

WATCHER = """\
id: prom
strategy: webhook
format: alertmanager
auth: {bearerToken: "${env:AM_TOKEN}"}
conditions: [{path: labels.severity, op: eq, value: critical}]
fire:
  eventName: prometheus_alert
  priority: high
  messageTemplate: "${payload.labels.alertname} on ${payload.labels.queue}: ${payload.annotations.summary}"
deliveryTargets: [ops]
"""

PROMETHEUS = """\
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [rules.yml]
alerting:
  alertmanagers:
    - static_configs: [{{targets: ["127.0.0.1:{alertmanager}"]}}]
scrape_configs:
  - job_name: exporter
    static_configs: [{{targets: ["127.0.0.1:{exporter}"]}}]
  - job_name: sentinel
    static_configs: [{{targets: ["127.0.0.1:{sentinel}"]}}]
"""

RULES = """\
groups:
  - name: sentinel-it
    rules:
      - alert: QueueTooDeep
        expr: it_queue_depth > 100
        for: 0s
        labels: {severity: critical}
        annotations: {summary: "depth {{ $value }}"}
"""

ALERTMANAGER = """\
route:
  receiver: sentinel
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 2s
receivers:
  - name: sentinel
    webhook_configs:
      - url: "http://127.0.0.1:{sentinel}/hooks/ingest/prom"
        send_resolved: true
        http_config:
          authorization: {{credentials: "{token}"}}
"""


def binary(*names: str) -> str:
    """The first of ``names`` on PATH; skip locally without it, fail in CI."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    wanted = " or ".join(names)
    if os.environ.get("CI"):
        pytest.fail(f"{wanted} is not installed; .ci/run installs Debian's {' and '.join(PACKAGES)}")
    pytest.skip(f"{wanted} is not installed (apt-get install {' '.join(PACKAGES)})")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Daemon:
    """A program this test started; stopped by its own handle, its log kept for failures."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    started: list[Daemon] = []
    yield started
    for daemon in reversed(started):
        daemon.stop()


def start(daemons: list[Daemon], name: str, argv: list[str], cwd: Path) -> Daemon:
    log = cwd / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    daemon = Daemon(name, process, log)
    daemons.append(daemon)
    return daemon


class Exporter(Endpoint):
    """A tiny Prometheus exporter: ``/metrics`` serves ``it_queue_depth`` (set ``depth``)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 250
        self.handler = self._metrics

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        text = (
            "# HELP it_queue_depth Jobs waiting in the test queue.\n"
            "# TYPE it_queue_depth gauge\n"
            f'it_queue_depth{{queue="billing"}} {self.depth}\n'
        )
        return web.Response(text=text, content_type="text/plain")


@pytest.fixture
async def exporter() -> AsyncIterator[Exporter]:
    server = Exporter()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def sentinel(tmp_path: Path, slack_api: SlackApi) -> AsyncIterator[Service]:
    project = tmp_path / "sentinel"
    (project / "watchers").mkdir(parents=True)
    (project / "sentinel.yaml").write_text(SENTINEL.format(slack=slack_api.base()))
    (project / "watchers" / "prom.yaml").write_text(WATCHER)
    service = Service(load_config(project / "sentinel.yaml", environ={"AM_TOKEN": TOKEN}))
    await service.start()
    yield service
    await service.stop()


async def get_json(url: str) -> Any:
    """GET ``url`` as JSON; None while the server does not answer 200."""
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return await response.json() if response.status == 200 else None
    except (aiohttp.ClientError, ValueError):
        return None


async def ready(url: str) -> bool:
    try:
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return response.status == 200
    except aiohttp.ClientError:
        return False


def thread_of(api: SlackApi, text: str) -> tuple[Posted, list[Posted]] | None:
    """The root message containing ``text`` and its replies, once it is posted."""
    roots = [m for m in api.roots() if text in m.text]
    return (roots[0], api.replies(roots[0])) if roots else None


async def test_prometheus_alert_reaches_slack_once_and_resolves_in_its_thread(
    tmp_path: Path, daemons: list[Daemon], exporter: Exporter, sentinel: Service, slack_api: SlackApi
) -> None:
    """Fire → one agent message in Slack despite Alertmanager's repeats; resolve → a reply in its thread."""
    prometheus_bin = binary("prometheus")
    alertmanager_bin = binary("prometheus-alertmanager", "alertmanager")
    sentinel_port = int(sentinel.url.rsplit(":", 1)[1])
    prom_port, am_port = free_port(), free_port()
    work = tmp_path / "monitoring"
    work.mkdir()
    (work / "prometheus.yml").write_text(
        PROMETHEUS.format(alertmanager=am_port, exporter=exporter.port, sentinel=sentinel_port)
    )
    (work / "rules.yml").write_text(RULES)
    (work / "alertmanager.yml").write_text(ALERTMANAGER.format(sentinel=sentinel_port, token=TOKEN))
    alertmanager = start(
        daemons,
        "alertmanager",
        [
            alertmanager_bin,
            f"--config.file={work / 'alertmanager.yml'}",
            f"--storage.path={work / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{am_port}",
            "--cluster.listen-address=",  # no gossip: one Alertmanager, no cluster port
        ],
        work,
    )
    prometheus = start(
        daemons,
        "prometheus",
        [
            prometheus_bin,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        work,
    )
    logs = lambda: f"\n--- prometheus\n{prometheus.tail()}\n--- alertmanager\n{alertmanager.tail()}"  # noqa: E731
    try:
        await wait_for(
            lambda: ready(f"http://127.0.0.1:{am_port}/-/ready"), timeout_s=DEADLINE_S, what="Alertmanager"
        )
        await wait_for(
            lambda: ready(f"http://127.0.0.1:{prom_port}/-/ready"), timeout_s=DEADLINE_S, what="Prometheus"
        )

        async def sentinel_scraped() -> bool:
            url = f"http://127.0.0.1:{prom_port}/api/v1/query?query=up%7Bjob%3D%22sentinel%22%7D"
            answer = await get_json(url)
            results = answer["data"]["result"] if answer else []
            return bool(results) and results[0]["value"][1] == "1"

        await wait_for(sentinel_scraped, timeout_s=DEADLINE_S, what="Prometheus scraping Sentinel's /metrics")
        fired = await wait_for(
            lambda: thread_of(slack_api, "QueueTooDeep on billing: depth 250"),
            timeout_s=DEADLINE_S,
            what="the agent's message in Slack",
        )

        async def repeats_seen() -> bool:  # Alertmanager re-sent the group (repeat_interval 2s)
            history = await sentinel.store.observations("prom", limit=10)
            return sum(1 for o in history if o.value.get("status") == "firing") >= 3

        await wait_for(repeats_seen, timeout_s=DEADLINE_S, what="Alertmanager's repeats")
        contracts = (await sentinel.store.list_contracts(watcher_id="prom")).items
        assert (1, 1) == (len(contracts), len(slack_api.roots())), slack_api.messages

        exporter.depth = 3
        root, _ = fired

        def resolved_reply() -> list[Posted]:
            return [m for m in slack_api.replies(root) if m.kind == "resolved"]

        [reply] = await wait_for(resolved_reply, timeout_s=DEADLINE_S, what="the resolved line in the thread")
        assert reply.text.startswith("Sentinel: prometheus_alert on prom resolved after ")
        assert reply.text.endswith("(alert QueueTooDeep).")
        assert contracts[0].callback_id == root.callback_id
    except AssertionError as exc:
        raise AssertionError(f"{exc}{logs()}") from exc
