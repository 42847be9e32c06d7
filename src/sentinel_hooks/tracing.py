"""Traces (SPEC.md §22): one OpenTelemetry trace per fire, exported over OTLP/HTTP.

Tracing is optional (the ``otel`` extra) and must cost nothing without
``telemetry.otlpEndpoint``: this module imports no OpenTelemetry package until ``create_tracing``
is given an endpoint, and everything else holds ``None`` (``Events.tracing``) and checks it once
per call, so the untraced hot path creates no span objects.

A fire's spans cross tasks, processes and replicas (the observation and the fire in the firing
pipeline, the session in a queue worker, perhaps on another replica, deliveries in the outbox),
so the context travels on the contract: ``traceId`` and ``traceParent`` (the fire span's id).
Later spans start from that explicit parent, never from contextvars alone. Within one process
the fire and session contexts are also remembered by callback id (bounded), so the outbox and
the relay, which know only the callback id, hang their spans in the same trace.

The trace: ``sentinel.observation`` → ``sentinel.conditions`` and ``sentinel.fire`` →
``sentinel.session`` (→ ``sentinel.model_call`` with its tokens, ``sentinel.tool_call`` and
``sentinel.policy_decision``), ``sentinel.relay`` (the contract settled: page, deadline) and one
``sentinel.delivery`` per attempt (target, kind, outcome, follow-up).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span

log = logging.getLogger(__name__)

REMEMBERED = 10_000  # callback contexts kept per process for the outbox and the relay
T = TypeVar("T")


class Traced(Protocol):
    """What a contract offers a trace: its callback and the stored context."""

    @property
    def callback_id(self) -> str: ...
    @property
    def trace_id(self) -> str | None: ...
    @property
    def trace_parent(self) -> str | None: ...


class HasTracing(Protocol):
    """``Events``: the one object every component already holds."""

    @property
    def tracing(self) -> Tracing | None: ...


class Tracing:
    """Spans of the fires of one service, sent in batches by the SDK's exporter thread."""

    def __init__(self, endpoint: str, *, service_name: str = "sentinel") -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self._provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self._tracer = self._provider.get_tracer("sentinel_hooks")
        self._fires: OrderedDict[str, Span] = OrderedDict()  # open until the fire is recorded
        self._contexts: OrderedDict[str, Context] = OrderedDict()  # callback id → its fire span
        self._sessions: dict[str, Context] = {}  # callback id → its running session's span

    def shutdown(self) -> None:
        """Send what is buffered and stop the exporter (blocking: call it off the event loop)."""
        self._provider.shutdown()

    def _remember(self, table: OrderedDict[str, T], key: str, value: T) -> T | None:
        table[key] = value
        table.move_to_end(key)
        return table.popitem(last=False)[1] if len(table) > REMEMBERED else None

    def _parent(self, callback_id: str, trace_id: str | None, span_id: str | None) -> Context | None:
        """The stored context (``trace_id``/``span_id`` hex), else the one remembered here."""
        if trace_id and span_id:
            from opentelemetry import trace

            parent = trace.SpanContext(
                int(trace_id, 16),
                int(span_id, 16),
                is_remote=True,
                trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
            )
            return trace.set_span_in_context(trace.NonRecordingSpan(parent))
        return self._contexts.get(callback_id)

    def begin_fire(
        self,
        *,
        callback_id: str,
        watcher_id: str,
        trigger: str,
        observed_at: datetime,
        dedupe_key: str,
        session_key: str,
        silenced_by: str | None,
        conditions: Sequence[Mapping[str, Any]] | None,
    ) -> dict[str, str]:
        """Start the trace of a fire: the observation (from ``observed_at``), its conditions and
        the fire span, left open until ``fire`` records the store's answer; the contract's fields."""
        from opentelemetry import trace

        attributes = {"sentinel.watcher_id": watcher_id, "sentinel.trigger": trigger}
        observation = self._tracer.start_span(
            "sentinel.observation", attributes=attributes, start_time=_ns(observed_at)
        )
        inside = trace.set_span_in_context(observation)
        checked = self._tracer.start_span("sentinel.conditions", context=inside, start_time=_ns(observed_at))
        for n, leaf in enumerate(conditions or ()):
            checked.add_event(
                "sentinel.condition",
                {
                    "index": n,
                    "path": str(leaf.get("path")),
                    "op": str(leaf.get("op")),
                    "actual": _text(leaf.get("actual")),
                    "result": bool(leaf.get("result")),
                },
            )
        checked.set_attribute("sentinel.conditions.count", len(conditions or ()))
        checked.end()
        fire = self._tracer.start_span(
            "sentinel.fire",
            context=inside,
            attributes={
                "sentinel.callback_id": callback_id,
                "sentinel.dedupe_key": dedupe_key,
                "sentinel.session_key": session_key,
                "sentinel.silenced_by": silenced_by or "",
            },
        )
        observation.end()
        context = fire.get_span_context()
        evicted = self._remember(self._fires, callback_id, fire)
        if evicted is not None:
            evicted.end()
        self._remember(self._contexts, callback_id, trace.set_span_in_context(fire))
        return {"trace_id": f"{context.trace_id:032x}", "trace_parent": f"{context.span_id:016x}"}

    def fire(self, callback_id: str, state: str) -> None:
        """The store's answer to a fire (pending, deduped, silenced) ends its span."""
        span = self._fires.pop(callback_id, None)
        if span is not None:
            span.set_attribute("sentinel.state", state)
            span.set_attribute("sentinel.deduped", state == "deduped")
            span.end()

    async def session(self, contract: Traced, running: Awaitable[str]) -> str:
        """Await a session inside its span (child of the contract's fire); its status ends it."""
        from opentelemetry import trace

        parent = self._parent(contract.callback_id, contract.trace_id, contract.trace_parent)
        span = self._tracer.start_span(
            "sentinel.session", context=parent, attributes={"sentinel.callback_id": contract.callback_id}
        )
        if parent is not None:
            self._remember(self._contexts, contract.callback_id, parent)
        self._sessions[contract.callback_id] = trace.set_span_in_context(span)
        try:
            status = await running
        except BaseException as exc:
            span.record_exception(exc)
            raise
        else:
            span.set_attribute("sentinel.status", status)
        finally:
            self._sessions.pop(contract.callback_id, None)
            span.end()
        return status

    def _event_span(
        self,
        name: str,
        callback_id: str | None,
        attributes: Mapping[str, Any],
        *,
        session: bool = False,
        start_time: int | None = None,
    ) -> None:
        """A span that happened just now (or from ``start_time``), under the callback's fire (or,
        with ``session``, its running session)."""
        parent = (self._sessions if session else self._contexts).get(callback_id) if callback_id else None
        if parent is None:
            return  # another process holds the trace; an orphan span would only mislead
        clean = {key: value for key, value in attributes.items() if value is not None}
        self._tracer.start_span(name, context=parent, attributes=clean, start_time=start_time).end()

    def model_call(self, callback_id: str, model: str, usage: Mapping[str, Any], now_ns: int) -> None:
        elapsed_ns = int(float(usage.get("elapsedMs") or 0.0) * 1_000_000)
        attributes = {
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": int(usage.get("inputTokens") or 0),
            "gen_ai.usage.output_tokens": int(usage.get("outputTokens") or 0),
            "sentinel.cost_usd": float(usage.get("costUsd") or 0.0),
            "sentinel.call": str(usage.get("call")),
        }
        self._event_span(
            "sentinel.model_call", callback_id, attributes, session=True, start_time=now_ns - elapsed_ns
        )

    def tool_call(self, callback_id: str, tool: str, decision: str, ok: bool) -> None:
        attributes = {"sentinel.tool": tool, "sentinel.policy.decision": decision, "sentinel.ok": ok}
        self._event_span("sentinel.tool_call", callback_id, attributes, session=True)

    def policy_decision(self, callback_id: str, tool: str, policy: Mapping[str, Any]) -> None:
        attributes = {
            "sentinel.tool": tool,
            "sentinel.policy.decision": _text(policy.get("decision")),
            "sentinel.policy.rule_id": _text(policy.get("ruleId")),
            "sentinel.policy.reason": _text(policy.get("reason")),
        }
        self._event_span("sentinel.policy_decision", callback_id, attributes, session=True)

    def settled(
        self,
        callback_id: str,
        state: str,
        deadline: datetime | None,
        lateness_ms: float | None,
        contract: Traced | None,
    ) -> None:
        if contract is not None and callback_id not in self._contexts:
            parent = self._parent(callback_id, contract.trace_id, contract.trace_parent)
            if parent is not None:  # the fallback's deliveries, sent from here, join the trace
                self._remember(self._contexts, callback_id, parent)
        attributes = {
            "sentinel.state": state,
            "sentinel.page": {"fulfilled": "agent", "fallback_sent": "fallback"}.get(state, "none"),
            "sentinel.deadline": None if deadline is None else deadline.isoformat(),
            "sentinel.lateness_ms": lateness_ms,
        }
        self._event_span("sentinel.relay", callback_id, attributes)

    def delivery(self, callback_id: str | None, fields: Mapping[str, Any], follow_up: bool) -> None:
        attributes = {
            "sentinel.target": fields["target"],
            "sentinel.delivery.kind": fields["deliveryKind"],
            "sentinel.delivery.attempt": fields["attempt"],
            "sentinel.delivery.status": fields["outcome"],
            "sentinel.delivery.error": fields["error"],
            "sentinel.delivery.follow_up": follow_up,
        }
        self._event_span("sentinel.delivery", callback_id, attributes)


