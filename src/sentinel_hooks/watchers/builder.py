"""Build the envelope of one fire from a watcher, an observation and the instant (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

from sentinel_hooks.clock import iso
from sentinel_hooks.config.secrets import Redactor, masked_url
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher, WebhookWatcher
from sentinel_hooks.core.alertmanager import alert_dedupe_basis
from sentinel_hooks.core.envelope import (
    Envelope,
    EnvelopeDelivery,
    EnvelopeMode,
    EnvelopeSource,
    EnvelopeTrigger,
    EnvelopeWatcher,
    Route,
    TriggerKind,
    default_dedupe_key,
    new_callback_id,
    truncate_payload,
)
from sentinel_hooks.core.paths import MISSING
from sentinel_hooks.core.templates.variables import template_variables
from sentinel_hooks.watchers.kept import KeptByIdentity


@dataclass(frozen=True)
class Firing:
    """What happened: the trigger kind, the observation (and the one before), and when."""

    kind: TriggerKind
    payload: Any
    at: datetime
    previous: Any = MISSING
    route: Route = "watcher"
    runtime_context: str | None = None


def render_variables(watcher: AnyWatcher, firing: Firing) -> dict[str, Any]:
    """The template context of SPEC.md §4 for this fire."""
    return template_variables(
        payload=firing.payload,
        previous=None if firing.previous is MISSING else firing.previous,
        watcher_id=watcher.id,
        skill_id=watcher.skill_id,
        tags=list(watcher.tags),
        event_name=watcher.event_name,
        trigger_kind=firing.kind,
        priority=watcher.fire.priority,
        timestamp=iso(firing.at),
    )


def render_context(watcher: AnyWatcher, variables: dict[str, Any]) -> dict[str, Any]:
    """payloadTemplate rendered, with contextTemplate rendered and merged over it."""
    context: dict[str, Any] = {}
    for compiled in (watcher.fire.compiled_payload, watcher.fire.compiled_context):
        if compiled is not None:
            rendered = compiled.render(variables)
            if isinstance(rendered, dict):
                context.update(rendered)
    return context


def dedupe_key(watcher: AnyWatcher, firing: Firing, variables: dict[str, Any]) -> str:
    """``fire.dedupeKeyTemplate`` rendered, else the default hash of id, event and payload (of an
    alert's fingerprint and startsAt for ``format: alertmanager``, so its repeats share a key)."""
    template = watcher.fire.compiled_dedupe_key
    if template is not None:
        return template.render(variables)
    if isinstance(watcher, WebhookWatcher) and watcher.format == "alertmanager":
        return default_dedupe_key(watcher.id, watcher.event_name, alert_dedupe_basis(firing.payload))
    return default_dedupe_key(watcher.id, watcher.event_name, firing.payload)


def condition_dump(watcher: AnyWatcher) -> list[Any]:
    """The watcher's conditions as JSON, as the user wrote them."""
    return [node.model_dump(mode="json", by_alias=True, exclude_none=True) for node in watcher.conditions]


@dataclass(frozen=True)
class _Fixed:
    """The parts of a watcher's envelopes that every fire shares, made once: validated models,
    which an envelope takes as they are (no copy, no second validation)."""

    watcher: EnvelopeWatcher
    mode: EnvelopeMode
    delivery: EnvelopeDelivery


def _fixed(watcher: AnyWatcher, service: ServiceConfig) -> _Fixed:
    urls = watcher.endpoint_urls()
    return _Fixed(
        watcher=EnvelopeWatcher(
            id=watcher.id,
            skill_id=watcher.skill_id,
            event_name=watcher.event_name,
            intent=watcher.intent,
            strategy=watcher.strategy_name,
            endpoint=masked_url(urls[0]) if urls else None,  # a literal password is no less secret
            match=watcher.match,
            conditions=condition_dump(watcher),
            fire_once=watcher.fire_once,
            tags=list(watcher.tags),
        ),
        mode=EnvelopeMode(
            environment=watcher.environment,
            operator_goal=watcher.fire.operator_goal,
            autonomy=watcher.autonomy,
        ),
        delivery=EnvelopeDelivery(
            targets=list(watcher.delivery_targets),
            timeout_ms=service.hook_response_timeout_ms,
            fallback_mode=service.hook_response_fallback_mode,
        ),
    )


_FIXED: KeptByIdentity[_Fixed] = KeptByIdentity()  # by watcher spec and service config
_SOURCES = {route: EnvelopeSource(route=route) for route in get_args(Route)}


def build_envelope(
    watcher: AnyWatcher,
    service: ServiceConfig,
    firing: Firing,
    *,
    redactor: Redactor | None = None,
    callback_id: str | None = None,
) -> Envelope:
    """The envelope for one fire. Raises TemplateError when a template does not render."""
    variables = render_variables(watcher, firing)
    context = render_context(watcher, variables)
    fixed = _FIXED.get((watcher, service), lambda: _fixed(watcher, service))
    envelope = Envelope(
        callback_id=callback_id or new_callback_id(),
        watcher=fixed.watcher,
        trigger=EnvelopeTrigger(
            kind=firing.kind,
            matched_at=iso(firing.at),
            dedupe_key=dedupe_key(watcher, firing, variables),
            priority=watcher.fire.priority,
        ),
        mode=fixed.mode,
        operator_goal_runtime_context=firing.runtime_context,
        context=context,
        payload=truncate_payload(firing.payload, service.limits.max_payload_chars),
        delivery=fixed.delivery,
        source=_SOURCES[firing.route],
    )
    if redactor is None or not redactor.secrets:
        return envelope
    # the common case: no secret in the wire text (made here once, for the store and the
    # prompt too), so no masked copy and no second validation per fire
    if not redactor.found_in(envelope.wire_text()):
        return envelope
    return Envelope.model_validate(redactor.data(envelope.to_json()))
