"""What happened, for people who run Sentinel: Prometheus metrics and the optional JSONL telemetry file.

Components report through ``Events`` (one per service): an evaluation, a fire, a settled
contract, a tool call and its policy decision, a session's end, a delivery attempt. Each
updates the metrics and, when ``telemetry.eventsFile`` is set, appends one JSON line (secrets
redacted) to that file.

Every line is ``{at, kind, watcherId, callbackId, …}`` (SPEC.md §2.1): ``kind`` says what the
row is (``evaluation``, ``fire``, ``contract``, ``tool_call``, ``policy_decision``, ``session``,
``delivery``), and ``watcherId``/``callbackId`` are null where a row has none (an evaluation is
of a watcher, not of a callback). A tool call carries its arguments, a policy decision the tool
it decided; a delivery's own kind (``notify``, ``fallback``, ``escalation.1`` …) is
``deliveryKind``, as ``kind`` names the row. Files written by earlier versions named the row's
kind ``event``; nothing in Sentinel reads the file back.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from prometheus_client import Counter

from sentinel_hooks.clock import Clock, iso
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.metrics import Metrics
from sentinel_hooks.tracing import Traced, Tracing

log = logging.getLogger(__name__)

CHILDREN_MAX = 4096  # label sets remembered by ``Events._count``


class Events:
    """The service's metrics and telemetry, fed by every component."""

    def __init__(
        self,
        *,
        metrics: Metrics,
        clock: Clock,
        redactor: Redactor | None = None,
        events_file: Path | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.metrics = metrics
        self.tracing = tracing  # None: no telemetry.otlpEndpoint, no span is made
        self._clock = clock
        self._redactor = redactor or Redactor()
        self._path = events_file
        self._file: IO[str] | None = None
        self._children: dict[tuple[Counter, tuple[str, ...]], Counter] = {}

    def _count(self, metric: Counter, *values: str) -> Counter:
        """``metric.labels(*values)``, looked up once per label set: a fire with an instant model
        counted eleven series (each ``labels`` call checks, joins and locks; ~6 µs), and these
        families' label values (states, tools, decisions, model entries, target names, statuses)
        come from fixed sets and the configuration, and no series of theirs is ever removed.
        A guard of ``CHILDREN_MAX`` keeps an unexpected label value from growing the cache."""
        key = (metric, values)
        child = self._children.get(key)
        if child is None:
            if len(self._children) >= CHILDREN_MAX:
                self._children.clear()
            child = self._children[key] = metric.labels(*values)
        return child

    def open(self) -> None:
        if self._path is not None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self._path.open("a", encoding="utf-8", buffering=1)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _write(
        self, kind: str, watcher_id: str | None, callback_id: str | None, fields: dict[str, Any]
    ) -> None:
        """One row: ``{at, kind, watcherId, callbackId}`` first, then the row's own fields."""
        if self._file is None:
            return
        line = {"at": iso(self._clock.now()), "kind": kind, "watcherId": watcher_id}
        line["callbackId"] = callback_id
        line.update((key, value) for key, value in fields.items() if key not in line)
        try:
            self._file.write(json.dumps(self._redactor.data(line), ensure_ascii=False, default=str) + "\n")
        except (OSError, ValueError) as exc:  # telemetry must never break the service
            log.warning("telemetry file %s: %s", self._path, exc)

    def evaluation(self, watcher_id: str, *, matched: bool, fired: bool, trigger: str | None) -> None:
        self._write("evaluation", watcher_id, None, {"matched": matched, "fired": fired, "trigger": trigger})

    def fire(self, watcher_id: str, callback_id: str, *, state: str, kind: str) -> None:
        self._count(self.metrics.contracts, state).inc()
        if self.tracing is not None:
            self.tracing.fire(callback_id, state)
        self._write("fire", watcher_id, callback_id, {"state": state, "trigger": kind})

    def settled(
        self,
        callback_id: str,
        state: str,
        *,
        deadline: datetime | None = None,
        at: datetime | None = None,
        watcher_id: str | None = None,
        contract: Traced | None = None,
    ) -> None:
        """A contract settled; ``contract`` (when the caller holds it) carries its trace, so a
        replica that did not take the fire still hangs the relay's span and the fallback's
        deliveries in the fire's trace."""
        self._count(self.metrics.contracts, state).inc()
        fields: dict[str, Any] = {"state": state}
        if deadline is not None and at is not None and state in ("fallback_sent", "expired"):
            lateness = max(0.0, (at - deadline).total_seconds())
            self.metrics.fallback_lateness.observe(lateness)
            fields["latenessMs"] = round(lateness * 1000, 1)
        if self.tracing is not None:
            self.tracing.settled(callback_id, state, deadline, fields.get("latenessMs"), contract)
        self._write("contract", watcher_id, callback_id, fields)

    def tool_call(
        self,
        callback_id: str,
        tool: str,
        *,
        decision: str,
        ok: bool,
        watcher_id: str | None = None,
        arguments: dict[str, Any] | str | None = None,
    ) -> None:
        """A tool call a session made, with the arguments the model gave (secrets redacted)."""
        self._count(self.metrics.tool_calls, tool, decision).inc()
        fields = {"tool": tool, "arguments": arguments, "decision": decision, "ok": ok}
        if self.tracing is not None:
            self.tracing.tool_call(callback_id, tool, decision, ok)
        self._write("tool_call", watcher_id, callback_id, fields)

    def policy_decision(
        self, callback_id: str, tool: str, policy: dict[str, Any], *, watcher_id: str | None = None
    ) -> None:
        """An action-policy decision: rule id, decision, reason, elapsed time and the judges' verdicts
        (each with its rule id, model, confidence, reason and elapsed time), each verdict also
        counted by rule and outcome: a judge that keeps timing out is seen on /metrics."""
        for verdict in policy.get("verdicts") or ():
            self.metrics.judge_verdicts.labels(str(verdict.get("ruleId")), str(verdict.get("outcome"))).inc()
        if self.tracing is not None:
            self.tracing.policy_decision(callback_id, tool, policy)
        self._write("policy_decision", watcher_id, callback_id, {"tool": tool, **policy})

    def model_call(
        self, callback_id: str, model: str, usage: dict[str, Any], *, watcher_id: str | None = None
    ) -> None:
        """A model call's usage (``{call, inputTokens, outputTokens, costUsd, estimated, …}``), counted
        by model entry and direction."""
        self._count(self.metrics.model_tokens, model, "input").inc(int(usage.get("inputTokens") or 0))
        self._count(self.metrics.model_tokens, model, "output").inc(int(usage.get("outputTokens") or 0))
        self._count(self.metrics.model_cost, model).inc(float(usage.get("costUsd") or 0.0))
        if self.tracing is not None:
            self.tracing.model_call(callback_id, model, usage, time.time_ns())
        self._write("model_call", watcher_id, callback_id, {"model": model, **usage})

    def budget_exhausted(
        self, callback_id: str, scope: str, which: str, *, watcher_id: str | None = None
    ) -> None:
        """A model call refused: the ``scope`` budget (fire, watcher_day, service_day) was spent."""
        self.metrics.budget_exhausted.labels(scope).inc()
        self._write("budget_exhausted", watcher_id, callback_id, {"scope": scope, "which": which})

    def session(self, callback_id: str, status: str, *, watcher_id: str | None = None) -> None:
        self._count(self.metrics.sessions, status).inc()
        self._write("session", watcher_id, callback_id, {"status": status})

    def delivery(
        self,
        key: str,
        target: str,
        kind: str,
        *,
        outcome: str,
        attempts: int,
        error: str | None,
        watcher_id: str | None = None,
        callback_id: str | None = None,
        follow_up: bool = False,
    ) -> None:
        """One delivery attempt: ``kind`` is the delivery's (``notify``, ``fallback`` …), written as
        ``deliveryKind``; ``attempts`` counts this one, written as ``attempt``; ``follow_up``: an
        agent notify after the page (for the trace)."""
        self._count(self.metrics.deliveries, target, outcome).inc()
        fields = {
            "key": key,
            "target": target,
            "deliveryKind": kind,
            "attempt": attempts,
            "outcome": outcome,
            "error": error,
        }
        if self.tracing is not None:
            self.tracing.delivery(callback_id, fields, follow_up)
        self._write("delivery", watcher_id, callback_id, fields)
