"""Who may call the API: bearer token, loopback Host without a token, JSON-only writes.

- With ``server.apiToken``: ``/api/*``, ``/hooks/sentinel``, ``/mcp`` (and ``/metrics`` with
  ``metricsAuth``) need ``Authorization: Bearer <token>``. The scheme is case-insensitive
  (RFC 7235), the token is compared in constant time, and nothing else carries it (no other
  header, no query string).
- Without it the service answers, on every route, only requests whose ``Host`` is exactly
  ``localhost``, an IPv4 address in 127.0.0.0/8 or ``[::1]``, each with an optional port
  (421 otherwise). A DNS-rebinding page reaches the service under its own name
  (``127.0.0.1.nip.io``, ``foo.localhost``), so names are matched exactly and addresses
  are parsed, never prefix-matched.
- A non-empty body POSTed or PATCHed to ``/api/*`` and ``/hooks/*`` must be labelled JSON
  (415), so a browser form cannot forge a write; an empty body needs no label.
"""

from __future__ import annotations

import hmac
import ipaddress

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from sentinel_hooks.api.body import is_json_type
from sentinel_hooks.api.errors import ApiError

LOOPBACK_NAMES = frozenset({"localhost", "[::1]"})
LOOPBACK_NETWORK = ipaddress.IPv4Network("127.0.0.0/8")
MAX_PORT = 65535
JSON_ONLY = "the body must be JSON (Content-Type: application/json)"


def _split_host(host: str) -> tuple[str, str | None] | None:
    """``(name, port or None)`` of a Host header; None when it is not ``name[:port]``."""
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return None
        name, rest = host[: end + 1], host[end + 1 :]
    else:
        name, colon, port = host.partition(":")
        rest = colon + port
    if not rest:
        return name, None
    return (name, rest[1:]) if rest.startswith(":") else None


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 5 and int(text) <= MAX_PORT


def _is_loopback_address(name: str) -> bool:
    try:
        return ipaddress.IPv4Address(name) in LOOPBACK_NETWORK
    except ValueError:
        return False


def is_loopback_host(host_header: str) -> bool:
    """Whether a Host header is ``localhost``, a 127.0.0.0/8 address or ``[::1]`` (optional port)."""
    parts = _split_host(host_header.strip().lower())
    if parts is None:
        return False
    name, port = parts
    if port is not None and not _is_port(port):
        return False
    return name in LOOPBACK_NAMES or _is_loopback_address(name)


def auth_scheme(authorization: str, scheme: str) -> str | None:
    """The credentials of an ``Authorization: <scheme> <credentials>`` header, exactly as sent, or
    None for another scheme. The scheme matches in any ASCII case (RFC 7235) and is followed by one
    or more spaces; nothing else is stripped. aiohttp has already dropped the spaces and tabs around
    the field value (RFC 9110's OWS) and rejected control characters; anything else it kept
    (``str.strip`` would also drop a non-breaking space, U+3000 …) is part of the credentials, so a
    token with a character added is another token."""
    given, _, credentials = authorization.partition(" ")
    if not given.isascii() or given.lower() != scheme:
        return None
    return credentials.lstrip(" ")


def bearer_token(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (any case of the scheme), else None."""
    return auth_scheme(authorization, "bearer")


def token_matches(authorization: str, expected: bytes) -> bool:
    """Whether the header carries the expected token; compared in constant time, as bytes.

    Header bytes that are not UTF-8 reach us as surrogate escapes: they are compared as sent.
    """
    given = bearer_token(authorization)
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected)


PING_PREFIX = "/hooks/ping/"  # heartbeat pings (SPEC §23): no token, any body


def needs_token(path: str, *, metrics_auth: bool) -> bool:
    if path.startswith("/api/") or path in ("/hooks/sentinel", "/mcp"):
        return True
    return path == "/metrics" and metrics_auth


def security_middleware(api_token: str | None, *, metrics_auth: bool) -> Middleware:
    """The middleware enforcing the rules of this module's docstring."""
    expected = api_token.encode() if api_token else None

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if expected is None:
            if not is_loopback_host(request.headers.get("Host", "")):
                raise ApiError(
                    421,
                    "misdirected_request",
                    "without server.apiToken this service answers only Host localhost, 127.x.x.x or "
                    "[::1] (with an optional port); set server.apiToken to serve other hosts",
                )
        elif needs_token(path, metrics_auth=metrics_auth) and not token_matches(
            request.headers.get("Authorization", ""), expected
        ):
            raise ApiError(401, "unauthorized", "missing or wrong bearer token (Authorization: Bearer …)")
        writes = request.method in ("POST", "PATCH", "PUT") and path.startswith(("/api/", "/hooks/"))
        writes = writes and not path.startswith(PING_PREFIX)  # a ping's body is any text
        if writes and request.body_exists and not is_json_type(request.headers.get("Content-Type", "")):
            raise ApiError(415, "unsupported_media_type", JSON_ONLY)
        return await handler(request)

    return middleware
