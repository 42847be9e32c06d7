"""Who-am-I and the audit trail (SPEC §21): ``GET /api/v1/whoami`` (what the web page shows and
hides by) and ``GET /api/v1/audit`` (what ``sentinel audit`` prints)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from sentinel_hooks.core.roles import Role, Via
from sentinel_hooks.endpoints.base import Answer, ApiModel, Endpoint
from sentinel_hooks.endpoints.common import Page, cursor_field, limit_field
from sentinel_hooks.store.audit import AuditAction

MAX_LIMIT = 500
DEFAULT_LIMIT = 100


class Whoami(ApiModel):
    """The caller: its token's name and role (without tokens: ``local``, ``admin``)."""

    name: str
    role: Role


class AuditEntry(ApiModel):
    """One change."""

    id: str
    at: datetime
    actor: str = Field(description="the token's or person's name (without tokens: what the caller said)")
    claimed_actor: str | None = Field(description="what the caller said, when it is not the actor")
    via: Via
    action: AuditAction
    target: str = Field(description="the watcher, silence, inbox item or callback id changed")
    note: str | None


class AuditList(Page):
    """Changes, newest first."""

    items: list[AuditEntry]


class AuditQuery(ApiModel):
    since: str | None = Field(None, description="only changes of the last 90m, 24h, 7d, 2w …")
    actor: str | None = Field(None, description="only changes this actor made")
    limit: int = limit_field(MAX_LIMIT, DEFAULT_LIMIT)
    cursor: str | None = cursor_field()


WHOAMI = Endpoint(
    "whoami",
    "GET",
    "/api/v1/whoami",
    "who the token is: its name and role (the web page shows what the role may do)",
    "meta",
    (Answer(200, "the caller", Whoami),),
    role="viewer",
)
AUDIT = Endpoint(
    "listAudit",
    "GET",
    "/api/v1/audit",
    "the audit trail: every change, who made it and through which face, newest first",
    "meta",
    (Answer(200, "a page of changes", AuditList),),
    query=AuditQuery,
    errors=(400,),
    role="viewer",
)

ENDPOINTS = (WHOAMI, AUDIT)
