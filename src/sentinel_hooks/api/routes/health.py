"""Liveness, readiness and metrics (no auth, except /metrics with server.metricsAuth)."""

from __future__ import annotations

from aiohttp import web

from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.errors import error_response
from sentinel_hooks.api.routing import Routes
from sentinel_hooks.endpoints import service as endpoints
from sentinel_hooks.errors import StoreError

routes = Routes()

# /readyz needs no auth, and the store's own error names its file or server: the cause is logged
# by the write check (once per change), the answer says only where to find it.
STORE_NOT_WRITABLE = "the store does not take writes (the cause is in the service log)"


@routes.serve(endpoints.HEALTHZ)
async def healthz(request: web.Request) -> web.Response:
    """The process is up and its event loop answers."""
    return web.json_response({"status": "ok"})


@routes.serve(endpoints.READYZ)
async def readyz(request: web.Request) -> web.Response:
    """The store takes writes (``store.health``) and the watchers are loaded. MCP servers' states
    are details only: one that failed leaves the service ready (``sentinel status`` says why)."""
    service = service_of(request)
    try:
        await service.check_writes()
    except StoreError:
        return error_response(503, "not_ready", STORE_NOT_WRITABLE)
    if not service.ready:
        return error_response(503, "not_ready", "watchers are still loading")
    answer: dict[str, object] = {"status": "ready", "watchers": service.watcher_count()}
    mcp = service.mcp_states()
    if mcp:
        answer["mcpServers"] = mcp
    return web.json_response(answer)


@routes.serve(endpoints.METRICS)
async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format (rendered in pieces between polls: ``Service.metrics_text``)."""
    body, content_type = await service_of(request).metrics_text()
    response = web.Response(body=body)
    response.content_type = "text/plain"
    response.headers["Content-Type"] = content_type
    return response
