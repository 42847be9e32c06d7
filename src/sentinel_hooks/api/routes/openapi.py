"""``GET /api/v1/openapi.json``: the API's OpenAPI 3.1 document (bearer security only when
``server.apiToken`` is set)."""

from __future__ import annotations

import functools
import json

from aiohttp import web

from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.openapi import build_openapi
from sentinel_hooks.api.routing import Routes
from sentinel_hooks.endpoints import service as endpoints

routes = Routes()


@functools.cache
def document_bytes(*, bearer: bool) -> bytes:
    """The document as JSON, built once per process and token setting (it depends on nothing else)."""
    return json.dumps(build_openapi(bearer=bearer), ensure_ascii=False).encode()


@routes.serve(endpoints.OPENAPI)
async def openapi_document(request: web.Request) -> web.Response:
    """The OpenAPI document describing every route of this service."""
    bearer = service_of(request).settings.server.has_tokens
    body = document_bytes(bearer=bearer)
    return web.Response(body=body, content_type="application/json", charset="utf-8")
