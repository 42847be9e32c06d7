"""The building blocks of the OpenAPI document: schemas, parameters, security, operations.

Records, the callback envelope and watcher definitions reuse their pydantic models' JSON
Schemas (camelCase, ``by_alias``), generated with ``$ref``s that already point into
``#/components/schemas/``; the small wrappers the routes build by hand (pages, answers, the
watcher status, the error shape) are written out here, with the shared parameters and the
security schemes. :mod:`sentinel_hooks.api.openapi` assembles the paths.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import JsonSchemaMode

from sentinel_hooks.api.routes.inbox import MAX_ACTOR_CHARS
from sentinel_hooks.config.watcher import WATCHER_ADAPTER
from sentinel_hooks.core.conditions import Op
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.silences import MATCHER_FIELDS
from sentinel_hooks.inbox.transitions import MAX_NOTE_CHARS
from sentinel_hooks.store.records import (
    Contract,
    Delivery,
    InboxHistoryEntry,
    InboxItem,
    TranscriptEntry,
)
from sentinel_hooks.store.silences import MAX_COMMENT_CHARS, MAX_MATCHERS, SILENCE_STATES
from sentinel_hooks.watchers.state import StatusState

Schema = dict[str, Any]

SCHEMA_REF = "#/components/schemas/{model}"
RESPONSE_REF = "#/components/responses/{name}"
RECORDS: tuple[type[BaseModel], ...] = (Contract, InboxItem, InboxHistoryEntry, Delivery, TranscriptEntry)

STRING: Schema = {"type": "string"}
BOOLEAN: Schema = {"type": "boolean"}
COUNT: Schema = {"type": "integer", "minimum": 0}
TIME: Schema = {"type": "string", "format": "date-time", "description": "ISO 8601 UTC, milliseconds, Z"}
NULLABLE_TIME: Schema = {"type": ["string", "null"], "format": "date-time"}
NULLABLE_STRING: Schema = {"type": ["string", "null"]}
USD: Schema = {"type": "number", "minimum": 0, "description": "US dollars"}
USAGE_FIELDS: dict[str, Schema] = {"inputTokens": COUNT, "outputTokens": COUNT, "costUsd": USD}
DAY_LIMIT: Schema = {
    "type": "object",
    "properties": {"tokens": {"type": ["integer", "null"]}, "usd": {"type": ["number", "null"]}},
    "required": ["tokens", "usd"],
    "additionalProperties": False,
    "description": "the day budget (null: no limit)",
}

ERROR_ANSWERS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "invalid JSON, body, query parameter or cursor (`details` says which)"),
    401: (
        "Unauthorized",
        "missing or wrong bearer token (or, for /hooks/ingest, the watcher's HMAC signature, bearer "
        "token or basic credentials; which part was wrong is not said)",
    ),
    403: ("Forbidden", "`command` watchers cannot be created through the API"),
    404: ("NotFound", "no such watcher, callback, session, inbox item or silence"),
    409: (
        "Conflict",
        "the current state does not allow this change (the message names it); for /hooks/sentinel, "
        "`callback_exists` with `details: {callbackId, state}`: the callbackId is taken",
    ),
    413: ("PayloadTooLarge", "the body is over the route's limit"),
    415: ("UnsupportedMediaType", "the body is not labelled `application/json` (or `+json`)"),
    421: (
        "MisdirectedRequest",
        "no `server.apiToken` and the Host is not `localhost`, a 127.0.0.0/8 address or `[::1]`",
    ),
    503: ("ServiceUnavailable", "the store does not answer or the watchers are still loading"),
}


def ref(name: str) -> Schema:
    """A ``$ref`` to ``#/components/schemas/{name}``."""
    return {"$ref": SCHEMA_REF.format(model=name)}


def array_of(item: Schema) -> Schema:
    """A JSON array of ``item``."""
    return {"type": "array", "items": item}


