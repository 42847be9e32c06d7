"""The compose `alertmanager` profile's files (SPEC.md §16; issue 16.7): Prometheus and Alertmanager
configs that their own checkers accept, routed to the example's format: alertmanager watcher.

``promtool`` and ``amtool`` come with Debian's prometheus and prometheus-alertmanager packages
(.ci/run installs them): skipped locally without them, a failure in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from ruamel.yaml import YAML

from sentinel_hooks.config.ingest import IngestAuthSpec
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.config.watcher import WebhookWatcher
from tests.deploy.layout import EXAMPLE, ROOT, compose

ALERTING = ROOT / "deploy" / "alertmanager"
PACKAGES = ("prometheus", "prometheus-alertmanager")


def tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{name} is not installed; .ci/run installs Debian's {' and '.join(PACKAGES)}")
    pytest.skip(f"{name} is not installed (it comes with Debian's prometheus / prometheus-alertmanager)")


def load(path: Path) -> dict[str, Any]:
    data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_promtool_accepts_the_prometheus_config_and_rules() -> None:
    """`promtool check config` accepts prometheus.yml and the rules it names."""
    done = subprocess.run(
        [tool("promtool"), "check", "config", "prometheus.yml"],
        cwd=ALERTING,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == done.returncode, done.stdout + done.stderr


def test_amtool_accepts_the_alertmanager_config() -> None:
    """`amtool check-config` accepts alertmanager.yml."""
    done = subprocess.run(
        [tool("amtool"), "check-config", str(ALERTING / "alertmanager.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert 0 == done.returncode, done.stdout + done.stderr


def test_alertmanager_routes_to_the_example_watcher_with_its_token() -> None:
    """The receiver posts to /hooks/ingest/<the example's alertmanager watcher> on the compose
    sentinel service, with resolved alerts and a bearer token from the file the service writes;
    that watcher reads Alertmanager bodies and checks a bearer token."""
    [receiver] = load(ALERTING / "alertmanager.yml")["receivers"]
    [hook] = receiver["webhook_configs"]
    url = urlsplit(hook["url"])
    watcher_id = url.path.removeprefix("/hooks/ingest/")
    loaded = load_config(EXAMPLE / "sentinel.yaml", environ={"SENTINEL_API_TOKEN": "x" * 24})
    found = loaded.watcher(watcher_id)
    assert found is not None
    spec = found.spec
    assert isinstance(spec, WebhookWatcher)
    command = " ".join(compose()["services"]["alertmanager"]["command"])
    assert (
        ("sentinel", 8765),
        True,
        "Bearer",
        "alertmanager",
        True,
    ) == (
        (url.hostname, url.port),
        hook["send_resolved"],
        hook["http_config"]["authorization"]["type"],
        spec.format,
        isinstance(spec.auth, IngestAuthSpec) and spec.auth.bearer_token is not None,
    )
    assert hook["http_config"]["authorization"]["credentials_file"] in command


def test_prometheus_scrapes_sentinel_and_sends_to_alertmanager() -> None:
    """Prometheus scrapes the sentinel service's /metrics and alerts the alertmanager service."""
    config = load(ALERTING / "prometheus.yml")
    scrape = [t for job in config["scrape_configs"] for c in job["static_configs"] for t in c["targets"]]
    alerting = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert (["sentinel:8765"], ["alertmanager:9093"]) == (scrape, alerting)
