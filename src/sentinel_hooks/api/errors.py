"""The one place HTTP errors are rendered: ``{"error": {"code", "message", "details"}}``.

Handlers raise ``ApiError`` (or our own exceptions, mapped here); nothing ever returns a
Python traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from sentinel_hooks.errors import ConfigError, Conflict, NotFound, SentinelError, StoreUnavailable
from sentinel_hooks.store.base import InvalidCursor

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error answer with a status, a stable code and a message for people."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def error_response(status: int, code: str, message: str, details: Any = None) -> web.Response:
    body = {"error": {"code": code, "message": message, "details": details}}
    return web.json_response(body, status=status)


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    421: "misdirected_request",
}


def _from_exception(exc: BaseException) -> web.Response:
    if isinstance(exc, ApiError):
        return error_response(exc.status, exc.code, exc.message, exc.details)
    if isinstance(exc, web.HTTPException):
        if exc.status < 400:
            raise exc
        code = _HTTP_CODES.get(exc.status, "http_error")
        return error_response(exc.status, code, exc.reason)
    if isinstance(exc, ConfigError):
        details = [{"key": i.key, "message": i.message} for i in exc.issues]
        return error_response(
            400, "invalid", "; ".join(f"{d['key']}: {d['message']}" for d in details), details
        )
    if isinstance(exc, NotFound):
        return error_response(404, "not_found", str(exc))
    if isinstance(exc, Conflict):
        return error_response(409, "conflict", str(exc))
    if isinstance(exc, InvalidCursor):
        return error_response(400, "invalid_cursor", str(exc))
    if isinstance(exc, StoreUnavailable):  # a full disk, Redis down: the client may retry later
        log.warning("answered 503: %s", exc)
        return error_response(503, "store_unavailable", str(exc))
    if isinstance(exc, SentinelError):
        return error_response(500, "internal", str(exc))
    log.exception("unhandled error in the API")
    return error_response(500, "internal", "internal error (see the service log)")


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Render every error raised below as the JSON error shape."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _from_exception(exc)
    except Exception as exc:
        return _from_exception(exc)
