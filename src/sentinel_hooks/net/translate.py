"""Translation of ``aiohttp``/``asyncio``/``OSError`` failures into the ``net.errors`` tree.

One place decides what each foreign failure means (and whether retrying may help), so the
client's three entry points and the code reading a stream all report alike.
"""

from __future__ import annotations

from types import TracebackType

import aiohttp

from sentinel_hooks.net.errors import (
    CertificateRejected,
    ConnectionFailed,
    ConnectTimeout,
    InvalidUrl,
    NetError,
    RedirectRefused,
    RequestTimeout,
    status_error,
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
        return status_error(exc.status, detail="WebSocket handshake refused")
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
        return CertificateRejected(f"TLS certificate rejected: {exc.certificate_error}")
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


class translated:
    """Re-raise failures inside the block as ``NetError`` naming ``method`` and ``url``.

    A small class rather than ``@contextmanager``: one is entered for every request and poll,
    and a generator-based manager costs several times as much to create and enter.
    """

    __slots__ = ("_method", "_timeout_s", "_url")

    def __init__(self, method: str, url: str, *, timeout_s: float | None = None) -> None:
        self._method, self._url, self._timeout_s = method, url, timeout_s

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if isinstance(exc, NetError):
            exc.for_request(self._method, self._url)
        elif isinstance(exc, TRANSLATED):
            raise translate(exc, timeout_s=self._timeout_s).for_request(self._method, self._url) from exc
