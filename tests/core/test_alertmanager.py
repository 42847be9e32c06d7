"""Alertmanager and Grafana webhook bodies as observations (SPEC.md §16): shape, identity, errors."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_hooks.core.alertmanager import (
    AlertPayloadError,
    alert_callback_id,
    alert_dedupe_basis,
    alert_duration_s,
    alert_name,
    alert_observations,
    label_fingerprint,
)
from sentinel_hooks.core.envelope import CALLBACK_ID


def notification(*alerts: dict[str, Any], **group: Any) -> dict[str, Any]:
    """An Alertmanager (version 4) webhook body around ``alerts``."""
    return {
        "version": "4",
        "groupKey": '{}:{alertname="HighLoad"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "sentinel",
        "groupLabels": {"alertname": "HighLoad"},
        "commonLabels": {"alertname": "HighLoad", "severity": "critical"},
        "commonAnnotations": {"summary": "load is high"},
        "externalURL": "http://am.example:9093",
        "alerts": list(alerts),
        **group,
    }


def alert(fingerprint: str = "f1", status: str = "firing", **more: Any) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {"alertname": "HighLoad", "instance": fingerprint},
        "annotations": {"summary": "load is high"},
        "startsAt": "2026-01-01T10:00:00.123456789Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prom.example:9090/graph",
        "fingerprint": fingerprint,
        **more,
    }


def test_each_alert_is_an_observation_with_the_group_keys() -> None:
    """Every alert becomes one observation carrying its own keys and the group's."""
    observed = alert_observations(notification(alert("f1"), alert("f2", "resolved")))
    assert [("f1", "firing"), ("f2", "resolved")] == [(o["fingerprint"], o["status"]) for o in observed]
    expected = {
        "status": "firing",
        "labels": {"alertname": "HighLoad", "instance": "f1"},
        "annotations": {"summary": "load is high"},
        "startsAt": "2026-01-01T10:00:00.123456789Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prom.example:9090/graph",
        "fingerprint": "f1",
        "receiver": "sentinel",
        "groupKey": '{}:{alertname="HighLoad"}',
        "groupLabels": {"alertname": "HighLoad"},
        "commonLabels": {"alertname": "HighLoad", "severity": "critical"},
        "commonAnnotations": {"summary": "load is high"},
        "externalURL": "http://am.example:9093",
    }
    assert expected == observed[0]


def test_grafana_extras_are_kept_and_missing_keys_defaulted() -> None:
    """Grafana's per-alert keys stay; absent optional keys become empty; no fingerprint: from labels."""
    grafana = {
        "status": "firing",
        "labels": {"alertname": "DiskFull"},
        "startsAt": "2026-01-01T10:00:00Z",
        "valueString": "[ var='A' value=97 ]",
        "dashboardURL": "http://grafana.example/d/x",
    }
    [observed] = alert_observations({"version": "1", "state": "alerting", "alerts": [grafana]})
    assert {
        "valueString": "[ var='A' value=97 ]",
        "dashboardURL": "http://grafana.example/d/x",
        "annotations": {},
        "endsAt": "",
        "receiver": "",
        "commonLabels": {},
        "fingerprint": label_fingerprint({"alertname": "DiskFull"}),
    } == {key: observed[key] for key in ("valueString", "dashboardURL", "annotations", "endsAt",
                                         "receiver", "commonLabels", "fingerprint")}  # fmt: skip


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ([], ""),
        ({"status": "firing"}, "alerts"),
        ({"alerts": {"a": 1}}, "alerts"),
        ({"alerts": ["x"]}, "alerts[0]"),
        ({"alerts": [{"labels": {}, "startsAt": "2026-01-01T00:00:00Z"}]}, "alerts[0].status"),
        ({"alerts": [{"status": "pending", "startsAt": "x"}]}, "alerts[0].status"),
        ({"alerts": [{"status": "firing", "labels": {}}]}, "alerts[0].startsAt"),
        ({"alerts": [{"status": "firing", "startsAt": 5}]}, "alerts[0].startsAt"),
        ({"alerts": [{"status": "firing", "startsAt": "t", "labels": {"a": 1}}]}, "alerts[0].labels.a"),
        ({"alerts": [{"status": "firing", "startsAt": "t", "labels": []}]}, "alerts[0].labels"),
        (
            {
                "alerts": [
                    {"status": "firing", "startsAt": "t"},
                    {"status": "firing", "startsAt": "t", "endsAt": 1},
                ]
            },
            "alerts[1].endsAt",
        ),
        (
            {"alerts": [{"status": "resolved", "startsAt": "t", "annotations": {"s": 2}}]},
            "alerts[0].annotations.s",
        ),
        ({"alerts": [], "commonLabels": "x"}, "commonLabels"),
        ({"alerts": [], "commonLabels": {"a": 1}}, "commonLabels.a"),
        ({"alerts": [], "receiver": 3}, "receiver"),
    ],
)
def test_a_body_that_is_not_a_notification_names_what_is_wrong(body: Any, path: str) -> None:
    """A wrong body raises AlertPayloadError naming the key, with a message saying what it must be."""
    with pytest.raises(AlertPayloadError) as raised:
        alert_observations(body)
    assert (path, True) == (raised.value.path, "Alertmanager webhook" in str(raised.value))


def test_callback_id_is_per_watcher_fingerprint_and_start() -> None:
    """The same alert on one watcher gets one id; another start, fingerprint or watcher another."""
    first = alert_callback_id("am", alert("f1"))
    others = {
        alert_callback_id("am", alert("f2")),
        alert_callback_id("am", alert("f1", startsAt="2026-01-01T11:00:00Z")),
        alert_callback_id("other", alert("f1")),
    }
    assert first == alert_callback_id("am", alert("f1", status="resolved", endsAt="2026-01-01T11:00:00Z"))
    assert (3, False, True) == (len(others), first in others, CALLBACK_ID.fullmatch(first) is not None)


def test_dedupe_basis_is_fingerprint_and_start_else_the_payload() -> None:
    """An alert's default dedupe key hashes its identity only; other payloads are hashed whole."""
    assert {"fingerprint": "f1", "startsAt": "2026-01-01T10:00:00.123456789Z"} == alert_dedupe_basis(
        alert("f1", annotations={"value": "97"})
    )
    assert {"x": 1} == alert_dedupe_basis({"x": 1})


@pytest.mark.parametrize(
    ("starts", "ends", "seconds"),
    [
        ("2026-01-01T10:00:00Z", "2026-01-01T10:04:12.5Z", 252.5),
        ("2026-01-01T10:00:00.123456789+02:00", "2026-01-01T08:01:00.123456789Z", 60.0),
        ("2026-01-01T10:00:00Z", "0001-01-01T00:00:00Z", None),
        ("2026-01-01T10:00:00Z", "", None),
        ("2026-01-01T10:00:00Z", "2026-01-01T09:00:00Z", None),
        ("not a time", "2026-01-01T09:00:00Z", None),
    ],
)
def test_duration_is_ends_minus_starts_when_both_say(starts: str, ends: str, seconds: float | None) -> None:
    """The resolved line's duration: endsAt - startsAt; None for Go's zero time, blanks or nonsense."""
    assert seconds == alert_duration_s({"startsAt": starts, "endsAt": ends})


def test_alert_name_is_the_alertname_label() -> None:
    assert ("HighLoad", None) == (alert_name(alert()), alert_name({"labels": {}}))
