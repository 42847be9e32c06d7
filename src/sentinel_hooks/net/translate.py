"""Translation of ``aiohttp``/``asyncio``/``OSError`` failures into the ``net.errors`` tree.

One place decides what each foreign failure means (and whether retrying may help), so the
client's three entry points and the code reading a stream all report alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp

from sentinel_hooks.net.errors import (
    ConnectionFailed,
    ConnectTimeout,
    HttpStatusError,
    InvalidUrl,
    NetError,
    RedirectRefused,
    RequestTimeout,
)

TRANSLATED = (aiohttp.ClientError, TimeoutError, OSError)


def _os_reason(error: OSError | None, fallback: BaseException) -> str:
    if error is not None and error.strerror:
        return error.strerror
    return str(error or fallback) or type(fallback).__name__


def _handshake(exc: aiohttp.WSServerHandshakeError) -> NetError:
    if 300 <= exc.status < 400:
        location = exc.headers.get("Location") if exc.headers else None
        return RedirectRefused(exc.status, location)
    if exc.status >= 400:
        return HttpStatusError(exc.status, detail="WebSocket handshake refused")
    return ConnectionFailed(f"WebSocket handshake failed (HTTP {exc.status}): {exc.message}")


def translate(exc: BaseException, *, timeout_s: float | None = None) -> NetError:
    """The ``NetError`` that ``exc`` (an aiohttp, timeout or OS failure) stands for."""
    if isinstance(exc, NetError):
        return exc
    within = f" within {timeout_s:g} s" if timeout_s is not None else ""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ConnectTimeout("could not connect (connect timed out)")
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return RequestTimeout(f"the server sent nothing{within} (read timed out)")
    if isinstance(exc, TimeoutError):
        return RequestTimeout(f"no complete answer{within} (timed out)")
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return ConnectionFailed(f"TLS certificate rejected: {exc.certificate_error}", retryable=False)
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return ConnectionFailed(f"cannot resolve {exc.host!r}: {_os_reason(exc.os_error, exc)}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ConnectionFailed(f"cannot connect to {exc.host}:{exc.port}: {_os_reason(exc.os_error, exc)}")
    if isinstance(exc, aiohttp.WSServerHandshakeError):
        return _handshake(exc)
    if isinstance(exc, aiohttp.InvalidURL):
        return InvalidUrl(f"invalid URL: {exc}")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return ConnectionFailed("the server closed the connection before answering")
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ConnectionFailed(f"the response body was cut off or malformed: {exc}")
    if isinstance(exc, aiohttp.ClientResponseError):
        return ConnectionFailed(f"bad response (HTTP {exc.status}): {exc.message}")
    if isinstance(exc, OSError):
        return ConnectionFailed(f"connection failed: {_os_reason(exc, exc)}")
    return ConnectionFailed(f"request failed: {exc or type(exc).__name__}")


@contextmanager
def translated(method: str, url: str, *, timeout_s: float | None = None) -> Iterator[None]:
    """Re-raise failures inside the block as ``NetError`` naming ``method`` and ``url``."""
    try:
        yield
    except NetError as exc:
        exc.for_request(method, url)
        raise
    except TRANSLATED as exc:
        raise translate(exc, timeout_s=timeout_s).for_request(method, url) from exc
