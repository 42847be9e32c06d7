"""The operator's web page (SPEC.md §9 ``GET /``): one HTML shell, one script, one stylesheet.

The page itself holds no data: it is a Jinja2 shell (autoescaped) that loads ``/static/app.js``,
``app.css`` and ``icon.svg``; the script reads and changes everything through the JSON API with
the bearer token the operator types in (kept in ``sessionStorage``). So the shell and its assets
are served without a token — they reveal nothing — while every data call still needs one when
``server.apiToken`` is set. The security middleware's loopback-Host rule applies here as
everywhere (421 for a foreign Host when no token is configured), which keeps DNS-rebinding
pages away from an unprotected service.

Every response of this module carries a strict Content-Security-Policy (no inline script or
style, nothing from other origins, no framing) and the usual hardening headers. There is no
front-end build step: the files under ``api/web/`` are served as they are.
"""

from __future__ import annotations

import functools
from importlib import resources
from importlib.resources.abc import Traversable
from typing import get_args

import jinja2
from aiohttp import web

from sentinel_hooks import __version__
from sentinel_hooks.api.app import service_of
from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.api.routing import Routes
from sentinel_hooks.endpoints import service as endpoints
from sentinel_hooks.inbox.transitions import INBOX_KINDS, INBOX_STATUSES
from sentinel_hooks.store.records import Severity

routes = Routes()

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "font-src 'none'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
"""No inline script or style, no other origins, no plugins, no framing, no form posts."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}

STATIC_TYPES = {
    "app.js": "text/javascript",
    "app.css": "text/css",
    "icon.svg": "image/svg+xml",
}
"""The only files ``/static/`` serves, with their media types (anything else is 404)."""

SEVERITIES: tuple[str, ...] = get_args(Severity)


def _web_dir() -> Traversable:
    return resources.files("sentinel_hooks.api").joinpath("web")


@functools.cache
def template_environment() -> jinja2.Environment:
    """The page templates' environment: package files, autoescaping on, undefined names are errors."""
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _load_template(name: str) -> str | None:
    path = _web_dir().joinpath("templates", name)
    return path.read_text(encoding="utf-8") if path.is_file() else None


@functools.cache
def static_file(name: str) -> bytes:
    """The bytes of one of the ``STATIC_TYPES`` files (read once)."""
    return _web_dir().joinpath("static", name).read_bytes()


def secured(response: web.Response, *, cache: str) -> web.Response:
    """``response`` with the security headers and ``Cache-Control: cache``."""
    response.headers.update(SECURITY_HEADERS)
    response.headers["Cache-Control"] = cache
    return response


def render_page(*, token_required: bool) -> str:
    """The page's HTML shell; ``token_required`` lets the script ask for the token before any call."""
    template = template_environment().get_template("index.html")
    return template.render(
        version=__version__,
        token_required=token_required,
        statuses=INBOX_STATUSES,
        kinds=INBOX_KINDS,
        severities=SEVERITIES,
    )


@routes.serve(endpoints.PAGE)
async def page(request: web.Request) -> web.Response:
    """The web page: inbox, watchers, recent callbacks (data comes from the JSON API)."""
    token_required = service_of(request).settings.server.has_tokens
    response = web.Response(text=render_page(token_required=token_required), content_type="text/html")
    return secured(response, cache="no-store")


@routes.serve(endpoints.ASSET)
async def static(request: web.Request) -> web.Response:
    """The page's script, stylesheet and icon; any other name is 404."""
    name = request.match_info["name"]
    media_type = STATIC_TYPES.get(name)
    if media_type is None:
        raise ApiError(404, "not_found", f"no static file {name!r}; there are {', '.join(STATIC_TYPES)}")
    response = web.Response(body=static_file(name), content_type=media_type, charset="utf-8")
    return secured(response, cache="no-cache")
