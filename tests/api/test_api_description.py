"""One description of the API: the declared endpoints, the app's routes, the OpenAPI document and
the MCP tools say the same thing (every route declared and documented, every tool a documented
request whose arguments are the documented parameters and body)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aiohttp import web
from jsonschema import Draft202012Validator

from sentinel_hooks.api.app import build_app
from sentinel_hooks.api.mcp import HANDLERS, body_limits
from sentinel_hooks.api.routing import add_routes
from sentinel_hooks.api.security import needs_token
from sentinel_hooks.endpoints import ENDPOINTS
from sentinel_hooks.endpoints import watchers as watcher_endpoints
from sentinel_hooks.endpoints.schemas import without_null
from sentinel_hooks.mcp_server.tools import TOOLS, Tool
from sentinel_hooks.service import Service
from tests.api.test_openapi import app_routes, document, documented_routes
from tests.mcp_server.conftest import TOKEN
from tests.service.conftest import Starter
from tests.service.test_api import call

PLACEHOLDER = re.compile(r"\{[^}/]+\}")
__all__ = ["document"]  # the fixture: the document as a client sees it


@pytest.fixture
async def service(start_service: Starter) -> Service:
    return await start_service(watchers={})


def declared_routes() -> set[tuple[str, str]]:
    return {(e.method.lower(), e.path) for e in ENDPOINTS}


def operation(document: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    found: dict[str, Any] = document["paths"][path][method.lower()]
    return found


def resolved(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema``, or the component its ``$ref`` names."""
    if "$ref" not in schema:
        return schema
    found: dict[str, Any] = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return found