def closed_object(
    properties: dict[str, Schema], *, optional: tuple[str, ...] = (), about: str = ""
) -> Schema:
    """An object with exactly ``properties`` (all required but ``optional``), no other keys."""
    schema: Schema = {
        "type": "object",
        "properties": properties,
        "required": [name for name in properties if name not in optional],
        "additionalProperties": False,
    }
    if about:
        schema["description"] = about
    return schema


def page_of(item: Schema, about: str) -> Schema:
    """``{"items": [item…], "nextCursor"}``: pass ``nextCursor`` back as ``cursor`` (null: no more)."""
    return closed_object({"items": array_of(item), "nextCursor": NULLABLE_STRING}, about=about)


def model_schemas() -> dict[str, Schema]:
    """The pydantic models' schemas: records (as dumped), the envelope and watcher definitions."""
    inputs: list[tuple[str, JsonSchemaMode, TypeAdapter[Any]]] = [
        ("WatcherDefinition", "validation", WATCHER_ADAPTER),
        ("Envelope", "validation", TypeAdapter(Envelope)),
    ]
    inputs += [(model.__name__, "serialization", TypeAdapter(model)) for model in RECORDS]
    tops, definitions = TypeAdapter.json_schemas(inputs, by_alias=True, ref_template=SCHEMA_REF)
    schemas: dict[str, Schema] = dict(definitions.get("$defs", {}))
    item = schemas["InboxItem"]
    item["properties"]["escalation"] = {
        "anyOf": [ref("EscalationStatus"), {"type": "null"}],
        "description": "where the item's escalation chain is (SPEC §15); null when it has none",
    }
    item["required"] = [*item.get("required", []), "escalation"]
    watcher = dict(tops[("WatcherDefinition", "validation")])
    watcher["description"] = "A watcher, as in a watcher file (one of the strategies)."
    schemas["WatcherDefinition"] = watcher
    return schemas


def _watcher_schemas() -> dict[str, Schema]:
    status = closed_object(
        {
            "state": {"enum": list(get_args(StatusState))},
            "firing": BOOLEAN,
            "lastError": NULLABLE_STRING,
            "consecutiveFailures": COUNT,
            "lastCheckAt": NULLABLE_TIME,
            "nextCheckAt": NULLABLE_TIME,
            "fires": {**COUNT, "description": "accepted fires, manual ones included, not deduped ones"},
            "silencedBy": {
                **NULLABLE_STRING,
                "description": "the silence id or maintenance window name muting this watcher's fires now",
            },
        }
    )
    summary = closed_object(
        {
            "id": STRING,
            "enabled": BOOLEAN,
            "strategy": STRING,
            "tags": array_of(STRING),
            "status": ref("WatcherStatus"),
        }
    )
    runtime = closed_object(
        {
            "source": {**STRING, "description": "the watcher file, or api:{id} for one created here"},
            "lastEventAt": NULLABLE_TIME,
            "reconnects": COUNT,
            "lastReconnectGapMs": {"type": ["integer", "null"], "minimum": 0},
        }
    )
    definition = {
        "type": "object",
        "description": "the definition as written (see WatcherDefinition), secrets masked",
    }
    return {
        "WatcherStatus": status,
        "WatcherSummary": summary,
        "WatcherList": page_of(ref("WatcherSummary"), "watchers by id"),
        "WatcherRuntime": runtime,
        "WatcherDetail": closed_object(
            {"watcher": definition, "status": ref("WatcherStatus"), "runtime": ref("WatcherRuntime")}
        ),
        "EnabledBody": closed_object({"enabled": BOOLEAN}),
        "FireBody": closed_object(
            {"payload": {"description": "the observed value the fire carries (default {})"}},
            optional=("payload",),
        ),
        "IngestAnswer": closed_object(
            {
                "accepted": {"const": True},
                "fired": {
                    "oneOf": [BOOLEAN, COUNT],
                    "description": "format json: whether the event fired; format alertmanager: how "
                    "many of its alerts fired (repeats of alerts that already fired are not counted)",
                },
            }
        ),
    }


