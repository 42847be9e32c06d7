"""The webhook watchers docs/integrations.md gives to copy load, and their templates render."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.config.watcher import WebhookWatcher
from sentinel_hooks.core.alertmanager import alert_observations
from sentinel_hooks.watchers.builder import Firing, build_envelope, render_variables

DOCS = Path(__file__).resolve().parents[2] / "docs"
SERVICE = """\
server: {host: 0.0.0.0, apiToken: "an-api-token-long-enough"}
targets: {oncall: {type: console}}
"""
ENV = {
    "ALERTMANAGER_TOKEN": "am-token-1234",
    "GRAFANA_WEBHOOK_TOKEN": "gf-token-1234",
    "GITHUB_WEBHOOK_SECRET": "gh-secret-1234",
}
ALERT = {
    "version": "4",
    "receiver": "sentinel",
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "HighLoad", "severity": "critical"},
            "annotations": {},
            "startsAt": "2026-03-01T10:00:00Z",
            "fingerprint": "f1",
        }
    ],
}
WORKFLOW_RUN = {
    "action": "completed",
    "workflow_run": {"name": "ci", "conclusion": "failure", "head_branch": "main", "html_url": "https://x"},
    "_headers": {"X-GitHub-Event": "workflow_run", "X-GitHub-Delivery": "72d3162e"},
}


def webhook_blocks() -> list[str]:
    text = (DOCS / "integrations.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.DOTALL)
    return [block for block in blocks if re.search(r"^strategy: webhook$", block, re.MULTILINE)]


def test_integrations_md_shows_three_webhook_watchers() -> None:
    """Alertmanager, Grafana and GitHub each have a watcher to copy (so the next test checks them)."""
    ids = [YAML(typ="safe", pure=True).load(block)["id"] for block in webhook_blocks()]
    assert ["alertmanager", "grafana", "github"] == ids


@pytest.mark.parametrize("block", webhook_blocks(), ids=lambda b: b.split("\n", 1)[0])
def test_documented_watcher_loads_off_loopback_and_renders(tmp_path: Path, block: str) -> None:
    """Each loads beyond loopback (so it has its auth) and its message renders for a sample event."""
    (tmp_path / "sentinel.yaml").write_text(SERVICE)
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w.yaml").write_text(block)
    loaded = load_config(tmp_path / "sentinel.yaml", environ=ENV)
    spec = loaded.watchers[0].spec
    assert isinstance(spec, WebhookWatcher)
    assert spec.authenticated
    payload: Any = alert_observations(ALERT)[0] if spec.format == "alertmanager" else WORKFLOW_RUN
    firing = Firing(kind="match", payload=payload, at=datetime(2026, 3, 1, tzinfo=UTC))
    envelope = build_envelope(spec, loaded.service, firing)
    template = spec.fire.compiled_message
    assert template is not None
    rendered = template.render(render_variables(spec, firing))
    assert (True, True) == (bool(envelope.trigger.dedupe_key), isinstance(rendered, str) and bool(rendered))
