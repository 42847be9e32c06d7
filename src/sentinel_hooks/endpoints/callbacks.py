"""Callback endpoints (SPEC.md §7, §9): envelopes from other systems, contracts, transcripts."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.endpoints.base import Answer, ApiModel, Body, Endpoint, PathId
from sentinel_hooks.endpoints.common import (
    INT64_MAX,
    ActorHeader,
    CallbackAccepted,
    Page,
    cursor_field,
    limit_field,
)
from sentinel_hooks.store.feedback import MAX_NOTE_CHARS, Feedback
from sentinel_hooks.store.records import Contract, ContractState, Delivery, TranscriptEntry

MAX_ENVELOPE_BYTES = 64 * 1024
MAX_LIMIT = 500
DEFAULT_LIMIT = 50
MAX_TRANSCRIPT = 500


class CallbackList(Page):
    """Contracts, newest first (deduped ones included)."""

    items: list[Contract]


class ConditionAtFire(ApiModel):
    """A leaf condition at the fire: its actual value (cut when long) and result."""

    path: str
    op: str
    value: Any
    actual: Any
    missing: bool
    result: bool


class UsageTotals(ApiModel):
    """What model calls used (SPEC §20): tokens in and out, and their cost."""

    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cost_usd: float = Field(ge=0, description="US dollars (0 without the model's pricing)")


class FeedbackCounts(ApiModel):
    """👍 and 👎 over people (each person's latest feedback counts once)."""

    useful: int = Field(ge=0)
    not_useful: int = Field(ge=0)


class FeedbackSummary(ApiModel):
    """People's feedback on a callback (SPEC §22)."""

    counts: FeedbackCounts
    items: list[Feedback] = Field(description="the latest per person, oldest first")


class FeedbackBody(ApiModel):
    """Whether the callback was useful to the person giving feedback (the X-Sentinel-Actor header)."""

    useful: bool
    note: str | None = Field(None, max_length=MAX_NOTE_CHARS, description="why (optional)")


class CallbackDetail(ApiModel):
    """A callback end to end."""

    callback: Contract
    envelope: Envelope | None
    conditions: list[ConditionAtFire] | None = Field(
        description="why a match fired; null for other triggers, manual and external callbacks"
    )
    transcript: list[TranscriptEntry]
    deliveries: list[Delivery]
    usage: UsageTotals = Field(description="what the callback's model calls used")
    feedback: FeedbackSummary


class SessionTranscript(ApiModel):
    """A hook session's transcript, in order."""

    session_key: str
    transcript: list[TranscriptEntry]


class CallbackQuery(ApiModel):
    watcher_id: str | None = Field(None, description="only this watcher's callbacks")
    state: ContractState | None = Field(None, description="only contracts in this state")
    limit: int = limit_field(MAX_LIMIT, DEFAULT_LIMIT)
    cursor: str | None = cursor_field()


class TranscriptQuery(ApiModel):
    limit: int = limit_field(MAX_TRANSCRIPT, MAX_TRANSCRIPT)
    after_seq: int = Field(0, ge=0, le=INT64_MAX, description="entries after this seq")


POST_ENVELOPE = Endpoint(
    "postCallback",
    "POST",
    "/hooks/sentinel",
    "a callback envelope from another system (at most 64 KiB)",
    "hooks",
    (Answer(202, "accepted", CallbackAccepted),),
    body=Body(Envelope, MAX_ENVELOPE_BYTES),
    errors=(409,),
    role="operator",
)
LIST = Endpoint(
    "listCallbacks",
    "GET",
    "/api/v1/callbacks",
    "callbacks (contracts), newest first",
    "callbacks",
    (Answer(200, "a page of contracts", CallbackList),),
    query=CallbackQuery,
    errors=(400,),
    role="viewer",
)
SHOW = Endpoint(
    "showCallback",
    "GET",
    "/api/v1/callbacks/{id}",
    "a contract, its envelope, transcript entries and deliveries",
    "callbacks",
    (Answer(200, "the callback", CallbackDetail),),
    ids=(PathId("id", "the callback's id (from a fire or a listing)"),),
    errors=(404,),
    role="viewer",
)
FEEDBACK = Endpoint(
    "giveFeedback",
    "POST",
    "/api/v1/callbacks/{id}/feedback",
    "say whether a callback was useful (👍/👎); a person's latest feedback replaces their earlier one",
    "callbacks",
    (Answer(200, "the callback's feedback now", FeedbackSummary),),
    ids=(PathId("id", "the callback's id"),),
    headers=ActorHeader,
    body=Body(FeedbackBody, 8 * 1024),
    errors=(404,),
    role="operator",
)
SESSION = Endpoint(
    "showSession",
    "GET",
    "/api/v1/sessions/{key}",
    "a hook session's transcript, in order",
    "callbacks",
    (Answer(200, "the transcript", SessionTranscript),),
    ids=(PathId("key", "the session key"),),
    query=TranscriptQuery,
    errors=(400, 404),
    role="viewer",
)

ENDPOINTS = (POST_ENVELOPE, LIST, SHOW, FEEDBACK, SESSION)
