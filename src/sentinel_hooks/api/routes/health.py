"""Liveness, readiness and metrics (no auth, except /metrics with server.metricsAuth)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.errors import error_response
from sentinel_hooks.errors import StoreError

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """The process is up and its event loop answers."""
    return web.json_response({"status": "ok"})


@routes.get("/readyz")
async def readyz(request: web.Request) -> web.Response:
    """The store takes writes (``store.health``) and the watchers are loaded."""
    service = service_of(request)
    try:
        await service.write_check.check()
    except StoreError as exc:
        return error_response(503, "not_ready", f"store cannot write: {exc}")
    if not service.ready:
        return error_response(503, "not_ready", "watchers are still loading")
    return web.json_response({"status": "ready", "watchers": service.watcher_count()})


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format, rendered in a worker thread.

    With thousands of watchers the text is megabytes (about 0.5 s of CPU at 10,000): rendered
    on the event loop, every scrape would hold up every poll due meanwhile.
    """
    service = service_of(request)
    await service.refresh_gauges()
    response = web.Response(body=await asyncio.to_thread(service.metrics.render))
    response.content_type = "text/plain"
    response.headers["Content-Type"] = service.metrics.content_type
    return response
