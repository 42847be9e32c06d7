"""The errors of Sentinel's one outbound HTTP client (``net.client.SafeHttp``).

Every failure of a request, a stream or a WebSocket handshake becomes one of these, so
strategies and delivery handle a single tree and never see ``aiohttp`` exceptions. The
classes marked (transient) also derive from ``errors.TransientError``: trying again may help::

    SentinelError
    └── NetError                 method, url, reason, retry_after_s
        ├── HostNotAllowed        host not in allowedHosts, or a non-canonical IP literal
        ├── PrivateAddressRefused the host is or resolves to a private/loopback/… address
        ├── InvalidUrl            the URL cannot be requested (bad scheme, no host …)
        ├── RedirectRefused       the server answered 3xx (Sentinel never follows redirects)
        ├── ResponseTooLarge      the body passed the byte limit; reading stopped
        ├── CertificateRejected   the server's TLS certificate did not verify
        ├── RequestTimeout        no complete answer within the timeout (transient)
        ├── NoSlot                every request slot stayed busy for ``start_within_s``; nothing sent
        ├── ConnectionFailed      DNS, connect, reset, TLS, protocol errors (transient)
        │   └── ConnectTimeout    the TCP/TLS connection itself timed out
        └── HttpStatusError       a non-2xx status (``status_error`` picks the class)
            └── TransientHttpStatusError  5xx, 408, 425 and 429 (transient)

The message reads ``GET https://x/y: <reason>``; URLs are kept as given (callers redact).
"""

from __future__ import annotations

from http import HTTPStatus

from sentinel_hooks.errors import SentinelError, TransientError


class NetError(SentinelError):
    """An outbound request failed; a ``TransientError`` subclass when trying again may help."""

    def __init__(
        self,
        reason: str,
        *,
        method: str | None = None,
        url: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.method = method
        self.url = url
        self.retry_after_s = retry_after_s

    def for_request(self, method: str, url: str) -> NetError:
        """This error, naming ``method`` and ``url`` unless it already names a request."""
        if self.url is None:
            self.method, self.url = method.upper(), url
        return self

    def __str__(self) -> str:
        if self.url is None:
            return self.reason
        return f"{self.method} {self.url}: {self.reason}"


class HostNotAllowed(NetError):
    """The URL's host is not in ``allowedHosts`` (or is an IP literal in a legacy form)."""


class PrivateAddressRefused(NetError):
    """The host is, or resolves to, an address Sentinel refuses (SPEC §2.1)."""


class InvalidUrl(NetError):
    """The URL cannot be requested at all."""


class RedirectRefused(NetError):
    """The server answered with a redirect; ``location`` is where it pointed."""

    def __init__(self, status: int, location: str | None) -> None:
        where = f"redirect to {location}" if location else f"redirect (HTTP {status}, no Location)"
        super().__init__(f"{where} refused (Sentinel never follows redirects)")
        self.status = status
        self.location = location


class ResponseTooLarge(NetError):
    """The response body passed ``limit_bytes``; the connection was closed."""

    def __init__(self, limit_bytes: int, *, declared_bytes: int | None = None) -> None:
        if declared_bytes is not None:
            reason = f"response declares {declared_bytes} bytes, over the {limit_bytes}-byte limit"
        else:
            reason = f"response body passed the {limit_bytes}-byte limit; reading stopped"
        super().__init__(f"{reason} (raise limits.maxResponseBytes if this is expected)")
        self.limit_bytes = limit_bytes


class CertificateRejected(NetError):
    """The server's TLS certificate did not verify (expired, wrong host, unknown issuer)."""


class RequestTimeout(NetError, TransientError):
    """No complete answer arrived within the timeout."""


class NoSlot(NetError):
    """The request could not start: every request slot stayed busy for as long as the caller could wait.

    Nothing was sent. A poller skips that poll (it is due again at its next run) rather than
    retrying into a backlog.
    """


class ConnectionFailed(NetError, TransientError):
    """The connection could not be made or broke (DNS, refused, reset, TLS, protocol)."""


class ConnectTimeout(ConnectionFailed):
    """Opening the connection timed out (nothing was sent)."""


RETRYABLE_STATUSES = frozenset({408, 425, 429})


def status_line(status: int) -> str:
    """``HTTP 502 Bad Gateway`` (the standard reason phrase; just ``HTTP 599`` for an unknown code)."""
    try:
        return f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"HTTP {status}"


class HttpStatusError(NetError):
    """A non-2xx answer (``TransientHttpStatusError`` for 5xx, 408, 425 and 429).

    The message is the status line, then what the body said: ``detail`` (its first words), or,
    when the body was an HTML page, only its title (``page_title``; "" for a page without one):
    ``HTTP 502 Bad Gateway (HTML page: "502 Bad Gateway")``.
    """

    def __init__(
        self,
        status: int,
        *,
        retry_after_s: float | None = None,
        detail: str = "",
        page_title: str | None = None,
    ) -> None:
        reason = status_line(status)
        if page_title is not None:
            reason += f' (HTML page: "{page_title}")' if page_title else " (HTML page)"
        elif detail:
            reason += f": {detail}"
        super().__init__(reason, retry_after_s=retry_after_s)
        self.status = status


class TransientHttpStatusError(HttpStatusError, TransientError):
    """A non-2xx answer that may pass with time: 5xx, 408, 425 or 429."""


def status_transient(status: int) -> bool:
    """Whether a non-2xx answer may pass with time (5xx, 408, 425, 429)."""
    return status >= 500 or status in RETRYABLE_STATUSES


def status_error(
    status: int, *, retry_after_s: float | None = None, detail: str = "", page_title: str | None = None
) -> HttpStatusError:
    """The ``HttpStatusError`` for a non-2xx ``status``: transient for 5xx, 408, 425 and 429."""
    kind = TransientHttpStatusError if status_transient(status) else HttpStatusError
    return kind(status, retry_after_s=retry_after_s, detail=detail, page_title=page_title)
