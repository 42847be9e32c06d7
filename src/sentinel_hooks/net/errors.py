"""The errors of Sentinel's one outbound HTTP client (``net.client.SafeHttp``).

Every failure of a request, a stream or a WebSocket handshake becomes one of these, so
strategies and delivery handle a single tree and never see ``aiohttp`` exceptions::

    SentinelError
    └── NetError                 method, url, reason, retryable, retry_after_s
        ├── HostNotAllowed        host not in allowedHosts, or a non-canonical IP literal
        ├── PrivateAddressRefused the host is or resolves to a private/loopback/… address
        ├── InvalidUrl            the URL cannot be requested (bad scheme, no host …)
        ├── RedirectRefused       the server answered 3xx (Sentinel never follows redirects)
        ├── ResponseTooLarge      the body passed the byte limit; reading stopped
        ├── RequestTimeout        no complete answer within the timeout (retryable)
        ├── NoSlot                every request slot stayed busy for ``start_within_s``; nothing sent
        ├── ConnectionFailed      DNS, connect, reset, TLS, protocol errors (retryable)
        │   └── ConnectTimeout    the TCP/TLS connection itself timed out
        └── HttpStatusError       a non-2xx status, raised by ``raise_for_status`` only

The message reads ``GET https://x/y: <reason>``; URLs are kept as given (callers redact).
"""

from __future__ import annotations

from http import HTTPStatus

from sentinel_hooks.errors import SentinelError


class NetError(SentinelError):
    """An outbound request failed; ``retryable`` says whether trying again may help."""

    retryable_by_default = True

    def __init__(
        self,
        reason: str,
        *,
        method: str | None = None,
        url: str | None = None,
        retryable: bool | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.method = method
        self.url = url
        self.retryable = self.retryable_by_default if retryable is None else retryable
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

    retryable_by_default = False


class PrivateAddressRefused(NetError):
    """The host is, or resolves to, an address Sentinel refuses (SPEC §2.1)."""

    retryable_by_default = False


class InvalidUrl(NetError):
    """The URL cannot be requested at all."""

    retryable_by_default = False


class RedirectRefused(NetError):
    """The server answered with a redirect; ``location`` is where it pointed."""

    retryable_by_default = False

    def __init__(self, status: int, location: str | None) -> None:
        where = f"redirect to {location}" if location else f"redirect (HTTP {status}, no Location)"
        super().__init__(f"{where} refused (Sentinel never follows redirects)")
        self.status = status
        self.location = location


class ResponseTooLarge(NetError):
    """The response body passed ``limit_bytes``; the connection was closed."""

    retryable_by_default = False

    def __init__(self, limit_bytes: int, *, declared_bytes: int | None = None) -> None:
        if declared_bytes is not None:
            reason = f"response declares {declared_bytes} bytes, over the {limit_bytes}-byte limit"
        else:
            reason = f"response body passed the {limit_bytes}-byte limit; reading stopped"
        super().__init__(f"{reason} (raise limits.maxResponseBytes if this is expected)")
        self.limit_bytes = limit_bytes


class RequestTimeout(NetError):
    """No complete answer arrived within the timeout."""


class NoSlot(NetError):
    """The request could not start: every request slot stayed busy for as long as the caller could wait.

    Nothing was sent. A poller skips that poll (it is due again at its next run) rather than
    retrying into a backlog.
    """

    retryable_by_default = False


class ConnectionFailed(NetError):
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
    """A non-2xx answer: retryable for 5xx, 408, 425 and 429.

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
        retryable = status >= 500 or status in RETRYABLE_STATUSES
        reason = status_line(status)
        if page_title is not None:
            reason += f' (HTML page: "{page_title}")' if page_title else " (HTML page)"
        elif detail:
            reason += f": {detail}"
        super().__init__(reason, retryable=retryable, retry_after_s=retry_after_s)
        self.status = status
