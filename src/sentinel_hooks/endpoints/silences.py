"""Silence endpoints (SPEC.md §14): list, create, show, expire."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from sentinel_hooks.core.checks import MatchMode
from sentinel_hooks.core.silences import PATHS_HELP, Matcher
from sentinel_hooks.endpoints.base import Answer, ApiModel, Body, Endpoint, PathId
from sentinel_hooks.endpoints.common import (
    MAX_ACTOR_CHARS,
    ActorHeader,
    Page,
    absent_field,
    cursor_field,
    limit_field,
)
from sentinel_hooks.store import silences

MAX_BODY = 64 * 1024
MAX_LIMIT = 500
DEFAULT_LIMIT = 50
MAX_DURATION_MS = 366 * 24 * 3600 * 1000  # a year and a day: longer is a mistake, not a silence


class Silence(silences.Silence):
    """Fires the matchers match from startsAt (included) to endsAt (excluded) are silenced."""

    state: silences.SilenceState = Field(description="at the time of the answer")


class SilenceList(Page):
    """Silences, newest first."""

    items: list[Silence]


class SilenceAnswer(ApiModel):
    """A silence."""

    silence: Silence
    warnings: list[str] | SkipJsonSchema[None] = absent_field(
        "made, but may mute nothing: a watcherId matcher names an id no watcher has "
        "(POST only; absent when there is nothing to say)"
    )


class SilenceBody(ApiModel):
    """A new silence: exactly one of endsAt and durationMs."""

    matchers: list[Matcher] = Field(
        min_length=1,
        max_length=silences.MAX_MATCHERS,
        description=f"all must match (or any, with match: any); a path is {PATHS_HELP}",
    )
    match: MatchMode = "all"
    starts_at: datetime | None = Field(None, description="ISO 8601 with a timezone; default: now")
    ends_at: datetime | SkipJsonSchema[None] = absent_field("ISO 8601 with a timezone")
    duration_ms: Annotated[int, Field(ge=1, le=MAX_DURATION_MS)] | SkipJsonSchema[None] = absent_field()
    comment: str = Field(min_length=1, max_length=silences.MAX_COMMENT_CHARS, description="why")
    created_by: Annotated[str, Field(min_length=1, max_length=MAX_ACTOR_CHARS)] | SkipJsonSchema[None] = (
        absent_field(
            "who silences (as Alertmanager's clients send it); default: the X-Sentinel-Actor header, "
            "else api (mcp for an MCP tool)"
        )
    )


class SilenceQuery(ApiModel):
    state: silences.SilenceState | None = Field(None, description="only silences in this state now")
    limit: int = limit_field(MAX_LIMIT, DEFAULT_LIMIT)
    cursor: str | None = cursor_field()


SILENCE_ID = PathId("id", "the silence's id")
ANSWER = Answer(200, "the silence", SilenceAnswer)

LIST = Endpoint(
    "listSilences",
    "GET",
    "/api/v1/silences",
    "silences, newest first",
    "silences",
    (Answer(200, "a page of silences", SilenceList),),
    query=SilenceQuery,
    errors=(400,),
    role="viewer",
)
CREATE = Endpoint(
    "createSilence",
    "POST",
    "/api/v1/silences",
    "silence matching fires for a while (applies at once here, within a second elsewhere)",
    "silences",
    (Answer(201, "created", SilenceAnswer),),
    headers=ActorHeader,
    body=Body(SilenceBody, MAX_BODY),
    role="operator",
)
SHOW = Endpoint(
    "showSilence",
    "GET",
    "/api/v1/silences/{id}",
    "a silence",
    "silences",
    (ANSWER,),
    ids=(SILENCE_ID,),
    errors=(404,),
    role="viewer",
)
EXPIRE = Endpoint(
    "expireSilence",
    "DELETE",
    "/api/v1/silences/{id}",
    "expire a silence now",
    "silences",
    (ANSWER,),
    ids=(SILENCE_ID,),
    errors=(404,),
    role="operator",
)

ENDPOINTS = (LIST, CREATE, SHOW, EXPIRE)
