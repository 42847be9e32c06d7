"""``POST /hooks/ingest/{watcherId}``: events pushed to ``webhook`` watchers (HMAC, no bearer token)."""

from __future__ import annotations

import hashlib
import hmac

from aiohttp import web

from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.body import parse_json, read_raw, require_json_type
from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.config.watcher import WebhookWatcher
from sentinel_hooks.errors import NotFound

routes = web.RouteTableDef()


def signature_ok(secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is ``sha256=<hex HMAC-SHA256 of body>`` (constant-time compare, as bytes:
    a header with other characters is simply a wrong signature)."""
    if not header or not header.startswith("sha256="):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest().encode()
    given = header[len("sha256=") :].strip().lower().encode("utf-8", "surrogateescape")
    return hmac.compare_digest(given, expected)


@routes.post("/hooks/ingest/{id}")
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
    require_json_type(request)
    body = await read_raw(request, max_bytes=service.settings.limits.max_response_bytes)
    if spec.secret is not None:
        header = request.headers.get(spec.signature_header)
        if not signature_ok(spec.secret.get_secret_value(), body, header):
            raise ApiError(
                401, "bad_signature", f"{spec.signature_header} must be sha256=<hex HMAC-SHA256 of the body>"
            )
    value = parse_json(body)
    outcome = await service.ingest(watcher_id, value)
    return web.json_response({"accepted": True, "fired": outcome.fired}, status=202)
