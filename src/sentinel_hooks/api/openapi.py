"""The OpenAPI 3.1 document of the HTTP API (SPEC.md §9), served at ``GET /api/v1/openapi.json``.

Generated from the endpoint declarations (``sentinel_hooks.endpoints``): one operation per
endpoint, its parameters from its parameters models, its body and answers from their types'
JSON Schemas as pydantic writes them, the named ones collected under ``components/schemas``. What
is written here is OpenAPI itself, not schemas: the security schemes, which credentials each kind
of route takes, and the meaning of each error status. Tests check that the document is valid
OpenAPI 3.1, that its operations are exactly the app's routes and that real answers validate
against it; schemathesis checks the running service against it.
"""

from __future__ import annotations

import copy
from typing import Any

import sentinel_hooks
from sentinel_hooks.endpoints import ENDPOINTS
from sentinel_hooks.endpoints.base import JSON, Auth, Endpoint
from sentinel_hooks.endpoints.common import Error
from sentinel_hooks.endpoints.schemas import ID_SCHEMA, Schema, json_schemas, parameters
from sentinel_hooks.endpoints.service import OPENAPI_PATH

__all__ = ["OPENAPI_PATH", "build_openapi"]

SCHEMA_REF = "#/components/schemas/{model}"
RESPONSE_REF = "#/components/responses/{name}"

ERROR_ANSWERS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "invalid JSON, body, query parameter or cursor (`details` says which)"),
    401: (
        "Unauthorized",
        "missing or wrong bearer token (or, for /hooks/ingest, the watcher's HMAC signature, bearer "
        "token or basic credentials; for /hooks/slack/interactions, Slack's signature or its "
        "timestamp; which part was wrong is not said)",
    ),
    403: ("Forbidden", "`command` watchers cannot be created through the API"),
    404: ("NotFound", "no such watcher, callback, session, inbox item, silence or file"),
    409: (
        "Conflict",
        "the current state does not allow this change (the message names it); for /hooks/sentinel, "
        "`callback_exists` with `details: {callbackId, state}`: the callbackId is taken",
    ),
    413: ("PayloadTooLarge", "the body is over the route's limit"),
    415: (
        "UnsupportedMediaType",
        "the body is not labelled `application/json` (or `+json`; /hooks/slack/interactions: a form)",
    ),
    421: (
        "MisdirectedRequest",
        "no `server.apiToken` and the Host is not `localhost`, a 127.0.0.0/8 address or `[::1]`",
    ),
    503: ("ServiceUnavailable", "the store does not answer or the watchers are still loading"),
}

