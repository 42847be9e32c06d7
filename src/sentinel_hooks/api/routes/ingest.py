"""``POST /hooks/ingest/{watcherId}``: events pushed to ``webhook`` watchers (SPEC.md §3, §16).

The watcher says how a push proves itself (``api.ingest_auth``) and what its body is: ``json``,
the observation (202 ``{"accepted": true, "fired": bool}``), or ``alertmanager``, a notification
whose alerts are one observation each (202 ``{"accepted": true, "fired": N}``, N the alerts that
fired; a body that is not a notification is 400).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.body import parse_json, read_raw, require_json_type
from sentinel_hooks.api.errors import ApiError, error_of
from sentinel_hooks.api.ingest_auth import credentials_ok, included_headers, signature_ok
from sentinel_hooks.config.ingest import IngestAuthSpec
from sentinel_hooks.config.watcher import WebhookWatcher
from sentinel_hooks.core.alertmanager import AlertPayloadError, alert_observations
from sentinel_hooks.errors import NotFound

routes = web.RouteTableDef()

UNAUTHORIZED = "missing or wrong credentials for this webhook watcher (see its auth in the watcher file)"


def _with_headers(value: Any, headers: dict[str, str] | None) -> Any:
    """An object observation with ``_headers`` (includeHeaders) added; anything else as it is."""
    if headers is None or not isinstance(value, dict):
        return value
    return {**value, "_headers": headers}


async def ingest(request: web.Request) -> web.Response:
    service = service_of(request)
    watcher_id = request.match_info["id"]
    try:
        runner = service.watcher(watcher_id)
    except NotFound:
        raise ApiError(404, "not_found", f"no webhook watcher {watcher_id!r}") from None
    spec = runner.spec
    if not isinstance(spec, WebhookWatcher):
        raise ApiError(404, "not_found", f"watcher {watcher_id!r} is not a webhook watcher")
    if not runner.enabled:
        raise ApiError(409, "disabled", f"watcher {watcher_id!r} is disabled")
    if isinstance(spec.auth, IngestAuthSpec) and not credentials_ok(
        spec.auth, request.headers.get("Authorization", "")
    ):
        raise ApiError(401, "unauthorized", UNAUTHORIZED)
    require_json_type(request)
    body = await read_raw(request, max_bytes=service.settings.limits.max_response_bytes)
    if spec.secret is not None:
        header = request.headers.get(spec.signature_header)
        if not signature_ok(spec.secret.get_secret_value(), body, header):
            raise ApiError(
                401, "bad_signature", f"{spec.signature_header} must be sha256=<hex HMAC-SHA256 of the body>"
            )
    value = parse_json(body)
    headers = included_headers(spec, request.headers) if spec.include_headers else None
    if spec.format == "alertmanager":
        try:
            alerts = alert_observations(value)
        except AlertPayloadError as exc:
            raise ApiError(400, "invalid_alerts", str(exc), {"path": exc.path}) from None
        outcomes = await service.ingest_alerts(watcher_id, [_with_headers(a, headers) for a in alerts])
        fired = sum(1 for outcome in outcomes if outcome.fired)
        return web.json_response({"accepted": True, "fired": fired}, status=202)
    outcome = await service.ingest(watcher_id, _with_headers(value, headers))
    return web.json_response({"accepted": True, "fired": outcome.fired}, status=202)


@routes.post("/hooks/ingest/{id}")
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
        service.metrics.webhook_pushes.labels(
            _watcher_label(request, watcher_id), body["error"]["code"]
        ).inc()
        raise
    service.metrics.webhook_pushes.labels(watcher_id, "accepted").inc()
    return response


def _watcher_label(request: web.Request, watcher_id: str) -> str:
    try:
        runner = service_of(request).watcher(watcher_id)
    except NotFound:
        return ""
    return watcher_id if isinstance(runner.spec, WebhookWatcher) else ""
