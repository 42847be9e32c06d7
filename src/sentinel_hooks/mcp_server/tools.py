"""The tools Sentinel offers as an MCP server (SPEC.md §17): what an agent reads, and the API call
each one is.

A tool is a name, a description and the endpoint it stands for (``sentinel_hooks.endpoints``);
the rest is derived from that endpoint's declaration: its arguments' JSON Schema from the path ids
(named for what they name: ``watcherId``, ``itemId``), the query parameters and the body's fields
(or the whole body as one argument), and the request a call becomes (``ApiCall``). Both faces answer
a call by making that request: ``sentinel mcp`` sends it to the running service, ``/mcp`` answers
it in-process through the same functions as the routes. So a tool's result is, by construction,
the body the API returns for that request.

An argument is given or left out, never null (as a query parameter): the null an optional body
field may take is left out of a tool's schema.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from sentinel_hooks.endpoints import callbacks, inbox, silences, watchers
from sentinel_hooks.endpoints.base import Endpoint, Method
from sentinel_hooks.endpoints.schemas import ID_SCHEMA, Schema, model_schema, parameters, without_null

ARGUMENT_REF = "#/$defs/{model}"


@dataclass(frozen=True)
class ApiCall:
    """One request to the HTTP API: the ``endpoint``'s method and path (its ids filled from
    ``ids``), string ``query`` parameters and a JSON ``body`` (None: no body)."""

    tool: str
    endpoint: Endpoint
    ids: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None

    @property
    def method(self) -> Method:
        return self.endpoint.method

    @property
    def route(self) -> str:
        """The path template, e.g. ``/api/v1/watchers/{id}``."""
        return self.endpoint.path

    @property
    def path(self) -> str:
        """The request path, each id percent-encoded (a ``/`` in an id stays inside its segment)."""
        return self.route.format(**{k: quote(v, safe="") for k, v in self.ids.items()})

    @property
    def path_and_query(self) -> str:
        if not self.query:
            return self.path
        return self.path + "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in self.query.items())


@dataclass(frozen=True, eq=False)
class Tool:
    """An MCP tool: what the agent is shown and the endpoint a call is a request to.

    ``ids`` names the argument of each path id; ``body_argument``, when set, is one argument that
    is the whole body (a watcher definition: the route checks it the way a file is checked and
    names every wrong key, where a JSON Schema check could only say it matches no strategy), else
    each field of the body is an argument of its own. A GET is read-only, a DELETE destructive.
    """

    name: str
    description: str
    endpoint: Endpoint
    ids: dict[str, str] = field(default_factory=dict)
    body_argument: str | None = None
    approvals: bool = False  # offered only with server.mcpApprovals: true

    @property
    def read_only(self) -> bool:
        return self.endpoint.method == "GET"

    @property
    def destructive(self) -> bool:
        return self.endpoint.method == "DELETE"

    @functools.cached_property
    def _body(self) -> Schema:
        """The body model's schema (fields as arguments), empty for a whole-body argument."""
        body = self.endpoint.body
        if body is None or self.body_argument is not None:
            return {}
        return model_schema(body.model, "validation", ARGUMENT_REF)

    @functools.cached_property
    def schema(self) -> Schema:
        """The JSON Schema of the arguments."""
        properties: dict[str, Schema] = {}
        required: list[str] = []
        for path_id in self.endpoint.ids:
            properties[self.ids[path_id.name]] = {**ID_SCHEMA, "description": path_id.about}
            required.append(self.ids[path_id.name])
        for parameter in parameters(self.endpoint.query) if self.endpoint.query else ():
            properties[parameter.name] = {**parameter.schema, "description": parameter.about}
            required += [parameter.name] if parameter.required else []
        if self.body_argument is not None and self.endpoint.body is not None:
            properties[self.body_argument] = {"type": "object", "description": self.endpoint.body.about}
            required.append(self.body_argument)
        properties.update({k: without_null(v) for k, v in self._body.get("properties", {}).items()})
        required += self._body.get("required", [])
        schema: Schema = {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }
        if "$defs" in self._body:
            schema["$defs"] = self._body["$defs"]
        return schema

    def request(self, arguments: dict[str, Any]) -> ApiCall:
        """The API request a call with ``arguments`` (which passed ``schema``) stands for."""
        endpoint = self.endpoint
        ids = {name: arguments[argument] for name, argument in self.ids.items()}
        names = [p.name for p in parameters(endpoint.query)] if endpoint.query else []
        query = {name: str(arguments[name]) for name in names if arguments.get(name) is not None}
        body: Any = None
        if self.body_argument is not None:
            body = arguments[self.body_argument]
        elif endpoint.body is not None:
            body = {key: arguments[key] for key in self._body["properties"] if key in arguments}
        return ApiCall(self.name, endpoint, ids, query, body)


