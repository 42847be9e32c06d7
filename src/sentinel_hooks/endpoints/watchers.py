"""Watcher endpoints (SPEC.md §9): list, show, create, enable/disable, delete, manual fire, and
the pushes to ``webhook`` watchers (``/hooks/ingest/{id}``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field
from typing_extensions import TypeAliasType

from sentinel_hooks.config.watcher import WatcherSpec
from sentinel_hooks.endpoints.base import Answer, ApiModel, Body, Endpoint, PathId
from sentinel_hooks.endpoints.common import CallbackAccepted, Count, Page, cursor_field, limit_field
from sentinel_hooks.watchers.state import StatusState

MAX_BODY = 256 * 1024
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100

WatcherDefinition = TypeAliasType(
    "WatcherDefinition",
    Annotated[WatcherSpec, Field(description="A watcher, as in a watcher file (one of the strategies).")],
)


class WatcherStatus(ApiModel):
    """A watcher's state now."""

    state: StatusState
    firing: bool
    last_error: str | None
    consecutive_failures: Count
    last_check_at: datetime | None
    next_check_at: datetime | None
    fires: Count = Field(description="accepted fires, manual ones included, not deduped ones")
    silenced_by: str | None = Field(
        description="the silence id or maintenance window name muting this watcher's fires now"
    )
    last_ping_at: datetime | None = Field(default=None, description="heartbeat watchers: the last ping")
    last_ping_kind: Literal["success", "start", "fail"] | None = Field(
        default=None, description="heartbeat watchers: what the last ping said"
    )
    last_ping_exit_code: int | None = Field(
        default=None, description="heartbeat watchers: the exit code the last ping carried (`/{exitCode}`)"
    )
    next_due_at: datetime | None = Field(
        default=None,
        description="heartbeat watchers: when the next success ping is due (grace included; the next "
        "period's once one was missed)",
    )
    overdue: bool | None = Field(
        default=None, description="heartbeat watchers: a due time passed with no success ping since"
    )


class WatcherSummary(ApiModel):
    """A watcher in a listing."""

    id: str
    enabled: bool
    strategy: str
    tags: list[str]
    status: WatcherStatus


class WatcherList(Page):
    """Watchers by id."""

    items: list[WatcherSummary]


class WatcherRuntime(ApiModel):
    """Where the watcher comes from and how its subscription fares."""

    source: str = Field(description="the watcher file, or api:{id} for one created here")
    last_event_at: datetime | None
    reconnects: Count
    last_reconnect_gap_ms: Count | None
    last_ping_body: str | None = Field(
        default=None,
        description="heartbeat watchers: the last ping's body (10 KB at most, secrets masked)",
    )


class WatcherDetail(ApiModel):
    """A watcher: its definition, status and runtime."""

    watcher: dict[str, Any] = Field(
        description="the definition as written (see WatcherDefinition), secrets masked"
    )
    status: WatcherStatus
    runtime: WatcherRuntime


class EnabledBody(ApiModel):
    """Enable or disable."""

    enabled: bool = Field(description="false stops polling: a disabled watcher never fires")


class FireBody(ApiModel):
    """A manual fire."""

    payload: Any = Field(
        default_factory=dict, description="the observation the fire carries (any JSON value; default {})"
    )


class IngestAnswer(ApiModel):
    """The push was accepted."""

    accepted: Literal[True]
    fired: bool | Count = Field(
        description="format json: whether the event fired; format alertmanager: how many of its "
        "alerts fired (repeats of alerts that already fired are not counted)"
    )


class WatcherQuery(ApiModel):
    limit: int = limit_field(MAX_LIMIT, DEFAULT_LIMIT)
    cursor: str | None = cursor_field()


WATCHER_ID = PathId("id", "the watcher's id")
DETAIL = Answer(200, "the watcher", WatcherDetail)

LIST = Endpoint(
    "listWatchers",
    "GET",
    "/api/v1/watchers",
    "watchers and their status, by id",
    "watchers",
    (Answer(200, "a page of watchers", WatcherList),),
    query=WatcherQuery,
    errors=(400,),
    role="viewer",
)
CREATE = Endpoint(
    "createWatcher",
    "POST",
    "/api/v1/watchers",
    "create a watcher (same schema and checks as a file)",
    "watchers",
    (Answer(201, "created", WatcherDetail),),
    body=Body(
        WatcherDefinition,
        MAX_BODY,
        about="the watcher definition (as in a watcher file), checked the same way: every problem "
        "is listed in `error.details`",
    ),
    errors=(403, 409),
    role="admin",
)
SHOW = Endpoint(
    "showWatcher",
    "GET",
    "/api/v1/watchers/{id}",
    "a watcher's definition (secrets masked), status and runtime",
    "watchers",
    (DETAIL,),
    ids=(WATCHER_ID,),
    errors=(404,),
    role="viewer",
)
PATCH = Endpoint(
    "patchWatcher",
    "PATCH",
    "/api/v1/watchers/{id}",
    "enable or disable (kept across restarts)",
    "watchers",
    (DETAIL,),
    ids=(WATCHER_ID,),
    body=Body(EnabledBody, MAX_BODY),
    errors=(404,),
    role="admin",
)
DELETE = Endpoint(
    "deleteWatcher",
    "DELETE",
    "/api/v1/watchers/{id}",
    "delete a watcher created through the API",
    "watchers",
    (Answer(204, "deleted"),),
    ids=(WATCHER_ID,),
    errors=(404, 409),
    role="admin",
)
FIRE = Endpoint(
    "fireWatcher",
    "POST",
    "/api/v1/watchers/{id}/fire",
    "fire now (skips conditions, lifecycle, cooldown, fireOnce; not dedupe)",
    "watchers",
    (Answer(202, "accepted", CallbackAccepted),),
    ids=(WATCHER_ID,),
    body=Body(FireBody, MAX_BODY, required=False, observation=True),
    errors=(404,),
    role="operator",
)
INGEST = Endpoint(
    "ingest",
    "POST",
    "/hooks/ingest/{id}",
    "push an event to a `webhook` watcher (an Alertmanager notification for `format: alertmanager`)",
    "hooks",
    (Answer(202, "accepted (and evaluated)", IngestAnswer),),
    ids=(PathId("id", "the id of a `webhook` watcher"),),
    body=Body(
        Any,
        0,
        about="any JSON value; for `format: alertmanager` an Alertmanager or Grafana alerting webhook "
        "body (400 `invalid_alerts` otherwise)",
        observation=True,
    ),
    auth="hmac",
    errors=(404, 409),
)

ENDPOINTS = (LIST, CREATE, SHOW, PATCH, DELETE, FIRE, INGEST)
