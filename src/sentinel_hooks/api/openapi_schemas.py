"""The ``components`` of the OpenAPI document: JSON Schemas of every body the API reads or writes.

Records, the callback envelope and watcher definitions reuse their pydantic models' JSON
Schemas (camelCase, ``by_alias``), generated with ``$ref``s that already point into
``#/components/schemas/``; the small wrappers the routes build by hand (pages, answers, the
watcher status, the error shape) are written out here, next to nothing else.
"""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import JsonSchemaMode

from sentinel_hooks.callbacks.envelope import Envelope
from sentinel_hooks.config.watcher import WATCHER_ADAPTER
from sentinel_hooks.inbox.transitions import MAX_NOTE_CHARS
from sentinel_hooks.store.records import (
    Contract,
    Delivery,
    InboxHistoryEntry,
    InboxItem,
    TranscriptEntry,
)
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

ERROR_ANSWERS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "invalid JSON, body, query parameter or cursor (`details` says which)"),
    401: ("Unauthorized", "missing or wrong bearer token (or, for /hooks/ingest, HMAC signature)"),
    403: ("Forbidden", "`command` watchers cannot be created through the API"),
    404: ("NotFound", "no such watcher, callback, session or inbox item"),
    409: ("Conflict", "the current state does not allow this change (the message names it)"),
    413: ("PayloadTooLarge", "the body is over the route's limit"),
    415: ("UnsupportedMediaType", "the body is not labelled `application/json` (or `+json`)"),
    421: ("MisdirectedRequest", "no `server.apiToken` and the Host is not a loopback name"),
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
        "IngestAnswer": closed_object({"accepted": {"const": True}, "fired": BOOLEAN}),
    }


def _callback_and_inbox_schemas() -> dict[str, Schema]:
    accepted = closed_object(
        {"callbackId": STRING, "state": {"enum": ["pending", "deduped"]}},
        about="the callback was accepted; deduped ones create no session",
    )
    detail = closed_object(
        {
            "callback": ref("Contract"),
            "envelope": {"anyOf": [ref("Envelope"), {"type": "null"}]},
            "transcript": array_of(ref("TranscriptEntry")),
            "deliveries": array_of(ref("Delivery")),
        }
    )
    return {
        "CallbackAccepted": accepted,
        "CallbackList": page_of(ref("Contract"), "contracts, newest first (deduped ones included)"),
        "CallbackDetail": detail,
        "SessionTranscript": closed_object(
            {"sessionKey": STRING, "transcript": array_of(ref("TranscriptEntry"))}
        ),
        "InboxList": page_of(ref("InboxItem"), "inbox items, newest first"),
        "InboxItemDetail": closed_object(
            {"item": ref("InboxItem"), "history": array_of(ref("InboxHistoryEntry"))}
        ),
        "InboxItemAnswer": closed_object({"item": ref("InboxItem")}),
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
        "Ready": closed_object({"status": {"const": "ready"}, "watchers": COUNT}),
        **_watcher_schemas(),
        **_callback_and_inbox_schemas(),
    }


def error_responses() -> dict[str, Schema]:
    """``components/responses``: one error answer per status code, each the Error shape."""
    content = {"application/json": {"schema": ref("Error")}}
    return {name: {"description": about, "content": content} for name, about in ERROR_ANSWERS.values()}
