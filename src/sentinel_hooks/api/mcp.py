"""``/mcp``: Sentinel's MCP tools over streamable HTTP, on the service's own aiohttp server.

The tools are answered in-process (``ServiceBackend``) by the functions the API's routes call,
so a tool's result is the body the route would return and its errors the route's errors.

Transport: the SDK's streamable HTTP transport is an ASGI app, the service is aiohttp. We use the
SDK's ``StreamableHTTPSessionManager`` in *stateless, JSON-response* mode and drive it from one
aiohttp handler through a twenty-line ASGI bridge (``_asgi``). Why this way:

- the SDK keeps the whole protocol (JSON-RPC framing, version negotiation, Accept and Content-Type
  checks, error codes); we write none of it;
- stateless + JSON means every POST is answered by one JSON body and nothing outlives the request:
  no session table, no SSE streams held open, nothing to reap or to lose on restart or on another
  replica (Sentinel's tools never call back into the client, so nothing needs a session);
- authentication and the Host check stay in our security middleware, as for every other route
  (``needs_token`` covers ``/mcp``), so the SDK's own DNS-rebinding check is turned off;
- the body gets the API's request hygiene (SPEC §9, ``api.body``) before the SDK reads it: the
  SDK's parser takes ``NaN`` (then stored as null), keeps the last of duplicate keys and nests
  without limit, so those are refused here with the API's 400 (``_refused``); the whole request
  is capped at the largest body a tool can send plus the JSON-RPC framing (413), and each tool's
  arguments at the limit of the route it stands for (``ServiceBackend``, an error result);
- the manager's task group runs in a task of its own (``McpEndpoint.run``), started and stopped
  with the aiohttp app (``cleanup_ctx``): anyio task groups must be entered and left by the same
  task, and stopping the app cancels whatever the manager still runs, so nothing leaks.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import INVALID_REQUEST, PARSE_ERROR

from sentinel_hooks.api.access import IDENTITY, who_of
from sentinel_hooks.api.body import parse_json, read_raw, require_json_type
from sentinel_hooks.api.errors import ApiError, error_of
from sentinel_hooks.api.routes import callbacks, inbox, silences, watchers
from sentinel_hooks.api.routing import Handler as RouteHandler
from sentinel_hooks.api.routing import body_limit
from sentinel_hooks.core.roles import Role, Who
from sentinel_hooks.endpoints import Endpoint
from sentinel_hooks.endpoints import callbacks as callback_endpoints
from sentinel_hooks.endpoints import inbox as inbox_endpoints
from sentinel_hooks.endpoints import silences as silence_endpoints
from sentinel_hooks.endpoints import watchers as watcher_endpoints
from sentinel_hooks.endpoints.service import MCP
from sentinel_hooks.mcp_server.backend import Answer, error_body
from sentinel_hooks.mcp_server.server import build_server
from sentinel_hooks.mcp_server.tools import TOOLS, ApiCall

if TYPE_CHECKING:
    from sentinel_hooks.service import Service

log = logging.getLogger(__name__)

ACTOR = "mcp"  # who acted, in inbox histories and silences' createdBy, unless the request names one
_WHO: contextvars.ContextVar[Who] = contextvars.ContextVar("sentinel_mcp_who", default=Who(ACTOR, via="mcp"))  # noqa: B039 (frozen)
_ROLE: contextvars.ContextVar[Role | None] = contextvars.ContextVar("sentinel_mcp_role", default=None)
FRAMING_BYTES = 16 * 1024  # the JSON-RPC message around a tool's arguments

Handler = Callable[["Service", ApiCall], Awaitable[Any]]


async def _delete(service: Service, call: ApiCall) -> None:
    await service.delete_watcher(call.ids["id"], _WHO.get())


async def _get_watcher(service: Service, call: ApiCall) -> dict[str, Any]:
    return await watchers.watcher_json(service, service.watcher(call.ids["id"]))


HANDLERS: dict[Endpoint, Handler] = {
    watcher_endpoints.LIST: lambda s, c: watchers.watcher_page(s, c.query),
    watcher_endpoints.SHOW: _get_watcher,
    watcher_endpoints.CREATE: lambda s, c: watchers.create_from(s, c.body, _WHO.get()),
    watcher_endpoints.PATCH: lambda s, c: watchers.set_enabled_from(s, c.ids["id"], c.body, _WHO.get()),
    watcher_endpoints.DELETE: _delete,
    watcher_endpoints.FIRE: lambda s, c: watchers.fire_from(s, c.ids["id"], c.body, _WHO.get()),
    callback_endpoints.LIST: lambda s, c: callbacks.callback_page(s, c.query),
    callback_endpoints.SHOW: lambda s, c: callbacks.callback_json(s, c.ids["id"]),
    inbox_endpoints.LIST: lambda s, c: inbox.inbox_page(s, c.query),
    inbox_endpoints.ACK: lambda s, c: inbox.ack_from(s, c.ids["id"], c.body, _WHO.get()),
    inbox_endpoints.RESOLVE: lambda s, c: inbox.move_from(s, "resolve", c.ids["id"], c.body, _WHO.get()),
    inbox_endpoints.APPROVE: lambda s, c: inbox.move_from(s, "approve", c.ids["id"], c.body, _WHO.get()),
    inbox_endpoints.DENY: lambda s, c: inbox.move_from(s, "deny", c.ids["id"], c.body, _WHO.get()),
    silence_endpoints.LIST: lambda s, c: silences.silence_page(s, c.query),
    silence_endpoints.CREATE: lambda s, c: silences.create_from(s, c.body, _WHO.get()),
}
"""What answers each tool's endpoint in-process: the function its route calls after parsing HTTP
(the answer's status is the endpoint's)."""


def body_limits(service: Service) -> dict[str, int]:
    """The most bytes of JSON each tool may send, by tool: its route's limit (``read_json``)."""
    return {tool.name: body_limit(tool.endpoint, service) for tool in TOOLS if tool.endpoint.body}


