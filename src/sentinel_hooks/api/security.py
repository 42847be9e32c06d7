"""Who may call the API: bearer token, loopback Host without a token, JSON-only writes.

- With ``server.apiToken`` or ``server.tokens``: ``/api/*``, ``/hooks/sentinel``, ``/mcp`` (and
  ``/metrics`` with ``metricsAuth``) need ``Authorization: Bearer <token>``. The scheme is
  case-insensitive (RFC 7235), the token is compared in constant time (``api.access``), and nothing
  else carries it (no other header, no query string).
- The token's role must be at least the role the route's endpoint declares (SPEC §21): 403
  before the handler runs, so nothing changes. This is the one place roles are checked for routes.
- Without it the service answers, on every route, only requests whose ``Host`` is exactly
  ``localhost``, an IPv4 address in 127.0.0.0/8 or ``[::1]``, each with an optional port
  (421 otherwise). A DNS-rebinding page reaches the service under its own name
  (``127.0.0.1.nip.io``, ``foo.localhost``), so names are matched exactly and addresses
  are parsed, never prefix-matched.
- A non-empty body POSTed or PATCHed to ``/api/*`` and ``/hooks/*`` must be labelled JSON
  (415), so a browser form cannot forge a write; an empty body needs no label. Two routes take
  other bodies: heartbeat pings (any text) and Slack's interactions (a form, which only Slack's
  signature makes count).
"""

from __future__ import annotations

import ipaddress

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from sentinel_hooks.api.access import IDENTITY, Tokens
from sentinel_hooks.api.body import is_json_type
from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.core.roles import Role, allows
from sentinel_hooks.endpoints import ENDPOINTS

LOOPBACK_NAMES = frozenset({"localhost", "[::1]"})
LOOPBACK_NETWORK = ipaddress.IPv4Network("127.0.0.0/8")
MAX_PORT = 65535
JSON_ONLY = "the body must be JSON (Content-Type: application/json)"
ROLE_OF: dict[tuple[str, str], Role] = {(e.method, e.path): e.role for e in ENDPOINTS if e.role is not None}
"""The least role each route needs, from the endpoint declarations."""


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


PING_PREFIX = "/hooks/ping/"  # heartbeat pings (SPEC §23): no token, any body
SLACK_PATH = "/hooks/slack/interactions"  # Slack's form post (SPEC §21): its route checks the form


def needs_token(path: str, *, metrics_auth: bool) -> bool:
    if path.startswith("/api/") or path in ("/hooks/sentinel", "/mcp"):
        return True
    return path == "/metrics" and metrics_auth


def needed_role(request: web.Request) -> Role | None:
    """The least role the matched route needs (a HEAD is its GET's); None for a route that declares
    none (and for no route: aiohttp's 404 and 405)."""
    resource = request.match_info.route.resource
    if resource is None:
        return None
    method = "GET" if request.method == "HEAD" else request.method
    return ROLE_OF.get((method, resource.canonical))


def security_middleware(tokens: Tokens, *, metrics_auth: bool) -> Middleware:
    """The middleware enforcing the rules of this module's docstring."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if not tokens:
            if not is_loopback_host(request.headers.get("Host", "")):
                raise ApiError(
                    421,
                    "misdirected_request",
                    "without server.apiToken or server.tokens this service answers only Host localhost, "
                    "127.x.x.x or [::1] (with an optional port); set a token to serve other hosts",
                )
        elif needs_token(path, metrics_auth=metrics_auth):
            given = bearer_token(request.headers.get("Authorization", ""))
            identity = None if given is None else tokens.identify(given)
            if identity is None:
                raise ApiError(401, "unauthorized", "missing or wrong bearer token (Authorization: Bearer …)")
            needed = needed_role(request)
            if needed is not None and not allows(identity.role, needed):
                raise ApiError(
                    403,
                    "forbidden",
                    f"the token {identity.name!r} has the role {identity.role}; "
                    f"{request.method} {path} needs {needed}",
                    {"role": identity.role, "needed": needed},
                )
            request[IDENTITY] = identity
        writes = request.method in ("POST", "PATCH", "PUT") and path.startswith(("/api/", "/hooks/"))
        writes = writes and not path.startswith(PING_PREFIX) and path != SLACK_PATH  # any text / a form
        if writes and request.body_exists and not is_json_type(request.headers.get("Content-Type", "")):
            raise ApiError(415, "unsupported_media_type", JSON_ONLY)
        return await handler(request)

    return middleware
