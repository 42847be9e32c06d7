"""The OpenAPI document: valid 3.1, exactly the app's routes, served, and true to real answers."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

import sentinel_hooks
from sentinel_hooks.api.app import build_app
from sentinel_hooks.api.openapi import OPENAPI_PATH, build_openapi
from sentinel_hooks.service import Service
from tests.service.conftest import Starter
from tests.service.test_api import call

ROOT = Path(__file__).resolve().parents[2]
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
WEBHOOK = """\
id: hook
strategy: webhook
conditions: [{path: level, op: eq, value: crit}]
deliveryTargets: [console]
"""


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    """The document as a client sees it (after a JSON round trip)."""
    result: dict[str, Any] = json.loads(json.dumps(build_openapi()))
    return result


@pytest.fixture
async def service(start_service: Starter) -> Service:
    """A running service with one webhook watcher (it never polls)."""
    return await start_service(watchers={"hook.yaml": WEBHOOK})


def app_routes(app: web.Application) -> set[tuple[str, str]]:
    """(method, path template) of every route, without HEAD twins and static directories; a
    route of every method (``*``, heartbeat pings) as the POST its document shows."""
    return {
        (method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
        and route.method != "HEAD"
        and not isinstance(route.resource, web.StaticResource)
        for method in (("post",) if route.method == "*" else (route.method.lower(),))
    }


def documented_routes(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method, path) for path, item in document["paths"].items() for method in item if method in METHODS
    }


def answer_schema(document: dict[str, Any], path: str, method: str, status: int) -> dict[str, Any]:
    """The JSON schema the document gives for one answer (following a components/responses $ref)."""
    response = document["paths"][path][method]["responses"][str(status)]
    if "$ref" in response:
        response = document["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    schema: dict[str, Any] = response["content"]["application/json"]["schema"]
    return schema


def violations(document: dict[str, Any], path: str, method: str, status: int, body: Any) -> list[str]:
    """Why ``body`` does not match the documented answer (empty: it matches)."""
    schema = {**answer_schema(document, path, method, status), "components": document["components"]}
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]


def test_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    """openapi-spec-validator accepts the document as OpenAPI 3.1."""
    validate(document)
    assert "3.1.0" == document["openapi"]


def test_info_version_is_the_package_version(document: dict[str, Any]) -> None:
    """info.version follows the package version (and pyproject's)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert (sentinel_hooks.__version__, project["version"]) == (document["info"]["version"],) * 2


def test_error_answers_use_the_error_shape(document: dict[str, Any]) -> None:
    """Every documented 4xx answer is the {"error": {code, message, details}} shape."""
    refs = {
        json.dumps(answer_schema(document, path, method, int(status)))
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
        for status in operation["responses"]
        if status.startswith("4")
    }
    assert {json.dumps({"$ref": "#/components/schemas/Error"})} == refs


def test_schemas_are_collected_under_components(document: dict[str, Any]) -> None:
    """No $ref points outside #/components/schemas/, and every one resolves."""
    text = json.dumps(document)
    schemas = document["components"]["schemas"]
    targets = {part.split('"', 1)[0] for part in text.split('"$ref": "')[1:]}
    dangling = {
        t
        for t in targets
        if not t.startswith("#/components/responses/")
        and t.removeprefix("#/components/schemas/") not in schemas
    }
    assert set() == dangling
    assert {"Contract", "InboxItem", "InboxHistoryEntry", "Delivery", "TranscriptEntry", "Envelope"} <= set(
        schemas
    )


INGEST_SECURITY = [{}, {"ingestSignature": []}, {"ingestBearer": []}, {"ingestBasic": []}]


def test_open_routes_need_no_token_and_ingest_uses_hmac(document: dict[str, Any]) -> None:
    """Health routes are open, /hooks/ingest takes the watcher's credentials, the API the bearer token."""
    paths = document["paths"]
    assert [] == paths["/healthz"]["get"]["security"]
    assert [] == paths["/readyz"]["get"]["security"]
    assert INGEST_SECURITY == paths["/hooks/ingest/{id}"]["post"]["security"]
    assert [{"bearerAuth": []}] == paths["/api/v1/watchers"]["get"]["security"]


async def test_every_app_route_is_documented(service: Service, document: dict[str, Any]) -> None:
    """Each route the service registers appears in the document with its method."""
    assert set() == app_routes(build_app(service)) - documented_routes(document)


async def test_every_documented_route_exists(service: Service, document: dict[str, Any]) -> None:
    """Each (method, path) of the document is a route of the service."""
    assert set() == documented_routes(document) - app_routes(build_app(service))


async def test_document_is_served(service: Service) -> None:
    """GET /api/v1/openapi.json answers the document (without a token: the bearer-free one) as JSON."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(service.url + OPENAPI_PATH) as response,
    ):
        served = (response.status, response.content_type, await response.json())
    expected = json.loads(json.dumps(build_openapi(bearer=False)))
    assert (200, "application/json", expected) == served


async def test_document_needs_the_token_when_one_is_set(start_service: Starter) -> None:
    """With server.apiToken the document is 401 without the bearer token, 200 with it."""
    service = await start_service(
        watchers={}, server="{host: 127.0.0.1, port: 0, apiToken: tok-abcdef-0123456}"
    )
    without, _ = await call(service, "GET", OPENAPI_PATH)
    with_token, _ = await call(
        service, "GET", OPENAPI_PATH, headers={"Authorization": "Bearer tok-abcdef-0123456"}
    )
    assert (401, 200) == (without, with_token)


async def test_watcher_list_matches_its_schema(service: Service, document: dict[str, Any]) -> None:
    """GET /api/v1/watchers validates against WatcherList."""
    status, body = await call(service, "GET", "/api/v1/watchers")
    assert (200, []) == (status, violations(document, "/api/v1/watchers", "get", 200, body))


async def test_watcher_show_matches_its_schema(service: Service, document: dict[str, Any]) -> None:
    """GET /api/v1/watchers/{id} validates against WatcherDetail."""
    status, body = await call(service, "GET", "/api/v1/watchers/hook")
    assert (200, []) == (status, violations(document, "/api/v1/watchers/{id}", "get", 200, body))


async def test_a_fire_answer_and_its_callback_match_their_schemas(
    service: Service, document: dict[str, Any]
) -> None:
    """A manual fire's 202 answer and GET /api/v1/callbacks/{id} validate against the document."""
    status, fired = await call(
        service, "POST", "/api/v1/watchers/hook/fire", body={"payload": {"level": "crit"}}
    )
    assert (202, []) == (status, violations(document, "/api/v1/watchers/{id}/fire", "post", 202, fired))
    status, shown = await call(service, "GET", f"/api/v1/callbacks/{fired['callbackId']}")
    problems = violations(document, "/api/v1/callbacks/{id}", "get", 200, shown)
    assert (200, fired["callbackId"], []) == (status, shown["envelope"]["callbackId"], problems)
    status, listed = await call(service, "GET", "/api/v1/callbacks")
    assert (200, []) == (status, violations(document, "/api/v1/callbacks", "get", 200, listed))


async def test_inbox_answers_match_their_schemas(service: Service, document: dict[str, Any]) -> None:
    """An inbox item as listed, shown and acked validates against the document."""
    item = await service.inbox.create(
        "escalation", severity="warning", reason="price fell", watcher_id="hook"
    )
    listed = await call(service, "GET", "/api/v1/inbox")
    shown = await call(service, "GET", f"/api/v1/inbox/{item.id}")
    acked = await call(
        service,
        "POST",
        f"/api/v1/inbox/{item.id}/ack",
        body={"note": "looking"},
        headers={"X-Sentinel-Actor": "me"},
    )
    problems = [
        *violations(document, "/api/v1/inbox", "get", 200, listed[1]),
        *violations(document, "/api/v1/inbox/{id}", "get", 200, shown[1]),
        *violations(document, "/api/v1/inbox/{id}/ack", "post", 200, acked[1]),
    ]
    assert ((200, 200, 200), []) == ((listed[0], shown[0], acked[0]), problems)


@pytest.mark.parametrize(
    ("method", "path", "route", "sent", "expected"),
    [
        ("GET", "/api/v1/watchers/nope", "/api/v1/watchers/{id}", None, 404),
        ("GET", "/api/v1/inbox?status=bogus", "/api/v1/inbox", None, 400),
        ("POST", "/hooks/sentinel", "/hooks/sentinel", {"Content-Type": "text/plain"}, 415),
    ],
)
async def test_error_bodies_match_the_error_schema(
    service: Service,
    document: dict[str, Any],
    method: str,
    path: str,
    route: str,
    sent: dict[str, str] | None,
    expected: int,
) -> None:
    """Real 404, 400 and 415 answers are the documented Error shape."""
    status, body = await call(service, method, path, raw=b"{}" if sent else None, headers=sent)
    assert (expected, []) == (status, violations(document, route, method.lower(), expected, body))


def test_a_wrong_answer_fails_validation(document: dict[str, Any]) -> None:
    """The checks can fail: a watcher page without nextCursor and with an extra key is refused."""
    problems = violations(document, "/api/v1/watchers", "get", 200, {"items": [], "extra": 1})
    assert 2 == len(problems)


async def test_without_a_token_the_document_claims_no_bearer_auth(service: Service) -> None:
    """With no server.apiToken the served document needs no token anywhere (and stays valid)."""
    status, served = await call(service, "GET", OPENAPI_PATH)
    validate(served)
    claims = [
        (method, path)
        for path, item in served["paths"].items()
        for method, operation in item.items()
        if method in METHODS
        and ("bearerAuth" in json.dumps(operation["security"]) or "401" in operation["responses"])
        and path not in ("/hooks/ingest/{id}", "/hooks/slack/interactions")  # their own credentials
    ]
    assert (200, [], [], False) == (
        status,
        served["security"],
        claims,
        "bearerAuth" in served["components"]["securitySchemes"],
    )
    assert INGEST_SECURITY == served["paths"]["/hooks/ingest/{id}"]["post"]["security"]


async def test_with_a_token_the_document_claims_bearer_auth(start_service: Starter) -> None:
    """With server.apiToken the served document asks for the bearer token on the API routes."""
    token = "tok-0123456789abcdef"
    service = await start_service(watchers={}, server=f"{{host: 127.0.0.1, port: 0, apiToken: {token}}}")
    _, served = await call(service, "GET", OPENAPI_PATH, headers={"Authorization": f"Bearer {token}"})
    assert [{"bearerAuth": []}] == served["paths"]["/api/v1/watchers"]["get"]["security"]
