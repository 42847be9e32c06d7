"""``POST /hooks/ingest/{watcherId}``: events pushed to ``webhook`` watchers (SPEC.md §3, §16).

The watcher says how a push proves itself (``api.ingest_auth``) and what its body is: ``json``,
the observation (202 ``{"accepted": true, "fired": bool}``), or ``alertmanager``, a notification
whose alerts are one observation each (202 ``{"accepted": true, "fired": N}``, N the alerts that
fired; a body that is not a notification is 400, one with more than ``limits.maxAlertsPerRequest``
alerts 413, before anything is stored).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.body import parse_json, read_raw, require_json_type
from sentinel_hooks.api.errors import ApiError, error_of
from sentinel_hooks.api.ingest_auth import included_headers, push_admitted
from sentinel_hooks.api.routing import Routes, body_limit
from sentinel_hooks.config.watcher import WebhookWatcher
from sentinel_hooks.core.alertmanager import AlertPayloadError, alert_observations
from sentinel_hooks.endpoints.watchers import INGEST
from sentinel_hooks.errors import NotFound

if TYPE_CHECKING:
    from sentinel_hooks.service import Service
    from sentinel_hooks.watchers.runner import WatcherRunner

routes = Routes()

NOT_FOUND = (
    "no enabled webhook watcher {id!r}: the id in the URL must be the id of a webhook watcher "
    "(`sentinel watchers list` shows them), and a disabled one takes no pushes"
)
"""The answer for an unknown id, another strategy's watcher, and a disabled one to a push that did
not prove itself: one text, so a caller cannot tell them apart."""

UNAUTHORIZED = (
    "the push did not carry the credentials this webhook watcher's file asks for: the HMAC signature "
    "header of its secret (sha256=<hex HMAC-SHA256 of the raw body>), or Authorization: Bearer or "
    "Basic for its auth"
)
"""The one refusal of a push to an enabled webhook watcher that wants credentials: it does not
say what was wrong with them."""


def _with_headers(value: Any, headers: dict[str, str] | None) -> Any:
    """An object observation with ``_headers`` (includeHeaders) added; anything else as it is."""
    if headers is None or not isinstance(value, dict):
        return value
    return {**value, "_headers": headers}


def _webhook(service: Service, watcher_id: str) -> tuple[WatcherRunner, WebhookWatcher] | None:
    """Webhook watcher ``watcher_id``'s runner and spec; None when no webhook watcher has that id."""
    try:
        runner = service.watcher(watcher_id)
    except NotFound:
        return None
    spec = runner.spec
    return (runner, spec) if isinstance(spec, WebhookWatcher) else None


async def ingest(request: web.Request) -> web.Response:
    """A push: its shape (415, 413), then the watcher and its credentials, then its state.

    The credentials are checked (the same work always) before any answer that depends on the
    watcher: a caller who cannot prove itself gets one 404 whether the id is unknown, another
    strategy's or a disabled webhook watcher's (SPEC.md §3), and the 401 of §3 only from an enabled
    webhook watcher that wants credentials; only a proven push learns that a watcher is disabled."""
    service = service_of(request)
    watcher_id = request.match_info["id"]
    require_json_type(request)
    body = await read_raw(request, max_bytes=body_limit(INGEST, service))
    found = _webhook(service, watcher_id)
    admitted = push_admitted(found[1] if found else None, request.headers, body)  # the same work always
    if found is None or (not admitted and not found[0].enabled):
        raise ApiError(404, "not_found", NOT_FOUND.format(id=watcher_id))
    if not admitted:
        raise ApiError(401, "unauthorized", UNAUTHORIZED)
    runner, spec = found
    if not runner.enabled:
        raise ApiError(409, "disabled", f"watcher {watcher_id!r} is disabled")
    value = parse_json(body)
    headers = included_headers(spec, request.headers) if spec.include_headers else None
    if spec.format == "alertmanager":
        _within_alert_cap(value, service.settings.limits.max_alerts_per_request)
        try:
            alerts = alert_observations(value)
        except AlertPayloadError as exc:
            raise ApiError(400, "invalid_alerts", str(exc), {"path": exc.path}) from None
        outcomes = await service.ingest_alerts(watcher_id, [_with_headers(a, headers) for a in alerts])
        fired = sum(1 for outcome in outcomes if outcome.fired)
        return web.json_response({"accepted": True, "fired": fired}, status=202)
    outcome = await service.ingest(watcher_id, _with_headers(value, headers))
    return web.json_response({"accepted": True, "fired": outcome.fired}, status=202)


def _within_alert_cap(body: Any, cap: int) -> None:
    """413 ``too_many_alerts`` for a notification of more than ``cap`` alerts (SPEC.md §16):
    counted before any alert is read, so nothing of it is stored or judged."""
    alerts = body.get("alerts") if isinstance(body, dict) else None
    if isinstance(alerts, list) and len(alerts) > cap:
        raise ApiError(
            413,
            "too_many_alerts",
            f"the notification carries {len(alerts)} alerts, more than limits.maxAlertsPerRequest "
            f"({cap}) allows; nothing was stored (lower Alertmanager's max_alerts for this receiver, "
            "or raise the limit in sentinel.yaml)",
            {"alerts": len(alerts), "maxAlertsPerRequest": cap},
        )


@routes.serve(INGEST)
async def counted_ingest(request: web.Request) -> web.Response:
    """``ingest``, counted in ``sentinel_webhook_pushes_total{watcher, outcome}``: the outcome is
    ``accepted`` or the refusal's error code. The watcher label is the id only when it names a
    webhook watcher: anyone can POST to any path, and a label per path tried would let them grow
    the metrics without bound."""
    service = service_of(request)
    watcher_id = request.match_info["id"]
    try:
        response = await ingest(request)
    except Exception as exc:
        _, body = error_of(exc)
        label = watcher_id if _webhook(service, watcher_id) else ""
        service.metrics.webhook_pushes.labels(label, body["error"]["code"]).inc()
        raise
    service.metrics.webhook_pushes.labels(watcher_id, "accepted").inc()
    return response