SECURITY_SCHEMES: Schema = {
    "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "`server.apiToken`, needed by /api/*, /hooks/sentinel, /mcp (and /metrics with "
        "`server.metricsAuth`); the scheme is case-insensitive. /healthz, /readyz and the web page "
        "(/, /static/*) need no token; /hooks/ingest uses the watcher's own credentials instead. A "
        "service without a token serves a document without this scheme, and answers only Host "
        "`localhost`, a 127.0.0.0/8 address or `[::1]` (421 otherwise).",
    },
    "ingestSignature": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Sentinel-Signature",
        "description": "`sha256=<hex HMAC-SHA256 of the raw body>` keyed with the webhook watcher's "
        "`secret` (header name: its `signatureHeader`); needed only when the watcher has a secret.",
    },
    "ingestBearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "a webhook watcher's `auth: {bearerToken}` (not the API token); needed only "
        "by watchers with that auth.",
    },
    "ingestBasic": {
        "type": "http",
        "scheme": "basic",
        "description": "a webhook watcher's `auth: {basic: {username, password}}`; needed only by "
        "watchers with that auth.",
    },
    "slackSignature": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Slack-Signature",
        "description": "`v0=<hex HMAC-SHA256 of v0:{X-Slack-Request-Timestamp}:{raw body}>` keyed with "
        "`slack.signingSecret`, the timestamp within 5 minutes (what Slack sends; SPEC §21).",
    },
}

SECURITY: dict[Auth, list[dict[str, list[str]]]] = {
    "bearer": [{"bearerAuth": []}],
    "open": [],
    "page": [],
    "metrics": [{}, {"bearerAuth": []}],
    "hmac": [{}, {"ingestSignature": []}, {"ingestBearer": []}, {"ingestBasic": []}],
    "slack": [{"slackSignature": []}],
}


def _key(endpoint: Endpoint, part: str) -> str:
    return f"{endpoint.name} {part}"


def _schemas() -> tuple[dict[str, Schema], dict[str, Schema]]:
    """Every body's (validation) and answer's (serialization) schema, keyed by ``_key``, and the
    named schemas they refer to (``components/schemas``)."""
    inputs: list[tuple[str, Any, Any]] = [("error", "serialization", Error)]
    for endpoint in ENDPOINTS:
        if endpoint.body is not None:
            inputs.append((_key(endpoint, "body"), "validation", endpoint.body.model))
        inputs += [
            (_key(endpoint, str(answer.status)), "serialization", answer.model)
            for answer in endpoint.answers
            if answer.model is not None
        ]
        if endpoint.protocol_errors is not None:
            inputs.append((_key(endpoint, "default"), "serialization", endpoint.protocol_errors.model))
    return json_schemas(inputs, SCHEMA_REF)


def _parameters(endpoint: Endpoint) -> list[Schema]:
    """The path ids, then the query and header parameters, of ``endpoint``; an optional query
    parameter may be given empty, which is the same as leaving it out."""
    found: list[Schema] = [
        {"name": i.name, "in": "path", "required": True, "schema": ID_SCHEMA, "description": i.about}
        for i in endpoint.ids
    ]
    for where, model in (("query", endpoint.query), ("header", endpoint.headers)):
        for p in parameters(model) if model is not None else ():
            parameter = {"name": p.name, "in": where, "required": p.required, "schema": p.schema}
            if where == "query" and not p.required:
                parameter["allowEmptyValue"] = True  # the routes read ?limit= as no limit given
            found.append({**parameter, "description": p.about})
    return found


def _responses(endpoint: Endpoint, tops: dict[str, Schema]) -> Schema:
    """The endpoint's answers, then its error answers (references to ``components/responses``)."""
    responses: Schema = {}
    for answer in endpoint.answers:
        response: Schema = {"description": answer.about}
        if answer.model is not None:
            schema = tops[_key(endpoint, str(answer.status))]
            response["content"] = {media: {"schema": schema} for media in answer.media}
        responses[str(answer.status)] = response
    for code in endpoint.error_statuses():
        responses[str(code)] = {"$ref": RESPONSE_REF.format(name=ERROR_ANSWERS[code][0])}
    if endpoint.protocol_errors is not None:
        schema = tops[_key(endpoint, "default")]
        responses["default"] = {
            "description": endpoint.protocol_errors.about,
            "content": {JSON: {"schema": schema}},
        }
    return responses


def _operation(endpoint: Endpoint, tops: dict[str, Schema]) -> Schema:
    operation: Schema = {
        "operationId": endpoint.name,
        "summary": endpoint.summary,
        "tags": [endpoint.tag],
        "security": SECURITY[endpoint.auth],
        "responses": _responses(endpoint, tops),
    }
    found = _parameters(endpoint)
    if found:
        operation["parameters"] = found
    body = endpoint.body
    if body is not None:
        content = {media: {"schema": tops[_key(endpoint, "body")]} for media in body.media}
        operation["requestBody"] = {"required": body.required, "content": content}
        if body.about:
            operation["requestBody"]["description"] = body.about
    return operation


def _without_bearer(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` for a service without ``server.apiToken``: nothing asks for the bearer token
    (and no answer is a 401 because of it), so clients and fuzzers do not send one."""
    document["security"] = []
    del document["components"]["securitySchemes"]["bearerAuth"]
    for item in document["paths"].values():
        for operation in item.values():
            kept = [need for need in operation["security"] if "bearerAuth" not in need]
            if kept != operation["security"]:
                operation["responses"].pop("401", None)
            operation["security"] = [] if kept == [{}] else kept
    return document


def build_openapi(*, bearer: bool = True) -> dict[str, Any]:
    """The whole OpenAPI 3.1 document (a fresh dict on each call, safe to change); ``bearer``:
    whether the service has ``server.apiToken`` (the API routes then need it)."""
    tops, schemas = _schemas()
    paths: dict[str, Schema] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(endpoint, tops)
    content = {JSON: {"schema": tops["error"]}}
    document = {
        "openapi": "3.1.0",
        "info": {
            "title": "Sentinel API",
            "version": sentinel_hooks.__version__,
            "summary": "Watchers, callbacks, the operator inbox and approvals of a running Sentinel.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "tags": [{"name": tag} for tag in dict.fromkeys(e.tag for e in ENDPOINTS)],
        "security": SECURITY["bearer"],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": {
                name: {"description": about, "content": content} for name, about in ERROR_ANSWERS.values()
            },
            "securitySchemes": SECURITY_SCHEMES,
        },
    }
    result = copy.deepcopy(document)
    return result if bearer else _without_bearer(result)
