"""The one place HTTP errors are rendered: ``{"error": {"code", "message", "details"}}``.

Handlers raise ``ApiError`` (or our own exceptions, mapped here). A 5xx never shows internal
text (a store's file path, a Python message): the client gets a plain message and the
service log gets the request, the cause and its traceback, so every 5xx can be traced.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from sentinel_hooks.errors import CallbackExists, ConfigError, Conflict, NotFound, StoreUnavailable
from sentinel_hooks.store.base import InvalidCursor

log = logging.getLogger(__name__)

INTERNAL_MESSAGE = "internal error (see the service log)"
STORE_UNAVAILABLE_MESSAGE = "the store is unavailable, nothing was recorded: try again later"


class ApiError(Exception):
    """An error answer with a status, a stable code and a message for people."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details}}


def error_response(status: int, code: str, message: str, details: Any = None) -> web.Response:
    return web.json_response(error_body(code, message, details), status=status)


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


def _from_http_exception(exc: web.HTTPException) -> web.Response:
    if exc.status >= 500:
        return error_response(exc.status, "internal", INTERNAL_MESSAGE)
    response = error_response(exc.status, _HTTP_CODES.get(exc.status, "http_error"), exc.reason)
    if "Allow" in exc.headers:  # a 405 says which methods the route has (RFC 9110)
        response.headers["Allow"] = exc.headers["Allow"]
    return response


def error_of(exc: Exception) -> tuple[int, dict[str, Any]]:
    """The status and ``{"error": …}`` body of an exception raised by a route or an operation
    (anything not ours is a 500 with a plain message)."""
    if isinstance(exc, ApiError):
        return exc.status, error_body(exc.code, exc.message, exc.details)
    if isinstance(exc, ConfigError):
        details = [{"key": i.key, "message": i.message} for i in exc.issues]
        return 400, error_body("invalid", "; ".join(f"{d['key']}: {d['message']}" for d in details), details)
    if isinstance(exc, NotFound):
        return 404, error_body("not_found", str(exc))
    if isinstance(exc, CallbackExists):
        taken = {"callbackId": exc.callback_id, "state": exc.state}
        return 409, error_body("callback_exists", str(exc), taken)
    if isinstance(exc, Conflict):
        return 409, error_body("conflict", str(exc))
    if isinstance(exc, InvalidCursor):
        return 400, error_body("invalid_cursor", str(exc))
    if isinstance(exc, StoreUnavailable):  # a full disk, Redis down: the client may retry later
        return 503, error_body("store_unavailable", STORE_UNAVAILABLE_MESSAGE)
    return 500, error_body("internal", INTERNAL_MESSAGE)


def _from_exception(exc: Exception) -> web.Response:
    if isinstance(exc, web.HTTPException):
        return _from_http_exception(exc)
    status, body = error_of(exc)
    return web.json_response(body, status=status)


def _render(request: web.Request, exc: Exception) -> web.Response:
    response = _from_exception(exc)
    if response.status >= 500:
        log.error("%s %s failed (%d): %s", request.method, request.path, response.status, exc, exc_info=exc)
    return response


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Render every error raised below as the JSON error shape; log each 5xx with its cause."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _render(request, exc)
    except Exception as exc:
        return _render(request, exc)
