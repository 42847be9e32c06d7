"""Inbox and approval endpoints (SPEC.md §8, §9): list, show, ack, resolve, approve, deny."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from sentinel_hooks.endpoints.base import Answer, ApiModel, Body, Endpoint, PathId
from sentinel_hooks.endpoints.common import (
    ActorHeader,
    Count,
    Page,
    absent_field,
    cursor_field,
    limit_field,
)
from sentinel_hooks.endpoints.silences import MAX_DURATION_MS, Silence
from sentinel_hooks.inbox.transitions import MAX_NOTE_CHARS
from sentinel_hooks.store import records

MAX_BODY = 16 * 1024
MAX_LIMIT = 500
DEFAULT_LIMIT = 50


class EscalationStatus(ApiModel):
    """Where an item's escalation chain is (SPEC §15)."""

    policy: str | None = Field(description="escalationTargets for the shorthand")
    step: Count | None = Field(description="the last step sent")
    next_step: Count | None
    next_at: datetime | None = Field(description="when nextStep goes out if still open")


class InboxItem(records.InboxItem):
    """An escalation, an approval waiting for a person, or a delivery failure."""

    escalation: EscalationStatus | None = Field(
        description="where the item's escalation chain is (SPEC §15); null when it has none"
    )


class InboxList(Page):
    """Inbox items, newest first."""

    items: list[InboxItem]


class InboxItemDetail(ApiModel):
    """An item and its history (who changed it, when, from what, to what)."""

    item: InboxItem
    history: list[records.InboxHistoryEntry]


class InboxItemAnswer(ApiModel):
    """The changed item (and, for an ack with silenceForMs, the silence made)."""

    item: InboxItem
    silence: Silence | SkipJsonSchema[None] = absent_field("the silence made (an ack with silenceForMs)")


class NoteBody(ApiModel):
    """An optional note (``{}`` or no body at all is fine)."""

    note: str | None = Field(None, max_length=MAX_NOTE_CHARS, description="why (kept in the item's history)")


class AckBody(NoteBody):
    """An optional note, and how long to silence the item's watcher too."""

    silence_for_ms: int | None = Field(
        None,
        ge=1,
        le=MAX_DURATION_MS,
        description="also silence the item's watcher for this many milliseconds",
    )


class InboxQuery(ApiModel):
    status: records.InboxStatus | None = Field(None, description="only this status")
    kind: records.InboxKind | None = Field(None, description="only this kind")
    limit: int = limit_field(MAX_LIMIT, DEFAULT_LIMIT)
    cursor: str | None = cursor_field()


ITEM_ID = PathId("id", "the inbox item's id")
APPROVAL_ID = PathId("id", "the approval item's id")
CHANGED = Answer(200, "the changed item", InboxItemAnswer)


def _move(action: str, path: str, move: str, item_id: PathId) -> Endpoint:
    """A status change with an optional ``{note}``: resolve, approve, deny."""
    return Endpoint(
        f"{action}InboxItem",
        "POST",
        path,
        f"{action} ({move})",
        "inbox",
        (CHANGED,),
        ids=(item_id,),
        headers=ActorHeader,
        body=Body(NoteBody, MAX_BODY, required=False),
        errors=(404, 409),
        role="operator",
    )


LIST = Endpoint(
    "listInbox",
    "GET",
    "/api/v1/inbox",
    "inbox items, newest first",
    "inbox",
    (Answer(200, "a page of items", InboxList),),
    query=InboxQuery,
    errors=(400,),
    role="viewer",
)
SHOW = Endpoint(
    "showInboxItem",
    "GET",
    "/api/v1/inbox/{id}",
    "an item and its history",
    "inbox",
    (Answer(200, "the item", InboxItemDetail),),
    ids=(ITEM_ID,),
    errors=(404,),
    role="viewer",
)
ACK = Endpoint(
    "ackInboxItem",
    "POST",
    "/api/v1/inbox/{id}/ack",
    "ack (open → acked); with silenceForMs, also silence the item's watcher",
    "inbox",
    (Answer(200, "the changed item (and the silence)", InboxItemAnswer),),
    ids=(ITEM_ID,),
    headers=ActorHeader,
    body=Body(AckBody, MAX_BODY, required=False),
    errors=(404, 409),
    role="operator",
)
RESOLVE = _move("resolve", "/api/v1/inbox/{id}/resolve", "open or acked → resolved", ITEM_ID)
APPROVE = _move("approve", "/api/v1/approvals/{id}/approve", "open approval → approved", APPROVAL_ID)
DENY = _move("deny", "/api/v1/approvals/{id}/deny", "open approval → denied", APPROVAL_ID)

ENDPOINTS = (LIST, SHOW, ACK, RESOLVE, APPROVE, DENY)
