"""Who may call the API: bearer token, loopback Host without a token, JSON-only writes.

- With ``server.apiToken``: ``/api/*``, ``/hooks/sentinel`` (and ``/metrics`` with
  ``metricsAuth``) need ``Authorization: Bearer <token>`` (compared in constant time).
- Without it the service answers only requests whose Host is a loopback name or address
  (421 otherwise), so a web page cannot reach it through DNS rebinding.
- POST/PATCH to ``/api/*`` and ``/hooks/*`` must be labelled JSON (415), so a browser form
  cannot forge a write.
"""

from __future__ import annotations

import hmac

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from sentinel_hooks.api.body import is_json_type
from sentinel_hooks.api.errors import ApiError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]", "localhost.localdomain"})
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
JSON_ONLY = "the body must be JSON (Content-Type: application/json)"
JSON_ONLY = "the body must be JSON (Content-Type: application/json)"


def _host_name(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback_host(host_header: str) -> bool:
    name = _host_name(host_header)
    return name in LOOPBACK_NAMES or name.startswith("127.") or name.endswith(".localhost")


def needs_token(path: str, *, metrics_auth: bool) -> bool:
    if path.startswith("/api/") or path == "/hooks/sentinel":
        return True
    return path == "/metrics" and metrics_auth


def security_middleware(api_token: str | None, *, metrics_auth: bool) -> Middleware:
    """The middleware enforcing the rules of this module's docstring."""
    expected = f"Bearer {api_token}".encode() if api_token else None

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if expected is None and path not in OPEN_PATHS and not is_loopback_host(request.host or ""):
            raise ApiError(
                421,
                "misdirected_request",
                "this service answers only loopback Host names; set server.apiToken to serve other hosts",
            )
        if expected is not None and needs_token(path, metrics_auth=metrics_auth):
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                raise ApiError(401, "unauthorized", "missing or wrong bearer token (Authorization: Bearer …)")
        writes = request.method in ("POST", "PATCH", "PUT") and path.startswith(("/api/", "/hooks/"))
        if writes and not is_json_type(request.headers.get("Content-Type", "")):
            raise ApiError(415, "unsupported_media_type", JSON_ONLY)
        return await handler(request)

    return middleware
