"""Prometheus Alertmanager (and Grafana alerting) webhook bodies, as observations. Pure.

``format: alertmanager`` on a webhook watcher (SPEC.md §16): the body is a notification of a
group of alerts (Alertmanager's webhook version 4; Grafana's alerting webhook has the same
shape, with a few more keys). ``alert_observations`` turns it into one observation per alert::

    {status, labels, annotations, startsAt, endsAt, generatorURL, fingerprint,
     receiver, groupKey, groupLabels, commonLabels, commonAnnotations, externalURL}

An alert's other keys (Grafana's ``values``, ``valueString``, ``dashboardURL``, ``silenceURL``,
…) are kept as they are. A body that is not such a notification raises ``AlertPayloadError``
naming the first thing wrong, so the source's operator can see why it was refused.

An alert is identified by its ``fingerprint`` (a hash of its labels; made from the labels when
a source leaves it out) and its ``startsAt``: Alertmanager sends a firing alert again with the
same pair at every ``repeat_interval``, and a new pair when the alert fires again after it was
resolved. ``alert_callback_id`` makes the callback id of the pair's fire from it, so a repeat
finds its fire (and a resolved alert the fire it ends) by id, in any replica, for as long as
the callback is kept.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sentinel_hooks.canonical import canonical_json, sha256_hex

ALERT_STATUSES = ("firing", "resolved")
GROUP_KEYS = ("receiver", "groupKey", "externalURL")
GROUP_MAPS = ("groupLabels", "commonLabels", "commonAnnotations")
CALLBACK_PREFIX = "alert."


class AlertPayloadError(ValueError):
    """The body is not an Alertmanager notification; ``path`` names the key that is wrong."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"not an Alertmanager webhook body: {path}: {message}" if path else message)
        self.path = path


def _string_map(value: Any, path: str) -> dict[str, str]:
    """A map of label or annotation names to text (absent or null: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AlertPayloadError(path, f"must be an object of strings, not {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(item, str):
            raise AlertPayloadError(f"{path}.{key}", f"must be a string, not {type(item).__name__}")
    return dict(value)


def _text(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise AlertPayloadError(path, f"must be a string, not {type(value).__name__}")
    return value


def label_fingerprint(labels: dict[str, str]) -> str:
    """A fingerprint for an alert sent without one: 16 hex digits of its labels' hash."""
    return sha256_hex(canonical_json(labels))[:16]


def _alert(raw: Any, index: int, group: dict[str, Any]) -> dict[str, Any]:
    path = f"alerts[{index}]"
    if not isinstance(raw, dict):
        raise AlertPayloadError(path, f"must be an object, not {type(raw).__name__}")
    status = raw.get("status")
    if status not in ALERT_STATUSES:
        raise AlertPayloadError(f"{path}.status", f"must be 'firing' or 'resolved', not {status!r}")
    labels = _string_map(raw.get("labels"), f"{path}.labels")
    starts_at = _text(raw.get("startsAt"), f"{path}.startsAt")
    if not starts_at:
        raise AlertPayloadError(
            f"{path}.startsAt", "is missing (it tells one firing of the alert from the next)"
        )
    fingerprint = _text(raw.get("fingerprint"), f"{path}.fingerprint") or label_fingerprint(labels)
    alert = {
        **raw,
        "status": status,
        "labels": labels,
        "annotations": _string_map(raw.get("annotations"), f"{path}.annotations"),
        "startsAt": starts_at,
        "endsAt": _text(raw.get("endsAt"), f"{path}.endsAt"),
        "generatorURL": _text(raw.get("generatorURL"), f"{path}.generatorURL"),
        "fingerprint": fingerprint,
    }
    return {**alert, **group}


def alert_observations(body: Any) -> list[dict[str, Any]]:
    """One observation per alert of the notification ``body``, in its order.

    Raises ``AlertPayloadError`` for a body that is not a notification (no ``alerts`` list, an
    alert without a status or startsAt, labels that are not text, …).
    """
    if not isinstance(body, dict):
        raise AlertPayloadError("", "not an Alertmanager webhook body: the body must be a JSON object")
    alerts = body.get("alerts")
    if not isinstance(alerts, list):
        raise AlertPayloadError(
            "alerts",
            "must be a list of alerts (is the source an Alertmanager or Grafana alerting webhook, "
            "and is the watcher's format right?)",
        )
    group: dict[str, Any] = {key: _text(body.get(key), key) for key in GROUP_KEYS}
    group.update({key: _string_map(body.get(key), key) for key in GROUP_MAPS})
    return [_alert(raw, index, group) for index, raw in enumerate(alerts)]


def alert_callback_id(watcher_id: str, alert: dict[str, Any]) -> str:
    """The callback id of the fire of this alert (fingerprint + startsAt) on this watcher."""
    identity = "\n".join((watcher_id, str(alert.get("fingerprint")), str(alert.get("startsAt"))))
    return CALLBACK_PREFIX + sha256_hex(identity)[:32]


def alert_dedupe_basis(payload: Any) -> Any:
    """What the default dedupe key of an alert's fire hashes: its fingerprint and startsAt (any
    other payload, e.g. a manual fire's, as it is)."""
    if isinstance(payload, dict):
        fingerprint, starts_at = payload.get("fingerprint"), payload.get("startsAt")
        if isinstance(fingerprint, str) and isinstance(starts_at, str):
            return {"fingerprint": fingerprint, "startsAt": starts_at}
    return payload


def _instant(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None and parsed.year > 1 else None


def alert_duration_s(alert: dict[str, Any]) -> float | None:
    """How long a resolved alert fired (``endsAt`` - ``startsAt``), None when they do not say."""
    starts, ends = _instant(alert.get("startsAt")), _instant(alert.get("endsAt"))
    if starts is None or ends is None or ends < starts:
        return None
    return (ends - starts).total_seconds()


def alert_name(alert: dict[str, Any]) -> str | None:
    """The alert's ``alertname`` label (what people call it), if any."""
    labels = alert.get("labels")
    name = labels.get("alertname") if isinstance(labels, dict) else None
    return name if isinstance(name, str) and name else None