TOOLS: tuple[Tool, ...] = (
    Tool(
        "list_watchers",
        "List the watchers of this Sentinel service, by id, each with enabled, strategy, tags and "
        "status {state: ok|failing|disabled|stopped, firing, lastError, consecutiveFailures, "
        "lastCheckAt, nextCheckAt, fires, silencedBy}. Answers {items, nextCursor}; pass nextCursor "
        "back as cursor for the next page.",
        watchers.LIST,
    ),
    Tool(
        "get_watcher",
        "One watcher: its definition as written (secrets masked), its status and runtime details. "
        "Answers {watcher, status, runtime}.",
        watchers.SHOW,
        ids={"id": "watcherId"},
    ),
    Tool(
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
        watchers.CREATE,
        body_argument="watcher",
    ),
    Tool(
        "set_watcher_enabled",
        "Enable or disable a watcher (a disabled watcher stops polling and never fires). Answers "
        "{watcher, status, runtime}.",
        watchers.PATCH,
        ids={"id": "watcherId"},
    ),
    Tool(
        "delete_watcher",
        "Delete a watcher created through the API or MCP (one defined in a file is refused with a "
        "conflict: disable it instead). Answers {deleted: watcherId}.",
        watchers.DELETE,
        ids={"id": "watcherId"},
    ),
    Tool(
        "fire_watcher",
        "Fire a watcher now, as if its conditions had matched, with an optional payload (its "
        "observation; default {}). Skips conditions, cooldown and fireOnce but not dedupe. Answers "
        '{callbackId, state: "pending"|"deduped"}; follow it with get_callback.',
        watchers.FIRE,
        ids={"id": "watcherId"},
    ),
    Tool(
        "list_callbacks",
        "List callbacks (one per fire or external envelope: its response contract), newest first. "
        "Each is {callbackId, watcherId, dedupeKey, sessionKey, state, trigger, createdAt, deadline, "
        "settledAt, targets}. Answers {items, nextCursor}.",
        callbacks.LIST,
    ),
    Tool(
        "get_callback",
        "One callback end to end: its contract, the envelope sent to the hook session, the "
        "session's transcript entries for it and every delivery with its attempts. Answers "
        "{callback, envelope, transcript, deliveries}.",
        callbacks.SHOW,
        ids={"id": "callbackId"},
    ),
    Tool(
        "list_inbox",
        "List the operator inbox, newest first: escalations, approvals waiting for a person and "
        "delivery failures. Answers {items, nextCursor}.",
        inbox.LIST,
    ),
    Tool(
        "ack_inbox_item",
        "Acknowledge an open inbox item (someone is on it; stops its escalation chain). With "
        "silenceForMs, the item's watcher is also silenced that long. Answers {item} (and "
        "{silence} when one was made).",
        inbox.ACK,
        ids={"id": "itemId"},
    ),
    Tool(
        "resolve_inbox_item",
        "Resolve an open or acknowledged inbox item (the problem is over). Answers {item}.",
        inbox.RESOLVE,
        ids={"id": "itemId"},
    ),
    Tool(
        "list_silences",
        "List silences, newest first, each with its matchers, start, end, comment and state now "
        "(active, pending or expired). Answers {items, nextCursor}.",
        silences.LIST,
    ),
    Tool(
        "add_silence",
        "Silence fires for a while: a fire that matches is recorded but wakes no agent and sends no "
        "message. Give matchers (all must match, or any with match: any), exactly one of endsAt and "
        'durationMs, and a comment saying why. Example: {"matchers": [{"path": "watcherId", '
        '"op": "eq", "value": "api-down"}], "durationMs": 3600000, "comment": "deploy in progress"}. '
        "Answers {silence}.",
        silences.CREATE,
    ),
    Tool(
        "approve",
        "Approve an approval item: the action a hook session asked for (a command, an MCP tool call) "
        "runs and the paused session resumes with its result. Answers {item}.",
        inbox.APPROVE,
        ids={"id": "itemId"},
        approvals=True,
    ),
    Tool(
        "deny",
        "Deny an approval item: the action is not run and the paused session resumes with the refusal. "
        "Answers {item}.",
        inbox.DENY,
        ids={"id": "itemId"},
        approvals=True,
    ),
)


def offered_tools(*, approvals: bool) -> dict[str, Tool]:
    """The tools offered, by name: approve and deny only with ``server.mcpApprovals: true``
    (approving is a person's decision, so an agent is not handed it by default)."""
    return {tool.name: tool for tool in TOOLS if approvals or not tool.approvals}