def create_tracing(endpoint: str | None) -> Tracing | None:
    """The service's tracing, or None without an endpoint or without the ``otel`` extra."""
    if not endpoint:
        return None
    try:
        return Tracing(endpoint)
    except ImportError:
        log.warning("telemetry.otlpEndpoint is set but the otel extra is not installed: no traces")
        return None


def fire_trace(
    events: HasTracing | None,
    contract: Any,
    conditions: Sequence[Mapping[str, Any]] | None,
    silenced_by: str | None,
) -> dict[str, str] | None:
    """The trace fields of a new contract (``model_copy(update=…)``), or None when untraced."""
    tracing = None if events is None else events.tracing
    if tracing is None:
        return None
    return tracing.begin_fire(
        callback_id=contract.callback_id,
        watcher_id=contract.watcher_id,
        trigger=contract.trigger.kind,
        observed_at=contract.trigger.matched_at,
        dedupe_key=contract.dedupe_key,
        session_key=contract.session_key,
        silenced_by=silenced_by,
        conditions=conditions,
    )


async def traced_session(events: HasTracing | None, contract: Traced, running: Awaitable[str]) -> str:
    """``await running`` (a session), in its span when traced."""
    tracing = None if events is None else events.tracing
    return await running if tracing is None else await tracing.session(contract, running)


def _ns(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000_000)


def _text(value: Any) -> str:
    return "" if value is None else str(value)[:500]