def _callback_and_inbox_schemas() -> dict[str, Schema]:
    accepted = closed_object(
        {"callbackId": STRING, "state": {"enum": ["pending", "deduped", "silenced"]}},
        about="the callback was accepted; deduped and silenced ones create no session",
    )
    detail = closed_object(
        {
            "callback": ref("Contract"),
            "envelope": {"anyOf": [ref("Envelope"), {"type": "null"}]},
            "conditions": {
                "anyOf": [
                    array_of(
                        closed_object(
                            {
                                "path": STRING,
                                "op": STRING,
                                "value": {},
                                "actual": {},
                                "missing": {"type": "boolean"},
                                "result": {"type": "boolean"},
                            },
                            about="a leaf condition at the fire: its actual value (cut when long) and result",
                        )
                    ),
                    {"type": "null"},
                ],
                "description": "why a match fired; null for other triggers, manual and external callbacks",
            },
            "transcript": array_of(ref("TranscriptEntry")),
            "deliveries": array_of(ref("Delivery")),
            "usage": closed_object(
                USAGE_FIELDS, about="what the callback's model calls used: tokens in and out, cost (SPEC §20)"
            ),
        }
    )
    return {
        "CallbackAccepted": accepted,
        "CallbackList": page_of(ref("Contract"), "contracts, newest first (deduped ones included)"),
        "CallbackDetail": detail,
        "SessionTranscript": closed_object(
            {"sessionKey": STRING, "transcript": array_of(ref("TranscriptEntry"))}
        ),
        "EscalationStatus": closed_object(
            {
                "policy": {**NULLABLE_STRING, "description": "escalationTargets for the shorthand"},
                "step": {"type": ["integer", "null"], "minimum": 0, "description": "the last step sent"},
                "nextStep": {"type": ["integer", "null"], "minimum": 0},
                "nextAt": {**NULLABLE_TIME, "description": "when nextStep goes out if still open"},
            }
        ),
        "InboxList": page_of(ref("InboxItem"), "inbox items, newest first"),
        "InboxItemDetail": closed_object(
            {"item": ref("InboxItem"), "history": array_of(ref("InboxHistoryEntry"))}
        ),
        "InboxItemAnswer": closed_object(
            {"item": ref("InboxItem"), "silence": ref("Silence")},
            optional=("silence",),
            about="the changed item (and, for an ack with silenceForMs, the silence made)",
        ),
        "AckBody": closed_object(
            {
                "note": {"type": ["string", "null"], "maxLength": MAX_NOTE_CHARS},
                "silenceForMs": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "also silence the item's watcher this long",
                },
            },
            optional=("note", "silenceForMs"),
        ),
        "NoteBody": closed_object(
            {"note": {"type": ["string", "null"], "maxLength": MAX_NOTE_CHARS}}, optional=("note",)
        ),
    }


def api_schemas() -> dict[str, Schema]:
    """The hand-built answers and bodies, plus the error shape and the health answers."""
    error = closed_object(
        {
            "error": closed_object(
                {
                    "code": {**STRING, "description": "stable, e.g. invalid, not_found, conflict"},
                    "message": {**STRING, "description": "for people: the thing, the value, the way out"},
                    "details": {"description": "null, or more (e.g. [{key, message}] for invalid watchers)"},
                }
            )
        },
        about="every error answer",
    )
    return {
        "Error": error,
        "Health": closed_object({"status": {"const": "ok"}}),
        "Ready": closed_object(
            {
                "status": {"const": "ready"},
                "watchers": COUNT,
                "mcpServers": {
                    "type": "object",
                    "description": "each MCP server's state (details only: a failed one leaves the "
                    "service ready; `sentinel status` says why); absent without mcpServers",
                    "additionalProperties": {"enum": ["starting", "ready", "failed", "stopped"]},
                },
            },
            optional=("mcpServers",),
        ),
        **_watcher_schemas(),
        **_callback_and_inbox_schemas(),
        **_silence_schemas(),
    }


