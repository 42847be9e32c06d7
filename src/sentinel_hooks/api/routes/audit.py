"""``GET /api/v1/whoami`` and ``GET /api/v1/audit`` (SPEC §21)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from sentinel_hooks.api.access import IDENTITY
from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.api.query import limit_param
from sentinel_hooks.api.routing import Routes
from sentinel_hooks.endpoints import audit as endpoints
from sentinel_hooks.endpoints.audit import DEFAULT_LIMIT, MAX_LIMIT
from sentinel_hooks.report import parse_since

routes = Routes()
LOCAL = {"name": "local", "role": "admin"}  # without tokens only loopback callers get through


@routes.serve(endpoints.WHOAMI)
async def whoami(request: web.Request) -> web.Response:
    identity = request.get(IDENTITY)
    return web.json_response(LOCAL if identity is None else {"name": identity.name, "role": identity.role})


@routes.serve(endpoints.AUDIT)
async def audit(request: web.Request) -> web.Response:
    service = service_of(request)
    query = request.query
    since = None
    if query.get("since"):
        try:
            since = service.now() - parse_since(query["since"])
        except ValueError as exc:
            raise ApiError(400, "invalid_since", str(exc)) from None
    page = await service.audit_page(
        since=since,
        actor=query.get("actor") or None,
        limit=limit_param(query, maximum=MAX_LIMIT, default=DEFAULT_LIMIT),
        cursor=query.get("cursor") or None,
    )
    items: list[dict[str, Any]] = [e.model_dump(mode="json", by_alias=True) for e in page.items]
    return web.json_response({"items": items, "nextCursor": page.next_cursor})
