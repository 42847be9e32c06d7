"""``sentinel test``: evaluate one watcher against a sample payload, with no network and no delivery.

It runs the same pure pieces as a real fire — conditions, the firing lifecycle, templates and
the envelope builder — so what it prints is what the service would do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher, CommandWatcher
from sentinel_hooks.core.alertmanager import alert_name, alert_observations
from sentinel_hooks.core.checks import Evaluation, evaluate
from sentinel_hooks.core.envelope import TriggerKind
from sentinel_hooks.core.paths import MISSING
from sentinel_hooks.errors import TemplateError
from sentinel_hooks.watchers.builder import Firing, build_envelope, render_variables
from sentinel_hooks.watchers.goalfile import GoalFileError, read_goal_file
from sentinel_hooks.watchers.lifecycle import FiringState, step


@dataclass(frozen=True)
class DryRun:
    """The ``--json`` output of ``sentinel test`` (SPEC.md §10), plus the message it would send."""

    matched: bool
    fires: bool
    conditions: list[dict[str, Any]]
    envelope: dict[str, Any] | None
    error: str | None
    kind: TriggerKind | None = None
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "matched": self.matched,
            "fires": self.fires,
            "conditions": self.conditions,
            "envelope": self.envelope,
            "error": self.error,
        }


def _rows(evaluation: Evaluation) -> list[dict[str, Any]]:
    """Each condition with the value it saw and its result (the ``conditions`` of the output)."""
    return [
        {"path": r.path, "op": r.op, "value": r.value, "actual": r.actual, "result": r.result}
        for r in evaluation.results
    ]


def _probe_terminal(watcher: AnyWatcher, payload: Any) -> bool:
    return (
        isinstance(watcher, CommandWatcher)
        and isinstance(payload, dict)
        and payload.get("class") == "terminal"
    )


def dry_run(
    watcher: AnyWatcher,
    service: ServiceConfig,
    *,
    payload: Any,
    previous: Any = MISSING,
    now: datetime,
    base_dir: Path,
    redactor: Redactor | None = None,
) -> DryRun:
    """Evaluate ``payload`` as the watcher's next observation after ``previous`` (MISSING: first)."""
    evaluation = evaluate(watcher.conditions, watcher.match, payload, previous)
    conditions = _rows(evaluation)
    kind: TriggerKind | None = None
    if _probe_terminal(watcher, payload):
        kind = "terminal"
    elif not (isinstance(watcher, CommandWatcher) and not watcher.conditions):
        was_firing = False
        if previous is not MISSING:
            was_firing = evaluate(watcher.conditions, watcher.match, previous, MISSING).matched
        decision, _ = step(
            FiringState(firing=was_firing),
            evaluation.matched,
            mode=watcher.trigger_mode,
            now=now,
            repeat_interval_ms=watcher.fire.repeat_interval_ms,
        )
        kind = "match" if decision.fire else None
    if kind is None:
        return DryRun(evaluation.matched, False, conditions, None, None)
    try:
        context = None
        if watcher.fire.operator_goal_file is not None:
            context = read_goal_file(base_dir, watcher.fire.operator_goal_file)
        firing = Firing(kind=kind, payload=payload, previous=previous, at=now, runtime_context=context)
        envelope = build_envelope(watcher, service, firing, redactor=redactor)
        message = None
        if watcher.fire.compiled_message is not None:
            message = watcher.fire.compiled_message.render(render_variables(watcher, firing))
    except (TemplateError, GoalFileError) as exc:
        return DryRun(evaluation.matched, False, conditions, None, str(exc), kind)
    return DryRun(evaluation.matched, True, conditions, envelope.to_json(), None, kind, message)


@dataclass(frozen=True)
class AlertDryRun:
    """One alert of an Alertmanager notification, dry-run as the service handles it: a firing
    alert is a first observation (it fires when the conditions match); a resolved one fires
    nothing and ends the fire of its alert, if it had one."""

    status: str
    name: str | None
    fingerprint: str
    result: DryRun

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "alertname": self.name,
            "fingerprint": self.fingerprint,
            **self.result.to_json(),
        }


def dry_run_alerts(
    watcher: AnyWatcher,
    service: ServiceConfig,
    *,
    body: Any,
    now: datetime,
    base_dir: Path,
    redactor: Redactor | None = None,
) -> list[AlertDryRun]:
    """``dry_run`` for each alert of a ``format: alertmanager`` watcher's sample body, in order.
    Raises ``AlertPayloadError`` for a body that is not such a notification (the service answers
    it 400)."""
    runs = []
    for alert in alert_observations(body):
        status = str(alert.get("status"))
        if status == "resolved":
            evaluation = evaluate(watcher.conditions, watcher.match, alert, MISSING)
            result = DryRun(evaluation.matched, False, _rows(evaluation), None, None)
        else:
            result = dry_run(watcher, service, payload=alert, now=now, base_dir=base_dir, redactor=redactor)
        runs.append(AlertDryRun(status, alert_name(alert), str(alert.get("fingerprint")), result))
    return runs