def _silence_schemas() -> dict[str, Schema]:
    matcher = closed_object(
        {
            "path": {**STRING, "description": f"{', '.join(MATCHER_FIELDS)} or payload.<path>"},
            "op": {"enum": [op for op in get_args(Op) if op != "changed"]},
            "value": {"description": "as in watcher conditions (not needed by exists, absent)"},
        },
        optional=("value",),
    )
    matchers = {**array_of(ref("Matcher")), "minItems": 1, "maxItems": MAX_MATCHERS}
    silence = closed_object(
        {
            "id": STRING,
            "matchers": matchers,
            "match": {"enum": ["all", "any"]},
            "startsAt": TIME,
            "endsAt": TIME,
            "createdBy": STRING,
            "createdAt": TIME,
            "comment": STRING,
            "state": {"enum": list(SILENCE_STATES)},
        },
        about="fires the matchers match from startsAt (included) to endsAt (excluded) are silenced",
    )
    body = closed_object(
        {
            "matchers": matchers,
            "match": {"enum": ["all", "any"], "default": "all"},
            "startsAt": {**TIME, "description": "default: now"},
            "endsAt": TIME,
            "durationMs": {"type": "integer", "minimum": 1},
            "comment": {**STRING, "minLength": 1, "maxLength": MAX_COMMENT_CHARS},
            "createdBy": {
                **STRING,
                "minLength": 1,
                "maxLength": MAX_ACTOR_CHARS,
                "description": "who silences (as Alertmanager's clients send it); default: the "
                "X-Sentinel-Actor header, else api",
            },
        },
        optional=("match", "startsAt", "endsAt", "durationMs", "createdBy"),
        about="exactly one of endsAt and durationMs",
    )
    window = closed_object({"name": STRING, "startsAt": TIME, "endsAt": TIME})
    status = closed_object(
        {
            "store": closed_object({"type": STRING, "ok": BOOLEAN}),
            "watchers": closed_object({"total": COUNT, **dict.fromkeys(get_args(StatusState), COUNT)}),
            "contracts": closed_object({"pending": COUNT, "notifying": COUNT, "awaitingApproval": COUNT}),
            "inbox": closed_object(
                {
                    "open": COUNT,
                    "more": {**BOOLEAN, "description": "more than 500 open items (open counts 500)"},
                    "byKind": {"type": "object", "additionalProperties": COUNT},
                }
            ),
            "silences": closed_object(
                {"active": COUNT, "items": array_of(ref("Silence")), "windows": array_of(window)}
            ),
            "mcpServers": {
                "type": "object",
                "description": "each server of mcpServers (SPEC §17) by name",
                "additionalProperties": closed_object(
                    {
                        "transport": {"enum": ["stdio", "http"]},
                        "state": {"enum": ["starting", "ready", "failed", "stopped"]},
                        "since": NULLABLE_TIME,
                        "error": NULLABLE_STRING,
                        "tools": COUNT,
                    }
                ),
            },
            "usage": closed_object(
                {
                    "day": {**STRING, "description": "today, UTC (YYYY-MM-DD)"},
                    "models": {"type": "object", "additionalProperties": closed_object(USAGE_FIELDS)},
                    "service": closed_object({**USAGE_FIELDS, "perDay": DAY_LIMIT}),
                    "watchers": {
                        "type": "object",
                        "description": "watchers with a fire.budget.perDay, by id",
                        "additionalProperties": closed_object({**USAGE_FIELDS, "perDay": DAY_LIMIT}),
                    },
                },
                about="today's model usage per models: entry and against the day budgets (SPEC §20)",
            ),
        },
        about="what `sentinel status` prints",
    )
    return {
        "Matcher": matcher,
        "Silence": silence,
        "SilenceList": page_of(ref("Silence"), "silences, newest first"),
        "SilenceAnswer": closed_object(
            {
                "silence": ref("Silence"),
                "warnings": {
                    **array_of(STRING),
                    "description": "made, but may mute nothing: a watcherId matcher names an id no "
                    "watcher has (POST only; absent when there is nothing to say)",
                },
            },
            optional=("warnings",),
        ),
        "SilenceBody": body,
        "Status": status,
    }


