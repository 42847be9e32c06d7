"""The app's routes, registered from the endpoint declarations (``sentinel_hooks.endpoints``).

Each ``api/routes/`` module ties its handlers to the endpoints they serve (``@routes.serve``);
``add_routes`` registers every declared endpoint with its handler, and refuses to start when an
endpoint has no handler or a handler serves no declared endpoint: the routes cannot drift from
the declarations the OpenAPI document and the MCP tools are made from.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from aiohttp import web

from sentinel_hooks.api.errors import ApiError
from sentinel_hooks.endpoints import ENDPOINTS, Endpoint
from sentinel_hooks.endpoints.schemas import parameters

if TYPE_CHECKING:
    from sentinel_hooks.service import Service

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
H = TypeVar("H", bound=Handler)


class Routes:
    """One module's handlers, by the endpoint each serves."""

    def __init__(self) -> None:
        self.handlers: dict[Endpoint, Handler] = {}

    def serve(self, endpoint: Endpoint) -> Callable[[H], H]:
        """Decorate the handler of ``endpoint``."""

        def register(handler: H) -> H:
            if endpoint in self.handlers:
                raise ValueError(f"{endpoint.method} {endpoint.path} has two handlers")
            self.handlers[endpoint] = handler
            return handler

        return register


def add_routes(app: web.Application, handlers: Mapping[Endpoint, Handler]) -> None:
    """Register every declared endpoint with its handler (a GET answers HEAD too, as aiohttp's
    own route tables do)."""
    missing = [f"{e.method} {e.path}" for e in ENDPOINTS if e not in handlers]
    undeclared = [f"{e.method} {e.path}" for e in handlers if e not in ENDPOINTS]
    if missing or undeclared:
        raise RuntimeError(f"endpoints without a handler: {missing}; handlers of no endpoint: {undeclared}")
    for endpoint in ENDPOINTS:
        handler = handlers[endpoint]
        if endpoint.query is not None:
            handler = _once_each(frozenset(p.name for p in parameters(endpoint.query)), handler)
        if endpoint.any_method:
            app.router.add_route("*", endpoint.path, handler)
        elif endpoint.method == "GET":
            app.router.add_get(endpoint.path, handler)
        else:
            app.router.add_route(endpoint.method, endpoint.path, handler)


def _once_each(names: frozenset[str], handler: Handler) -> Handler:
    """``handler``, after a 400 for a declared query parameter given more than once (which of
    them would count is anybody's guess: ``?limit=5&limit=500``)."""

    async def checked(request: web.Request) -> web.StreamResponse:
        for name in sorted(names):
            given = len(request.query.getall(name, ()))
            if given > 1:
                raise ApiError(
                    400,
                    "invalid_query",
                    f"{name} is given {given} times; give it once",
                    {"parameter": name},
                )
        return await handler(request)

    return checked


def body_limit(endpoint: Endpoint, service: Service) -> int:
    """The most bytes of body ``endpoint`` reads: its declared limit, or ``limits.maxResponseBytes``
    when larger for a body that carries an observation."""
    body = endpoint.body
    if body is None or body.max_bytes is None:
        raise ValueError(f"{endpoint.method} {endpoint.path} declares no body limit")
    if body.observation:
        return max(body.max_bytes, service.settings.limits.max_response_bytes)
    return body.max_bytes
