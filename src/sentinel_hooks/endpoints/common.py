"""What several endpoints share: the error answer, pages and their parameters, who acts, an
accepted callback."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from sentinel_hooks.endpoints.base import ApiModel

Count = Annotated[int, Field(ge=0)]
INT64_MAX = 2**63 - 1  # a number past it overflows SQLite
MAX_ACTOR_CHARS = 200
CURSOR_ABOUT = "`nextCursor` of the previous page"


class ErrorInfo(ApiModel):
    """What went wrong."""

    code: str = Field(description="stable, e.g. invalid, not_found, conflict")
    message: str = Field(description="for people: the thing, the value, the way out")
    details: Any = Field(description="null, or more (e.g. [{key, message}] for invalid watchers)")


class Error(ApiModel):
    """Every error answer."""

    error: ErrorInfo


class Page(ApiModel):
    """One page of a listing."""

    next_cursor: str | None = Field(description="pass it back as `cursor` for the next page (null: no more)")


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def absent_field(description: str = "") -> Any:
    """A key that is left out, never null, when there is nothing to say: typed
    ``X | SkipJsonSchema[None]`` (pydantic then leaves the null out of the schema), and its None
    default is left out too (a schema whose default it does not allow is not valid)."""
    return Field(None, description=description or None, json_schema_extra=_no_default)


def limit_field(maximum: int, default: int) -> Any:
    """The ``limit`` parameter of a listing: 1 to ``maximum``, ``default`` when not given."""
    return Field(default, ge=1, le=maximum, description=f"page size, 1 to {maximum}")


def cursor_field() -> Any:
    """The ``cursor`` parameter of a listing."""
    return Field(None, description=CURSOR_ABOUT)


class ActorHeader(ApiModel):
    """Who acts, when a person or agent says so."""

    actor: str | None = Field(
        None,
        alias="X-Sentinel-Actor",
        max_length=MAX_ACTOR_CHARS,
        description="who acts (recorded on the item and in its history); default `api`",
    )


class CallbackAccepted(ApiModel):
    """The callback was accepted; deduped and silenced ones create no session."""

    callback_id: str
    state: Literal["pending", "deduped", "silenced"]