def _too_large(call: ApiCall, limit: int) -> Answer | None:
    """The route's 413 when the call's body is over ``limit`` bytes of JSON, else None."""
    if call.body is None or len(json.dumps(call.body, ensure_ascii=False).encode()) <= limit:
        return None
    message = f"the body of {call.method} {call.route} is larger than {limit} bytes"
    return Answer(413, error_body("payload_too_large", message))


class ServiceBackend:
    """Answers a tool's API call in-process, with the route's status, body and errors."""

    def __init__(self, service: Service) -> None:
        self._service = service
        self._limits = body_limits(service)

    async def send(self, call: ApiCall) -> Answer:
        status, handler = call.endpoint.success.status, HANDLERS[call.endpoint]
        refused = _too_large(call, self._limits.get(call.tool, max(self._limits.values())))
        if refused is not None:
            return refused
        try:
            return Answer(status, await handler(self._service, call))
        except Exception as exc:
            failed, body = error_of(exc)
            if failed >= 500:
                log.error("MCP tool %s failed (%d): %s", call.tool, failed, exc, exc_info=exc)
            return Answer(failed, body)


class McpEndpoint:
    """The SDK's session manager for one app, its lifetime and the aiohttp handler in front of it."""

    def __init__(self, service: Service) -> None:
        server = build_server(
            ServiceBackend(service), approvals=service.settings.server.mcp_approvals, role=_ROLE.get
        )
        self.max_body = max(body_limits(service).values()) + FRAMING_BYTES
        self._manager = StreamableHTTPSessionManager(
            app=server,
            json_response=True,
            stateless=True,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=self.max_body,
        )
        self._started = asyncio.Event()
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        """Run the manager until ``lifetime`` ends (in a task of its own: see the module docstring)."""
        async with self._manager.run():
            self._started.set()
            await self._stopping.wait()

    async def lifetime(self, app: web.Application) -> AsyncIterator[None]:
        """``cleanup_ctx``: the manager runs while the app does."""
        task = asyncio.create_task(self.run(), name="sentinel-mcp")
        started = asyncio.create_task(self._started.wait())
        await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await started
        if task.done():
            task.result()  # the manager could not start: raise why
        try:
            yield
        finally:
            self._stopping.set()
            await task

    def _too_large(self) -> ApiError:
        """The 413 of a request past ``max_body``, saying what the tools take."""
        limit = self.max_body - FRAMING_BYTES
        message = (
            f"the MCP request is larger than {self.max_body} bytes: no tool takes more than {limit} "
            f"bytes of arguments (a watcher definition: {watcher_endpoints.MAX_BODY})"
        )
        return ApiError(413, "payload_too_large", message)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """``POST /mcp`` (a stateless endpoint has no GET stream and no session to DELETE: aiohttp
        answers those 405). Who acts is the ``X-Sentinel-Actor`` header, as for the API, else
        ``mcp``: the SDK runs the call in tasks started from this one, which see this context."""
        try:
            who = who_of(request, default=ACTOR, via="mcp")
            require_json_type(request)
            body = await read_raw(request, max_bytes=self.max_body)
            parse_json(body)  # the API's hygiene (SPEC §9): ApiError says what is wrong
        except ApiError as exc:
            return _refused(self._too_large() if exc.status == 413 else exc)
        identity = request.get(IDENTITY)
        who_token = _WHO.set(who)
        role_token = _ROLE.set(None if identity is None else identity.role)
        try:
            return await _asgi(self._manager.handle_request, request, body)
        finally:
            _ROLE.reset(role_token)
            _WHO.reset(who_token)


