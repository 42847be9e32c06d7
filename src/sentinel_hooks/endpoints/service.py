"""The service's own endpoints: health and metrics, its status, the OpenAPI document, the web page
and its assets, and ``/mcp``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypeAliasType

from sentinel_hooks.callbacks.mcp.client import McpState
from sentinel_hooks.endpoints.base import Answer, ApiModel, Body, Endpoint, PathId, ProtocolErrors
from sentinel_hooks.endpoints.callbacks import UsageTotals
from sentinel_hooks.endpoints.common import Count, absent_field
from sentinel_hooks.endpoints.silences import Silence

OPENAPI_PATH = "/api/v1/openapi.json"

JsonRpcMessage = TypeAliasType(
    "JsonRpcMessage",
    Annotated[dict[str, Any], Field(description="a JSON-RPC 2.0 message of the Model Context Protocol")],
)


class JsonRpcErrorObject(ApiModel):
    code: int
    message: str
    data: Any = Field(
        None,
        description="for a request Sentinel refused before the MCP SDK read it (not JSON, too large, "
        "JSON the API refuses): the API's error {code, message, details}",
    )


class JsonRpcError(ApiModel):
    """A request the MCP transport refused, as a JSON-RPC error (MCP's streamable HTTP transport)."""

    jsonrpc: Literal["2.0"]
    id: str | int | None = None
    error: JsonRpcErrorObject


class Health(ApiModel):
    """The process is up."""

    status: Literal["ok"]


class Ready(ApiModel):
    """The store takes writes and the watchers are loaded."""

    status: Literal["ready"]
    watchers: Count
    mcp_servers: dict[str, McpState] | SkipJsonSchema[None] = absent_field(
        "each MCP server's state (details only: a failed one leaves the service ready; "
        "`sentinel status` says why); absent without mcpServers"
    )


class StoreCheck(ApiModel):
    type: str
    ok: bool


class WatcherCounts(ApiModel):
    total: Count
    ok: Count
    failing: Count
    disabled: Count
    stopped: Count


class ContractCounts(ApiModel):
    pending: Count
    notifying: Count
    awaiting_approval: Count


class InboxCounts(ApiModel):
    open: Count
    more: bool = Field(description="more than 500 open items (open counts 500)")
    by_kind: dict[str, Count]


class Window(ApiModel):
    """A maintenance window open now."""

    name: str
    starts_at: datetime
    ends_at: datetime


class SilencesNow(ApiModel):
    active: Count
    items: list[Silence]
    windows: list[Window]


class McpServerStatus(ApiModel):
    """An MCP server of mcpServers (SPEC §17)."""

    transport: Literal["stdio", "http"]
    state: McpState
    since: datetime | None
    error: str | None
    tools: Count


class DayLimit(ApiModel):
    """A day budget (null: no limit)."""

    tokens: int | None
    usd: float | None


class BudgetedUsage(UsageTotals):
    """Today's usage of a scope against its day budget."""

    per_day: DayLimit


class DayUsage(ApiModel):
    """Today's (UTC) model usage (SPEC §20)."""

    day: str = Field(description="today, UTC (YYYY-MM-DD)")
    models: dict[str, UsageTotals] = Field(description="by models: entry")
    service: BudgetedUsage
    watchers: dict[str, BudgetedUsage] = Field(description="watchers with a fire.budget.perDay, by id")


class HeartbeatNow(ApiModel):
    """A heartbeat watcher's check-ins (SPEC §23)."""

    id: str
    last_ping_at: datetime | None
    last_ping_kind: Literal["success", "start", "fail"] | None
    next_due_at: datetime | None = Field(description="when the next success ping is due (grace included)")
    overdue: bool = Field(description="a due time passed with no success ping since")


class Status(ApiModel):
    """What `sentinel status` prints."""

    store: StoreCheck
    watchers: WatcherCounts
    contracts: ContractCounts
    inbox: InboxCounts
    silences: SilencesNow
    mcp_servers: dict[str, McpServerStatus] = Field(description="each server of mcpServers by name")
    usage: DayUsage = Field(description="today's model usage per model and against the day budgets")
    heartbeats: list[HeartbeatNow] = Field(
        description="the heartbeat watchers (overdue first, then by id; 100 at most)"
    )


HEALTHZ = Endpoint(
    "healthz", "GET", "/healthz", "liveness", "health", (Answer(200, "up", Health),), auth="open"
)
READYZ = Endpoint(
    "readyz",
    "GET",
    "/readyz",
    "store reachable, watchers loaded",
    "health",
    (Answer(200, "ready", Ready),),
    auth="open",
    errors=(503,),
)
METRICS = Endpoint(
    "metrics",
    "GET",
    "/metrics",
    "Prometheus metrics",
    "health",
    (Answer(200, "Prometheus text format", str, ("text/plain",)),),
    auth="metrics",
)
OPENAPI = Endpoint(
    "openapi",
    "GET",
    OPENAPI_PATH,
    "this OpenAPI 3.1 document",
    "meta",
    (Answer(200, "this document", dict[str, Any]),),
    role="viewer",
)
STATUS = Endpoint(
    "status",
    "GET",
    "/api/v1/status",
    "the service at a glance",
    "meta",
    (Answer(200, "the status", Status),),
    role="viewer",
)
PAGE = Endpoint(
    "webPage",
    "GET",
    "/",
    "the operator's web page",
    "web",
    (Answer(200, "the HTML shell; its script reads everything through the API", str, ("text/html",)),),
    auth="page",
)
ASSET = Endpoint(
    "webAsset",
    "GET",
    "/static/{name}",
    "the web page's assets",
    "web",
    (
        Answer(
            200,
            "the page's script, stylesheet or icon",
            str,
            ("text/javascript", "text/css", "image/svg+xml"),
        ),
    ),
    ids=(PathId("name", "app.js, app.css or icon.svg"),),
    auth="page",
    errors=(404,),
)
MCP = Endpoint(
    "mcp",
    "POST",
    "/mcp",
    "Sentinel's MCP tools over streamable HTTP (docs/mcp.md)",
    "mcp",
    (
        Answer(200, "the JSON-RPC answer (one JSON body: the endpoint is stateless)", JsonRpcMessage),
        Answer(202, "a notification or response from the client, accepted"),
    ),
    body=Body(JsonRpcMessage, None),
    protocol_errors=ProtocolErrors(
        "refused by the MCP transport: a body that is not JSON-RPC, or that the API would refuse "
        "(400), an Accept header without application/json and text/event-stream (406), a body "
        "too large (413) or not JSON (415)",
        JsonRpcError,
    ),
    role="viewer",
)

ENDPOINTS = (HEALTHZ, READYZ, METRICS, OPENAPI, STATUS, PAGE, ASSET, MCP)
