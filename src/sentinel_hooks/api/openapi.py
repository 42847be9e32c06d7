"""The OpenAPI 3.1 document of the HTTP API (SPEC.md §9), served at ``GET /api/v1/openapi.json``.

One operation per route of the app, with its parameters, body, answer and error answers, so
clients can be generated and the API reviewed in one file. Tests check that the document is
valid OpenAPI 3.1, that its paths are exactly the app's routes (it cannot drift), and that real
answers validate against it. Schemas, parameters and the operation builder live in
:mod:`sentinel_hooks.api.openapi_schemas`.
"""

from __future__ import annotations

import copy
from typing import Any, get_args

import sentinel_hooks
from sentinel_hooks.api.openapi_schemas import (
    ACTOR,
    CURSOR,
    SECURITY,
    SECURITY_SCHEMES,
    STRING,
    Schema,
    answer,
    api_schemas,
    error_responses,
    limit,
    model_schemas,
    operation,
    path_param,
    query,
    ref,
)
from sentinel_hooks.api.query import INT64_MAX
from sentinel_hooks.inbox.transitions import INBOX_KINDS, INBOX_STATUSES
from sentinel_hooks.store.records import ContractState
from sentinel_hooks.store.silences import SILENCE_STATES

OPENAPI_PATH = "/api/v1/openapi.json"


def _health_paths() -> dict[str, Schema]:
    metrics = answer(200, "Prometheus text format", STRING, "text/plain")
    document = answer(200, "this document", {"type": "object"})
    return {
        "/healthz": {
            "get": operation("healthz", "liveness", "health", answer(200, "up", ref("Health")), auth="open")
        },
        "/readyz": {
            "get": operation(
                "readyz",
                "store reachable, watchers loaded",
                "health",
                answer(200, "ready", ref("Ready")),
                auth="open",
                errors=(503,),
            )
        },
        "/metrics": {"get": operation("metrics", "Prometheus metrics", "health", metrics, auth="metrics")},
        OPENAPI_PATH: {"get": operation("openapi", "this OpenAPI 3.1 document", "meta", document)},
    }


def _web_paths() -> dict[str, Schema]:
    page = answer(200, "the HTML shell; its script reads everything through the API", STRING, "text/html")
    asset = {
        "description": "the page's script or stylesheet",
        "content": {media: {"schema": STRING} for media in ("text/javascript", "text/css")},
    }
    return {
        "/": {"get": operation("webPage", "the operator's web page", "web", page, auth="page")},
        "/static/{name}": {
            "parameters": [path_param("name", "app.js or app.css")],
            "get": operation(
                "webAsset", "the web page's assets", "web", {"200": asset}, auth="page", errors=(404,)
            ),
        },
    }


def _watcher_paths() -> dict[str, Schema]:
    watcher_id = path_param("id", "the watcher's id")
    detail = ref("WatcherDetail")
    return {
        "/api/v1/watchers": {
            "get": operation(
                "listWatchers",
                "watchers and their status, by id",
                "watchers",
                answer(200, "a page of watchers", ref("WatcherList")),
                parameters=(limit(1000, 100), CURSOR),
                errors=(400,),
            ),
            "post": operation(
                "createWatcher",
                "create a watcher (same schema and checks as a file)",
                "watchers",
                answer(201, "created", detail),
                body=ref("WatcherDefinition"),
                errors=(403, 409),
            ),
        },
        "/api/v1/watchers/{id}": {
            "parameters": [watcher_id],
            "get": operation(
                "showWatcher",
                "a watcher's definition (secrets masked), status and runtime",
                "watchers",
                answer(200, "the watcher", detail),
                errors=(404,),
            ),
            "patch": operation(
                "patchWatcher",
                "enable or disable (kept across restarts)",
                "watchers",
                answer(200, "the watcher", detail),
                body=ref("EnabledBody"),
                errors=(404,),
            ),
            "delete": operation(
                "deleteWatcher",
                "delete a watcher created through the API",
                "watchers",
                answer(204, "deleted"),
                errors=(404, 409),
            ),
        },
        "/api/v1/watchers/{id}/fire": {
            "parameters": [watcher_id],
            "post": operation(
                "fireWatcher",
                "fire now (skips conditions, lifecycle, cooldown, fireOnce; not dedupe)",
                "watchers",
                answer(202, "accepted", ref("CallbackAccepted")),
                body=ref("FireBody"),
                optional_body=True,
                errors=(404,),
            ),
        },
        "/hooks/ingest/{id}": {
            "parameters": [path_param("id", "the id of a `webhook` watcher")],
            "post": operation(
                "ingest",
                "push an event to a `webhook` watcher (an Alertmanager notification for `format: "
                "alertmanager`)",
                "hooks",
                answer(202, "accepted (and evaluated)", ref("IngestAnswer")),
                auth="hmac",
                body={
                    "description": "any JSON value; for `format: alertmanager` an Alertmanager or "
                    "Grafana alerting webhook body (400 `invalid_alerts` otherwise)"
                },
                errors=(404, 409),
            ),
        },
    }


