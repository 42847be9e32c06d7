"""The aiohttp application: middlewares (errors outermost, then security) and the routes, one
per declared endpoint (``api.routing``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from sentinel_hooks.api.access import Tokens
from sentinel_hooks.api.errors import error_middleware
from sentinel_hooks.api.security import security_middleware

if TYPE_CHECKING:
    from sentinel_hooks.service import Service

SERVICE: web.AppKey[Service] = web.AppKey("service")


def build_app(service: Service) -> web.Application:
    """The HTTP API of ``service`` (SPEC.md §9)."""
    from sentinel_hooks.api.mcp import add_mcp
    from sentinel_hooks.api.routes import (
        audit,
        callbacks,
        health,
        inbox,
        ingest,
        ping,
        silences,
        slack,
        watchers,
    )
    from sentinel_hooks.api.routes import openapi as openapi_route
    from sentinel_hooks.api.routes import web as web_page
    from sentinel_hooks.api.routing import add_routes

    server = service.settings.server
    app = web.Application(
        middlewares=[error_middleware, security_middleware(Tokens(server), metrics_auth=server.metrics_auth)],
        client_max_size=service.settings.limits.max_response_bytes + 65536,
        handler_args={"max_field_size": 16384},
    )
    app[SERVICE] = service
    tables = [health, audit, watchers, ingest, ping, slack, inbox, callbacks, silences]
    tables += [web_page, openapi_route]
    handlers = {endpoint: h for table in tables for endpoint, h in table.routes.handlers.items()}
    add_routes(app, {**handlers, **add_mcp(app, service)})
    return app


def service_of(request: web.Request) -> Service:
    return request.app[SERVICE]