def _refused(exc: ApiError) -> web.Response:
    """A request refused before the SDK reads it: the API's status, and as body a JSON-RPC error
    without an id (what the MCP transport spec allows, and the only error an MCP client shows:
    the SDK's client reduces any other body to "Server returned an error response"), whose
    ``message`` is the API's and whose ``data`` is the API's error ``{code, message, details}``."""
    rpc_code = PARSE_ERROR if exc.code == "invalid_json" else INVALID_REQUEST
    api_error = error_body(exc.code, exc.message, exc.details)["error"]
    error = {"code": rpc_code, "message": exc.message, "data": api_error}
    return web.json_response({"jsonrpc": "2.0", "id": None, "error": error}, status=exc.status)


async def _asgi(app: Callable[..., Awaitable[None]], request: web.Request, body: bytes) -> web.StreamResponse:
    """Run an ASGI app for one aiohttp request whose ``body`` was read whole (the SDK reads it
    whole too); the response is streamed back as the app sends it."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode(),
        "query_string": request.query_string.encode(),
        "root_path": "",
        "headers": [(name.lower(), value) for name, value in request.raw_headers],
        "client": None,
        "server": None,
    }
    done = asyncio.Event()
    sent_body = False
    response: web.StreamResponse | None = None

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal response
        if message["type"] == "http.response.start":
            response = web.StreamResponse(status=message["status"])
            for key, value in message.get("headers", []):
                response.headers.add(key.decode("latin-1"), value.decode("latin-1"))
            await response.prepare(request)
        elif message["type"] == "http.response.body" and response is not None:
            await response.write(message.get("body", b""))
            if not message.get("more_body", False):
                await response.write_eof()

    try:
        await app(scope, receive, send)
    finally:
        done.set()
    if response is None:  # the app answered nothing: never expected from the SDK
        raise web.HTTPInternalServerError()
    return response


def add_mcp(app: web.Application, service: Service) -> dict[Endpoint, RouteHandler]:
    """Run the MCP endpoint for the life of ``app``; the handler of ``POST /mcp``."""
    endpoint = McpEndpoint(service)
    app.cleanup_ctx.append(endpoint.lifetime)
    return {MCP: endpoint.handle}
