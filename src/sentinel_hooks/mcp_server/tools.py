"""The tools Sentinel offers as an MCP server (SPEC.md §17): what an agent reads, and the API call
each one is.

A tool is its name, a description, a JSON Schema for its arguments and the HTTP API request it
stands for (``ApiCall``). Both faces answer a call by making that request: ``sentinel mcp`` sends
it to the running service, ``/mcp`` answers it in-process through the same functions as the
routes. So a tool's result is, by construction, the body the API returns for that request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, get_args
from urllib.parse import quote

from sentinel_hooks.core.conditions import Op
from sentinel_hooks.core.contract_states import ContractState
from sentinel_hooks.core.silences import PATHS_HELP
from sentinel_hooks.inbox.transitions import INBOX_KINDS, INBOX_STATUSES, MAX_NOTE_CHARS
from sentinel_hooks.store.silences import MAX_COMMENT_CHARS, MAX_MATCHERS, SILENCE_STATES

MAX_SILENCE_MS = 366 * 24 * 3600 * 1000  # as the API: a year and a day
MAX_ACTOR_CHARS = 200  # as the API's X-Sentinel-Actor and createdBy


@dataclass(frozen=True)
class ApiCall:
    """One request to the HTTP API: ``method`` and ``path`` (built from ``route`` and ``ids``),
    string ``query`` parameters and a JSON ``body`` (None: no body)."""

    tool: str
    method: str
    route: str  # e.g. "/api/v1/watchers/{id}"
    ids: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None

    @property
    def path(self) -> str:
        """The request path, each id percent-encoded (a ``/`` in an id stays inside its segment)."""
        return self.route.format(**{k: quote(v, safe="") for k, v in self.ids.items()})

    @property
    def path_and_query(self) -> str:
        if not self.query:
            return self.path
        return self.path + "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in self.query.items())


@dataclass(frozen=True)
class Tool:
    """An MCP tool: what the agent is shown (name, description, argument schema, hints) and the
    API request a call becomes (``request``, given arguments that passed the schema)."""

    name: str
    description: str
    schema: dict[str, Any]
    request: Callable[[dict[str, Any]], ApiCall]
    read_only: bool = False
    destructive: bool = False
    approvals: bool = False  # offered only with server.mcpApprovals: true


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def _id(what: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": 256, "description": what}


def _limit(maximum: int, default: int) -> dict[str, Any]:
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": maximum,
        "description": f"at most this many items (default {default})",
    }


CURSOR = {"type": "string", "description": "nextCursor of the previous page, to read the next one"}
NOTE = {"type": "string", "maxLength": MAX_NOTE_CHARS, "description": "why (kept in the item's history)"}


def _query(arguments: dict[str, Any], names: dict[str, str]) -> dict[str, str]:
    """The query parameters (API name by argument name) of the arguments given."""
    return {api: str(arguments[arg]) for arg, api in names.items() if arguments.get(arg) is not None}


def _note_body(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"note": arguments["note"]} if "note" in arguments else {}


LIST_WATCHERS = Tool(
    "list_watchers",
    "List the watchers of this Sentinel service, by id, each with enabled, strategy, tags and "
    "status {state: ok|failing|disabled|stopped, firing, lastError, consecutiveFailures, "
    "lastCheckAt, nextCheckAt, fires, silencedBy}. Answers {items, nextCursor}; pass nextCursor "
    "back as cursor for the next page.",
    _object({"limit": _limit(1000, 100), "cursor": CURSOR}),
    lambda a: ApiCall(
        "list_watchers", "GET", "/api/v1/watchers", query=_query(a, {"limit": "limit", "cursor": "cursor"})
    ),
    read_only=True,
)

GET_WATCHER = Tool(
    "get_watcher",
    "One watcher: its definition as written (secrets masked), its status and runtime details. "
    "Answers {watcher, status, runtime}.",
    _object({"watcherId": _id("the watcher's id")}, ("watcherId",)),
    lambda a: ApiCall("get_watcher", "GET", "/api/v1/watchers/{id}", {"id": a["watcherId"]}),
    read_only=True,
)

CREATE_WATCHER = Tool(
    "create_watcher",
    "Create a watcher from its definition, the same JSON a watcher YAML file holds, checked the "
    "same way (every problem is listed in error.details as {key, message}). Example: "
    '{"id": "api-down", "strategy": "http-poll", "endpoint": "https://status.example.com/health", '
    '"intervalMs": 60000, "conditions": [{"path": "status", "op": "neq", "value": "ok"}], '
    '"fire": {"eventName": "api_down", "priority": "high", "operatorGoal": "The API health check '
    'fails: find out why and notify on-call."}, "deliveryTargets": ["console"]}. The endpoint\'s '
    "host must be in the service's allowedHosts. Watchers of strategy command are refused unless "
    "the service allows them (server.allowCommandWatchers); ${env:…} references are refused. "
    "The watcher is kept across restarts. Answers {watcher, status, runtime}.",
    _object(
        {"watcher": {"type": "object", "description": "the watcher definition (as in a watcher file)"}},
        ("watcher",),
    ),
    lambda a: ApiCall("create_watcher", "POST", "/api/v1/watchers", body=a["watcher"]),
)

SET_WATCHER_ENABLED = Tool(
    "set_watcher_enabled",
    "Enable or disable a watcher (a disabled watcher stops polling and never fires). Answers "
    "{watcher, status, runtime}.",
    _object({"watcherId": _id("the watcher's id"), "enabled": {"type": "boolean"}}, ("watcherId", "enabled")),
    lambda a: ApiCall(
        "set_watcher_enabled",
        "PATCH",
        "/api/v1/watchers/{id}",
        {"id": a["watcherId"]},
        body={"enabled": a["enabled"]},
    ),
)

DELETE_WATCHER = Tool(
    "delete_watcher",
    "Delete a watcher created through the API or MCP (one defined in a file is refused with a "
    "conflict: disable it instead). Answers {deleted: watcherId}.",
    _object({"watcherId": _id("the watcher's id")}, ("watcherId",)),
    lambda a: ApiCall("delete_watcher", "DELETE", "/api/v1/watchers/{id}", {"id": a["watcherId"]}),
    destructive=True,
)

FIRE_WATCHER = Tool(
    "fire_watcher",
    "Fire a watcher now, as if its conditions had matched, with an optional payload (its "
    "observation; default {}). Skips conditions, cooldown and fireOnce but not dedupe. Answers "
    '{callbackId, state: "pending"|"deduped"}; follow it with get_callback.',
    _object(
        {
            "watcherId": _id("the watcher's id"),
            "payload": {"description": "the observation the fire carries (any JSON value)"},
        },
        ("watcherId",),
    ),
    lambda a: ApiCall(
        "fire_watcher",
        "POST",
        "/api/v1/watchers/{id}/fire",
        {"id": a["watcherId"]},
        body={"payload": a["payload"]} if "payload" in a else {},
    ),
)

LIST_CALLBACKS = Tool(
    "list_callbacks",
    "List callbacks (one per fire or external envelope: its response contract), newest first. "
    "Each is {callbackId, watcherId, dedupeKey, sessionKey, state, trigger, createdAt, deadline, "
    "settledAt, targets}. Answers {items, nextCursor}.",
    _object(
        {
            "watcherId": _id("only this watcher's callbacks"),
            "state": {"type": "string", "enum": list(get_args(ContractState))},
            "limit": _limit(500, 50),
            "cursor": CURSOR,
        }
    ),
    lambda a: ApiCall(
        "list_callbacks",
        "GET",
        "/api/v1/callbacks",
        query=_query(a, {"watcherId": "watcherId", "state": "state", "limit": "limit", "cursor": "cursor"}),
    ),
    read_only=True,
)

GET_CALLBACK = Tool(
    "get_callback",
    "One callback end to end: its contract, the envelope sent to the hook session, the "
    "session's transcript entries for it and every delivery with its attempts. Answers "
    "{callback, envelope, transcript, deliveries}.",
    _object({"callbackId": _id("the callback's id (from fire_watcher or list_callbacks)")}, ("callbackId",)),
    lambda a: ApiCall("get_callback", "GET", "/api/v1/callbacks/{id}", {"id": a["callbackId"]}),
    read_only=True,
)

LIST_INBOX = Tool(
    "list_inbox",
    "List the operator inbox, newest first: escalations, approvals waiting for a person and "
    "delivery failures. Answers {items, nextCursor}.",
    _object(
        {
            "status": {"type": "string", "enum": list(INBOX_STATUSES)},
            "kind": {"type": "string", "enum": list(INBOX_KINDS)},
            "limit": _limit(500, 50),
            "cursor": CURSOR,
        }
    ),
    lambda a: ApiCall(
        "list_inbox",
        "GET",
        "/api/v1/inbox",
        query=_query(a, {"status": "status", "kind": "kind", "limit": "limit", "cursor": "cursor"}),
    ),
    read_only=True,
)

ACK_INBOX_ITEM = Tool(
    "ack_inbox_item",
    "Acknowledge an open inbox item (someone is on it; stops its escalation chain). With "
    "silenceForMs, the item's watcher is also silenced that long. Answers {item} (and "
    "{silence} when one was made).",
    _object(
        {
            "itemId": _id("the inbox item's id"),
            "note": NOTE,
            "silenceForMs": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_SILENCE_MS,
                "description": "also silence the item's watcher for this many milliseconds",
            },
        },
        ("itemId",),
    ),
    lambda a: ApiCall(
        "ack_inbox_item",
        "POST",
        "/api/v1/inbox/{id}/ack",
        {"id": a["itemId"]},
        body={k: a[k] for k in ("note", "silenceForMs") if k in a},
    ),
)

RESOLVE_INBOX_ITEM = Tool(
    "resolve_inbox_item",
    "Resolve an open or acknowledged inbox item (the problem is over). Answers {item}.",
    _object({"itemId": _id("the inbox item's id"), "note": NOTE}, ("itemId",)),
    lambda a: ApiCall(
        "resolve_inbox_item", "POST", "/api/v1/inbox/{id}/resolve", {"id": a["itemId"]}, body=_note_body(a)
    ),
)

LIST_SILENCES = Tool(
    "list_silences",
    "List silences, newest first, each with its matchers, start, end, comment and state now "
    "(active, pending or expired). Answers {items, nextCursor}.",
    _object(
        {
            "state": {"type": "string", "enum": list(SILENCE_STATES)},
            "limit": _limit(500, 50),
            "cursor": CURSOR,
        }
    ),
    lambda a: ApiCall(
        "list_silences",
        "GET",
        "/api/v1/silences",
        query=_query(a, {"state": "state", "limit": "limit", "cursor": "cursor"}),
    ),
    read_only=True,
)

MATCHER = _object(
    {
        "path": {"type": "string", "description": f"what to test: {PATHS_HELP}"},
        "op": {"type": "string", "enum": [op for op in get_args(Op) if op != "changed"]},
        "value": {"description": "the value to compare with (not for exists/absent)"},
    },
    ("path", "op"),
)

ADD_SILENCE = Tool(
    "add_silence",
    "Silence fires for a while: a fire that matches is recorded but wakes no agent and sends no "
    "message. Give matchers (all must match, or any with match: any), exactly one of endsAt and "
    'durationMs, and a comment saying why. Example: {"matchers": [{"path": "watcherId", '
    '"op": "eq", "value": "api-down"}], "durationMs": 3600000, "comment": "deploy in progress"}. '
    "Answers {silence}.",
    _object(
        {
            "matchers": {"type": "array", "items": MATCHER, "minItems": 1, "maxItems": MAX_MATCHERS},
            "match": {"type": "string", "enum": ["all", "any"], "description": "default all"},
            "startsAt": {"type": "string", "description": "ISO 8601 with a timezone; default now"},
            "endsAt": {"type": "string", "description": "ISO 8601 with a timezone"},
            "durationMs": {"type": "integer", "minimum": 1, "maximum": MAX_SILENCE_MS},
            "comment": {"type": "string", "minLength": 1, "maxLength": MAX_COMMENT_CHARS},
            "createdBy": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_ACTOR_CHARS,
                "description": "who is silencing (default: the X-Sentinel-Actor header, else mcp)",
            },
        },
        ("matchers", "comment"),
    ),
    lambda a: ApiCall("add_silence", "POST", "/api/v1/silences", body=dict(a)),
)

APPROVE = Tool(
    "approve",
    "Approve an approval item: the action a hook session asked for (a command, an MCP tool call) "
    "runs and the paused session resumes with its result. Answers {item}.",
    _object({"itemId": _id("the approval item's id"), "note": NOTE}, ("itemId",)),
    lambda a: ApiCall(
        "approve", "POST", "/api/v1/approvals/{id}/approve", {"id": a["itemId"]}, body=_note_body(a)
    ),
    approvals=True,
)

DENY = Tool(
    "deny",
    "Deny an approval item: the action is not run and the paused session resumes with the refusal. "
    "Answers {item}.",
    _object({"itemId": _id("the approval item's id"), "note": NOTE}, ("itemId",)),
    lambda a: ApiCall("deny", "POST", "/api/v1/approvals/{id}/deny", {"id": a["itemId"]}, body=_note_body(a)),
    approvals=True,
)

TOOLS: tuple[Tool, ...] = (
    LIST_WATCHERS,
    GET_WATCHER,
    CREATE_WATCHER,
    SET_WATCHER_ENABLED,
    DELETE_WATCHER,
    FIRE_WATCHER,
    LIST_CALLBACKS,
    GET_CALLBACK,
    LIST_INBOX,
    ACK_INBOX_ITEM,
    RESOLVE_INBOX_ITEM,
    LIST_SILENCES,
    ADD_SILENCE,
    APPROVE,
    DENY,
)


def offered_tools(*, approvals: bool) -> dict[str, Tool]:
    """The tools offered, by name: approve and deny only with ``server.mcpApprovals: true``
    (approving is a person's decision, so an agent is not handed it by default)."""
    return {tool.name: tool for tool in TOOLS if approvals or not tool.approvals}
