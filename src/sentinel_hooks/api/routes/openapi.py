"""``GET /api/v1/openapi.json``: the API's OpenAPI 3.1 document (bearer token when one is set)."""

from __future__ import annotations

import functools
import json

from aiohttp import web

from sentinel_hooks.api.openapi import OPENAPI_PATH, build_openapi

routes = web.RouteTableDef()


@functools.cache
def document_bytes() -> bytes:
    """The document as JSON, built once per process (it depends only on the code)."""
    return json.dumps(build_openapi(), ensure_ascii=False).encode()


@routes.get(OPENAPI_PATH)
async def openapi_document(request: web.Request) -> web.Response:
    """The OpenAPI document describing every route of this service."""
    return web.Response(body=document_bytes(), content_type="application/json", charset="utf-8")