def _callback_paths() -> dict[str, Schema]:
    states = {"type": "string", "enum": list(get_args(ContractState))}
    return {
        "/hooks/sentinel": {
            "post": operation(
                "postCallback",
                "a callback envelope from another system (at most 64 KiB)",
                "hooks",
                answer(202, "accepted", ref("CallbackAccepted")),
                body=ref("Envelope"),
                errors=(409,),
            )
        },
        "/api/v1/callbacks": {
            "get": operation(
                "listCallbacks",
                "callbacks (contracts), newest first",
                "callbacks",
                answer(200, "a page of contracts", ref("CallbackList")),
                parameters=(
                    query("watcherId", STRING, "only this watcher's callbacks"),
                    query("state", states, "only contracts in this state"),
                    limit(500, 50),
                    CURSOR,
                ),
                errors=(400,),
            )
        },
        "/api/v1/callbacks/{id}": {
            "parameters": [path_param("id", "the callbackId")],
            "get": operation(
                "showCallback",
                "a contract, its envelope, transcript entries and deliveries",
                "callbacks",
                answer(200, "the callback", ref("CallbackDetail")),
                errors=(404,),
            ),
        },
        "/api/v1/sessions/{key}": {
            "parameters": [path_param("key", "the session key")],
            "get": operation(
                "showSession",
                "a hook session's transcript, in order",
                "callbacks",
                answer(200, "the transcript", ref("SessionTranscript")),
                parameters=(
                    limit(500, 500),
                    query(
                        "afterSeq",
                        {"type": "integer", "minimum": 0, "maximum": INT64_MAX, "default": 0},
                        "entries after this seq",
                    ),
                ),
                errors=(400, 404),
            ),
        },
    }


def _inbox_paths() -> dict[str, Schema]:
    item_id = path_param("id", "the inbox item's id")
    paths: dict[str, Schema] = {
        "/api/v1/inbox": {
            "get": operation(
                "listInbox",
                "inbox items, newest first",
                "inbox",
                answer(200, "a page of items", ref("InboxList")),
                parameters=(
                    query("status", {"type": "string", "enum": list(INBOX_STATUSES)}, "only this status"),
                    query("kind", {"type": "string", "enum": list(INBOX_KINDS)}, "only this kind"),
                    limit(500, 50),
                    CURSOR,
                ),
                errors=(400,),
            )
        },
        "/api/v1/inbox/{id}": {
            "parameters": [item_id],
            "get": operation(
                "showInboxItem",
                "an item and its history",
                "inbox",
                answer(200, "the item", ref("InboxItemDetail")),
                errors=(404,),
            ),
        },
    }
    paths["/api/v1/inbox/{id}/ack"] = {
        "parameters": [item_id],
        "post": operation(
            "ackInboxItem",
            "ack (open → acked); with silenceForMs, also silence the item's watcher",
            "inbox",
            answer(200, "the changed item (and the silence)", ref("InboxItemAnswer")),
            body=ref("AckBody"),
            optional_body=True,
            parameters=(ACTOR,),
            errors=(404, 409),
        ),
    }
    moves = [("inbox", "resolve", "open or acked → resolved")]
    moves += [
        ("approvals", "approve", "open approval → approved"),
        ("approvals", "deny", "open approval → denied"),
    ]
    for area, action, move in moves:
        paths[f"/api/v1/{area}/{{id}}/{action}"] = {
            "parameters": [item_id],
            "post": operation(
                f"{action}InboxItem",
                f"{action} ({move})",
                "inbox",
                answer(200, "the changed item", ref("InboxItemAnswer")),
                body=ref("NoteBody"),
                optional_body=True,
                parameters=(ACTOR,),
                errors=(404, 409),
            ),
        }
    return paths