def error_responses() -> dict[str, Schema]:
    """``components/responses``: one error answer per status code, each the Error shape."""
    content = {"application/json": {"schema": ref("Error")}}
    return {name: {"description": about, "content": content} for name, about in ERROR_ANSWERS.values()}


SECURITY_SCHEMES: Schema = {
    "bearerAuth": {
        "type": "http",
        "scheme": "bearer",
        "description": "`server.apiToken`, needed by /api/*, /hooks/sentinel (and /metrics with "
        "`server.metricsAuth`); the scheme is case-insensitive. /healthz, /readyz and the web page "
        "(/, /static/*) need no token; /hooks/ingest uses the watcher's own credentials instead. A "
        "service without a token "
        "serves a document without this scheme, and answers only Host `localhost`, a 127.0.0.0/8 "
        "address or `[::1]` (421 otherwise).",
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
}


def query(name: str, schema: Schema, about: str) -> Schema:
    """An optional query parameter."""
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": about}


def path_param(name: str, about: str) -> Schema:
    """A path parameter (always required)."""
    return {"name": name, "in": "path", "required": True, "schema": STRING, "description": about}


def limit(maximum: int, default: int) -> Schema:
    """The ``limit`` query parameter of a listing."""
    schema = {"type": "integer", "minimum": 1, "maximum": maximum, "default": default}
    return query("limit", schema, f"page size, 1 to {maximum}")


CURSOR = query("cursor", STRING, "`nextCursor` of the previous page")
ACTOR = {
    "name": "X-Sentinel-Actor",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "maxLength": 200},
    "description": "who acts (recorded on the item and in its history); default `api`",
}


Auth = Literal["bearer", "open", "page", "metrics", "hmac"]
SECURITY: dict[Auth, list[dict[str, list[str]]]] = {
    "bearer": [{"bearerAuth": []}],
    "open": [],
    "page": [],
    "metrics": [{}, {"bearerAuth": []}],
    "hmac": [{}, {"ingestSignature": []}, {"ingestBearer": []}, {"ingestBasic": []}],
}


def answer(status: int, about: str, schema: Schema | None = None, media: str = "application/json") -> Schema:
    """``{"<status>": response}``, with ``schema`` as the body of type ``media`` when given."""
    response: Schema = {"description": about}
    if schema is not None:
        response["content"] = {media: {"schema": schema}}
    return {str(status): response}


def operation(
    op_id: str,
    summary: str,
    tag: str,
    answers: Schema,
    *,
    auth: Auth = "bearer",
    body: Schema | None = None,
    optional_body: bool = False,
    parameters: tuple[Schema, ...] = (),
    errors: tuple[int, ...] = (),
) -> Schema:
    """One operation; the error answers its auth and body imply are added to ``errors``."""
    codes = set(errors)
    if auth != "open":
        codes.add(421)
    if auth not in ("open", "page"):
        codes.add(401)
    if body is not None:
        codes |= {400, 413, 415}
    responses = dict(answers)
    for code in sorted(codes):
        responses[str(code)] = {"$ref": RESPONSE_REF.format(name=ERROR_ANSWERS[code][0])}
    result: Schema = {
        "operationId": op_id,
        "summary": summary,
        "tags": [tag],
        "security": SECURITY[auth],
        "responses": responses,
    }
    if parameters:
        result["parameters"] = list(parameters)
    if body is not None:
        content = {"application/json": {"schema": body}}
        result["requestBody"] = {"required": not optional_body, "content": content}
    return result
