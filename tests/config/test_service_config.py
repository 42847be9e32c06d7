"""sentinel.yaml defaults and YAML 1.2 semantics."""

from __future__ import annotations

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.errors import ConfigError
from tests.conftest import Writer


def test_defaults_match_the_spec() -> None:
    """Every default of SPEC.md §2.1 is in the model."""
    config = ServiceConfig()
    expected = {
        "store": "sqlite:///.sentinel/state.db",
        "watchersDir": "watchers",
        "skillsDir": "skills",
        "server": {
            "host": "127.0.0.1",
            "port": 8765,
            "apiToken": None,
            "tokens": [],
            "metricsAuth": False,
            "allowCommandWatchers": False,
            "mcpApprovals": False,
            "publicUrl": None,
        },
        "allowedHosts": [],
        "allowPrivateNetworks": False,
        "hookSessionPrefix": "sentinel:hooks",
        "hookSessionGroup": None,
        "hookResponseTimeoutMs": 30000,
        "hookSessionMaxMs": 600000,
        "hookResponseFallbackMode": "concise",
        "hookResponseDedupeWindowMs": 120000,
        "notificationPayloadMode": "concise",
        "maxOperatorGoalChars": 12000,
        "hookConcurrency": 8,
        "defaultHookModel": None,
        "models": {},
        "targets": {},
        "escalationTargets": [],
        "escalationPolicies": {},
        "defaultEscalationPolicy": None,
        "grouping": {"by": [], "waitMs": 30000, "intervalMs": 300000, "maxFires": 1000},
        "budgets": {"perFire": {"tokens": 200000, "usd": None}, "perDay": {"tokens": None, "usd": None}},
        "delivery": {"maxAttempts": 5, "baseMs": 1000, "maxMs": 60000, "maxElapsedMs": 600000},
        "cluster": {"leaseMs": 10000},
        "actionPolicy": {
            "default": "needs_approval",
            "rules": [],
            "loopGuard": 3,
            "approvalTimeoutMs": 900000,
            "circuitBreaker": 5,
        },
        "limits": {
            "maxWatchers": 100000,
            "maxConditionsPerWatcher": 25,
            "minIntervalMs": 1000,
            "maxResponseBytes": 1048576,
            "maxPayloadChars": 2500,
            "requestTimeoutMs": 10000,
            "maxAlertsPerRequest": 1000,
            "perWatcherMetricsMax": 10000,
        },
        "telemetry": {"eventsFile": None, "otlpEndpoint": None},
        "retention": {
            "callbacksDays": 30,
            "inboxClosedDays": 90,
            "observationsPerWatcher": 500,
            "transcriptsDays": 30,
            "auditDays": 365,
        },
        "maintenanceWindows": [],
        "mcpServers": {},
        "people": {},
        "slack": {"signingSecret": None},
    }
    assert expected == config.model_dump(mode="json")


def test_empty_config_file_is_all_defaults(project: Writer) -> None:
    """An empty sentinel.yaml is valid."""
    assert ServiceConfig() == load_config(project(""), environ={}).service


def test_yaml_12_keeps_no_and_on_as_strings(project: Writer) -> None:
    """`no` and `on` are strings (YAML 1.2), not booleans."""
    watcher = """\
    id: country
    strategy: webhook
    conditions:
      - {path: country, op: eq, value: no}
      - {path: switch, op: eq, value: on}
    """
    loaded = load_config(project(watchers__w_yaml=watcher), environ={})
    values = [c.value for c in loaded.watchers[0].spec.conditions]  # type: ignore[union-attr]
    assert ["no", "on"] == values


def test_env_values_are_registered_as_secrets(project: Writer) -> None:
    """Values from the environment are redacted by the loaded config's redactor."""
    config = "targets:\n  hook: {type: console}\nserver: {apiToken: '${env:API_TOKEN}'}\n"
    loaded = load_config(project(config), environ={"API_TOKEN": "tok-1234567890abcdef"})
    assert "token ***" == loaded.redactor.text("token tok-1234567890abcdef")
    assert loaded.service.server.api_token is not None
    assert "tok-1234567890abcdef" == loaded.service.server.api_token.get_secret_value()


def test_watcher_list_form(project: Writer) -> None:
    """A file may hold several watchers under `watchers:`."""
    text = """\
    watchers:
      - {id: a, strategy: webhook}
      - {id: b, strategy: webhook}
    """
    loaded = load_config(project(watchers__many_yaml=text), environ={})
    assert ["a", "b"] == [w.spec.id for w in loaded.watchers]
    assert [2, 3] == [w.source.line for w in loaded.watchers]


def test_trigger_mode_defaults_by_strategy(project: Writer) -> None:
    """Polled states are edge-triggered, events level-triggered, unless fire.trigger says."""
    text = """\
    watchers:
      - {id: polled, strategy: http-poll, endpoint: "https://api.example.com", intervalMs: 5000}
      - {id: events, strategy: webhook}
      - {id: forced, strategy: webhook, fire: {trigger: edge}}
    """
    loaded = load_config(project(watchers__w_yaml=text), environ={})
    assert ["edge", "level", "edge"] == [w.spec.trigger_mode for w in loaded.watchers]


def test_otlp_endpoint_is_an_http_url(project: Writer) -> None:
    """``telemetry.otlpEndpoint`` (SPEC §22) takes a collector's base URL; anything else says so."""
    loaded = load_config(project("telemetry: {otlpEndpoint: 'http://collector:4318'}\n"), environ={})
    assert "http://collector:4318" == loaded.service.telemetry.otlp_endpoint
    with pytest.raises(ConfigError, match=r"telemetry\.otlpEndpoint: must be an http\(s\) URL"):
        load_config(project("telemetry: {otlpEndpoint: 'collector:4318'}\n"), environ={})