def _silence_paths() -> dict[str, Schema]:
    states = {"type": "string", "enum": list(SILENCE_STATES)}
    silence = answer(200, "the silence", ref("SilenceAnswer"))
    return {
        "/api/v1/silences": {
            "get": operation(
                "listSilences",
                "silences, newest first",
                "silences",
                answer(200, "a page of silences", ref("SilenceList")),
                parameters=(
                    query("state", states, "only silences in this state now"),
                    limit(500, 50),
                    CURSOR,
                ),
                errors=(400,),
            ),
            "post": operation(
                "createSilence",
                "silence matching fires for a while (applies at once here, within a second elsewhere)",
                "silences",
                answer(201, "created", ref("SilenceAnswer")),
                body=ref("SilenceBody"),
                parameters=(ACTOR,),
            ),
        },
        "/api/v1/silences/{id}": {
            "parameters": [path_param("id", "the silence's id")],
            "get": operation("showSilence", "a silence", "silences", silence, errors=(404,)),
            "delete": operation("expireSilence", "expire a silence now", "silences", silence, errors=(404,)),
        },
        "/api/v1/status": {
            "get": operation(
                "status", "the service at a glance", "meta", answer(200, "the status", ref("Status"))
            )
        },
    }


def _mcp_paths() -> dict[str, Schema]:
    message = {"type": "object", "description": "a JSON-RPC 2.0 message of the Model Context Protocol"}
    answers = {
        **answer(200, "the JSON-RPC answer (one JSON body: the endpoint is stateless)", message),
        **answer(202, "a notification or response from the client, accepted"),
    }
    return {
        "/mcp": {
            "post": operation(
                "mcp",
                "Sentinel's MCP tools over streamable HTTP (docs/mcp.md)",
                "mcp",
                answers,
                body=message,
            )
        }
    }


def _without_bearer(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` for a service without ``server.apiToken``: nothing asks for the bearer token
    (and no answer is a 401 because of it), so clients and fuzzers do not send one."""
    document["security"] = []
    del document["components"]["securitySchemes"]["bearerAuth"]
    for item in document["paths"].values():
        for name, op in item.items():
            if name == "parameters":
                continue
            kept = [need for need in op["security"] if "bearerAuth" not in need]
            if kept != op["security"]:
                op["responses"].pop("401", None)
            op["security"] = [] if kept == [{}] else kept
    return document


def build_openapi(*, bearer: bool = True) -> dict[str, Any]:
    """The whole OpenAPI 3.1 document (a fresh dict on each call, safe to change); ``bearer``:
    whether the service has ``server.apiToken`` (the API routes then need it)."""
    document = {
        "openapi": "3.1.0",
        "info": {
            "title": "Sentinel API",
            "version": sentinel_hooks.__version__,
            "summary": "Watchers, callbacks, the operator inbox and approvals of a running Sentinel.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "tags": [
            {"name": name}
            for name in (
                "health",
                "meta",
                "web",
                "watchers",
                "callbacks",
                "inbox",
                "silences",
                "hooks",
                "mcp",
            )
        ],
        "security": SECURITY["bearer"],
        "paths": {
            **_health_paths(),
            **_web_paths(),
            **_watcher_paths(),
            **_callback_paths(),
            **_inbox_paths(),
            **_silence_paths(),
            **_mcp_paths(),
        },
        "components": {
            "schemas": {**model_schemas(), **api_schemas()},
            "responses": error_responses(),
            "securitySchemes": SECURITY_SCHEMES,
        },
    }
    result = copy.deepcopy(document)
    return result if bearer else _without_bearer(result)