def expected_arguments(tool: Tool, document: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The arguments the document implies for ``tool``: each path id (named as the tool names it),
    each query parameter, and each field of the request body (or the whole body as one object),
    without null (an argument is given or left out); and which are required."""
    endpoint = tool.endpoint
    documented = operation(document, endpoint.method, endpoint.path)
    properties: dict[str, Any] = {}
    required: set[str] = set()
    for parameter in documented.get("parameters", []):
        if parameter["in"] == "header":
            continue  # who acts comes from the MCP transport, not from an argument
        name = (
            tool.ids.get(parameter["name"], parameter["name"])
            if parameter["in"] == "path"
            else parameter["name"]
        )
        properties[name] = {**parameter["schema"], "description": parameter["description"]}
        required |= {name} if parameter["required"] else set()
    if "requestBody" in documented:
        body = resolved(document, documented["requestBody"]["content"]["application/json"]["schema"])
        if tool.body_argument is not None:
            about = documented["requestBody"].get("description", "")
            properties[tool.body_argument] = {"type": "object", "description": about}
            required.add(tool.body_argument)
        else:
            properties |= {k: without_null(v) for k, v in body["properties"].items()}
            required |= set(body.get("required", []))
    return properties, required


def disagreements(tool: Tool, document: dict[str, Any], schema: dict[str, Any] | None = None) -> list[str]:
    """How ``tool``'s argument schema (or ``schema`` in its place) differs from what the document
    implies (empty: they agree)."""
    properties, required = expected_arguments(tool, document)
    text = json.dumps(schema or tool.schema).replace("#/$defs/", "#/components/schemas/")
    schema = json.loads(text)
    problems = [
        f"{name}: tool {schema['properties'].get(name)} != documented {properties.get(name)}"
        for name in sorted(set(properties) | set(schema["properties"]))
        if schema["properties"].get(name) != properties.get(name)
    ]
    if set(schema["required"]) != required:
        problems.append(f"required: tool {sorted(schema['required'])} != documented {sorted(required)}")
    components = document["components"]["schemas"]
    problems += [f"$defs.{n} differs" for n, d in schema.get("$defs", {}).items() if components.get(n) != d]
    return problems


def test_endpoints_are_declared_once() -> None:
    """No (method, path) and no operationId is declared twice."""
    assert len(ENDPOINTS) == len(declared_routes()) == len({e.name for e in ENDPOINTS})


async def test_the_app_routes_are_the_declared_endpoints(service: Service) -> None:
    """The app registers exactly the declared endpoints."""
    assert declared_routes() == app_routes(build_app(service))


def test_the_document_has_the_declared_endpoints(document: dict[str, Any]) -> None:
    """The document has an operation for exactly the declared endpoints, named as declared."""
    names = {(e.method.lower(), e.path): e.name for e in ENDPOINTS}
    documented = {(m, p): operation(document, m, p)["operationId"] for m, p in documented_routes(document)}
    assert names == documented


def test_an_endpoint_without_a_handler_stops_the_app() -> None:
    """Registering routes without a handler for one declared endpoint fails, naming it."""

    async def handler(request: web.Request) -> web.Response:
        return web.Response()

    handlers = {endpoint: handler for endpoint in ENDPOINTS if endpoint is not watcher_endpoints.FIRE}
    with pytest.raises(RuntimeError, match=r"POST /api/v1/watchers/\{id\}/fire"):
        add_routes(web.Application(), handlers)


def test_every_tool_stands_for_a_documented_request(document: dict[str, Any]) -> None:
    """Each tool's request is a declared endpoint's method and path, and the document has it."""
    routes = {(tool.endpoint.method.lower(), tool.endpoint.path) for tool in TOOLS}
    assert set() == routes - documented_routes(document)
    assert all(tool.endpoint in ENDPOINTS for tool in TOOLS)


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_a_tools_arguments_are_its_documented_parameters_and_body(
    tool: Tool, document: dict[str, Any]
) -> None:
    """A tool's argument schema is what the document says of its request's parameters and body."""
    assert [] == disagreements(tool, document)


def test_the_comparison_can_fail(document: dict[str, Any]) -> None:
    """A list_watchers schema written by hand, with a larger limit and no cursor, is found out."""
    tool = next(tool for tool in TOOLS if tool.name == "list_watchers")
    limit = {**tool.schema["properties"]["limit"], "maximum": 5000}
    hand_written = {**tool.schema, "properties": {"limit": limit}}
    assert ["cursor", "limit"] == [p.split(":")[0] for p in disagreements(tool, document, hand_written)]


async def test_every_tool_is_answered_in_process_within_its_routes_limit(service: Service) -> None:
    """/mcp answers each tool through its route's function, and caps each body as its route does."""
    assert [] == [tool.name for tool in TOOLS if tool.endpoint not in HANDLERS]
    assert {tool.name for tool in TOOLS if tool.endpoint.body is not None} == set(body_limits(service))


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: f"{e.method} {e.path}")
def test_the_security_middleware_asks_for_what_the_endpoint_declares(endpoint: Any) -> None:
    """The token check (by path) covers exactly the endpoints declared to need the bearer token,
    and /metrics only with server.metricsAuth."""
    path = PLACEHOLDER.sub("x", endpoint.path)
    assert (endpoint.auth == "bearer", endpoint.auth in ("bearer", "metrics")) == (
        needs_token(path, metrics_auth=False),
        needs_token(path, metrics_auth=True),
    )


async def test_a_refused_mcp_request_is_the_documented_json_rpc_error(
    start_service: Starter, document: dict[str, Any]
) -> None:
    """/mcp refuses a body the API would refuse with a JSON-RPC error, as its document says."""
    service = await start_service(watchers={}, server=f"{{host: 127.0.0.1, port: 0, apiToken: {TOKEN}}}")
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    status, body = await call(service, "POST", "/mcp", raw=b'{"a": 1, "a": 2}', headers=headers)
    schema = operation(document, "POST", "/mcp")["responses"]["default"]["content"]["application/json"][
        "schema"
    ]
    validator = Draft202012Validator({**schema, "components": document["components"]})
    assert (400, []) == (status, [e.message for e in validator.iter_errors(body)])
