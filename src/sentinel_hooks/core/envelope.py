"""The callback envelope (SPEC.md §7): what a fire hands to a hook session and to /hooks/sentinel.

Pure: building an envelope is a function of the watcher, the observation and the instant.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator
from pydantic.alias_generators import to_camel
from ulid import ULID

from sentinel_hooks.canonical import canonical_json, sha256_hex
from sentinel_hooks.clock import iso
from sentinel_hooks.core.checks import MatchMode

TriggerKind = Literal["match", "no_progress", "terminal", "manual"]
"""Why a callback was made: conditions matched, a probe stalled or ended, or someone fired it."""
Priority = Literal["low", "normal", "high", "critical"]
Environment = Literal["prod", "test"]
Autonomy = Literal["act", "notify_only", "escalate_only"]
"""What the hook session may do: act, only notify, or only escalate."""
FallbackMode = Literal["concise", "none"]
"""What is sent when no answer came in time: a concise message, or nothing."""
Route = Literal["watcher", "/hooks/sentinel", "manual"]
TRUNCATED_KEY = "__truncated"
CALLBACK_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
MAX_TIMEOUT_MS = 366 * 24 * 3600 * 1000
"""A year and a day: a callback's deadline further out is a mistake (and one past the year 9999
cannot be computed)."""
"""An external envelope's own callbackId (ours are ULIDs, which fit): no spaces, slashes or controls."""


class EnvelopePart(BaseModel):
    """Envelope parts: camelCase on the wire, unknown keys refused and values never converted
    (``strict``: ``"30000"`` is no ``timeoutMs``, ``"true"`` no ``fireOnce``), so an envelope POSTed
    to /hooks/sentinel is checked as strictly as a watcher file."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
        frozen=True,
        ser_json_inf_nan="constants",  # Envelope._rust_text: a non-finite float shows, to refuse it
        defer_build=True,  # validators built at first use: `sentinel test` and --help need none
    )


class EnvelopeWatcher(EnvelopePart):
    id: str = Field(min_length=1, max_length=128)
    skill_id: str | None = None
    event_name: str = Field(min_length=1)
    intent: str | None = None
    strategy: str | None = None
    endpoint: str | None = None
    match: MatchMode = "all"
    conditions: list[Any] = Field(default_factory=list)
    fire_once: bool = False
    tags: list[str] = Field(default_factory=list)


class EnvelopeTrigger(EnvelopePart):
    kind: TriggerKind = "match"
    matched_at: str = Field(json_schema_extra={"format": "date-time"})
    dedupe_key: str | None = Field(default=None, min_length=1, max_length=512)
    priority: Priority = "normal"

    @field_validator("matched_at")
    @classmethod
    def _instant(cls, value: str) -> str:
        """An ISO 8601 instant with a time zone, kept in the API's form (UTC, milliseconds, ``Z``)."""
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO 8601 time (e.g. 2026-01-01T02:00:00Z)") from None
        if at.tzinfo is None:
            raise ValueError(f"{value!r} has no time zone; add Z or an offset such as +02:00")
        try:
            return iso(at)
        except OverflowError:  # 9999-12-31T23:00:00-05:00 is in the year 10000 in UTC
            raise ValueError(f"{value!r} is past 9999-12-31T23:59:59.999Z once in UTC") from None


class EnvelopeMode(EnvelopePart):
    environment: Environment = "prod"
    operator_goal: str = ""
    autonomy: Autonomy = "act"


class EnvelopeDelivery(EnvelopePart):
    targets: list[str] = Field(default_factory=list)
    timeout_ms: int = Field(default=30000, gt=0, le=MAX_TIMEOUT_MS)
    fallback_mode: FallbackMode = "concise"


class EnvelopeSource(EnvelopePart):
    service: str = "sentinel"
    route: Route = "watcher"


class _Memo:
    """An envelope's wire text once made; never part of its value (any two compare equal, so
    an envelope that made its text equals one that did not)."""

    __slots__ = ("text",)

    def __init__(self) -> None:
        self.text: str | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Memo)

    def __hash__(self) -> int:
        return 0  # every memo is equal to every other


class Envelope(EnvelopePart):
    """A callback: who fired, why, what was seen, and where the answer must go.

    Its wire text (``wire_text``) is made once per envelope: the secret check at build time,
    the store's record and the session's prompt all use the same text.
    """

    type: Literal["sentinel.callback"] = "sentinel.callback"
    version: Literal["1"] = "1"
    callback_id: str = Field(
        default_factory=lambda: str(ULID()),
        json_schema_extra={"pattern": f"^{CALLBACK_ID.pattern}$"},
    )
    watcher: EnvelopeWatcher
    trigger: EnvelopeTrigger
    mode: EnvelopeMode = Field(default_factory=EnvelopeMode)
    operator_goal_runtime_context: str | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    payload: Any = None
    delivery: EnvelopeDelivery = Field(default_factory=EnvelopeDelivery)
    source: EnvelopeSource = Field(default_factory=EnvelopeSource)

    @field_validator("callback_id")
    @classmethod
    def _callback_id_form(cls, value: str) -> str:
        if CALLBACK_ID.fullmatch(value) is None:
            raise ValueError(
                f"callbackId {value!r} must be 1 to 128 characters from A-Za-z0-9._:- "
                "(leave it out and a ULID is made)"
            )
        return value

    _memo: _Memo = PrivateAttr(default_factory=_Memo)

    def to_json(self) -> dict[str, Any]:
        """The wire form (camelCase keys), a fresh dict."""
        return self.model_dump(mode="json")

    def wire_text(self) -> str:
        """The wire form as compact JSON text (UTF-8 as is, no NaN), made at the first call and
        kept: the envelope is frozen, so it cannot change. ``ValueError`` for a value that is
        not JSON."""
        # straight from pydantic's dict: ``self._memo`` costs ~2 µs (``BaseModel.__getattr__``)
        memo: _Memo = self.__pydantic_private__["_memo"]  # type: ignore[index]
        if memo.text is None:
            memo.text = self._rust_text() or json.dumps(
                self.to_json(), separators=(",", ":"), ensure_ascii=False, allow_nan=False
            )
        return memo.text

    def _rust_text(self) -> str | None:
        """The wire text as pydantic's own serialiser writes it (a third of the cost of dumping
        the model to a dict and that to text: a storm makes one per alert), or None where that
        text could differ from ``json.dumps``'s in more than spelling: a value it cannot write
        (a lone surrogate), a non-finite float (refused here as ``json.dumps`` refuses it), or
        one it writes in a form the wire never has (``NaN``/``Infinity`` are written as
        constants, so their spelling shows; one inside a string merely takes the slow path)."""
        try:
            text = self.model_dump_json()
        except ValueError:  # pydantic's serialisation error is one
            return None
        return None if "NaN" in text or "Infinity" in text else text

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; one with changed fields (``update``) makes its own wire text."""
        copied = super().model_copy(update=update, deep=deep)
        if update:
            copied._memo = _Memo()
        return copied


def new_callback_id() -> str:
    """A fresh ULID: unique, and sortable by creation time."""
    return str(ULID())


def default_dedupe_key(watcher_id: str, event_name: str, payload: Any) -> str:
    """sha256 of watcher id + eventName + canonical JSON of the observed payload."""
    return sha256_hex("\n".join((watcher_id, event_name, canonical_json(payload))))


def truncate_payload(payload: Any, max_chars: int) -> Any:
    """``payload`` unchanged when its compact JSON fits in ``max_chars``, else a marked preview.

    The preview keeps the first characters of the JSON text, so an agent still sees the
    shape, and says how large the original was.
    """
    text = canonical_json(payload)
    if len(text) <= max_chars:
        return payload
    return {TRUNCATED_KEY: True, "originalChars": len(text), "preview": text[:max_chars]}


def keeps_whole(payload: dict[str, Any], text: str, max_chars: int) -> bool:
    """Whether ``truncate_payload`` keeps ``payload`` whole, ``text`` being its JSON as pydantic
    writes it (a storm's members, ``watchers.written``, have it already).

    A payload of text and maps of text only (what Alertmanager sends) is as long in canonical
    JSON as in ``text``: the same strings, escaped alike, in another key order. Only numbers are
    spelt differently (``1e20`` is twenty-one digits in canonical JSON), so a payload holding
    anything else is measured as ``truncate_payload`` measures it."""
    for value in payload.values():
        if type(value) is dict:
            if not all(type(v) is str for v in value.values()):
                break
        elif type(value) is not str:
            break
    else:
        return len(text) <= max_chars
    return truncate_payload(payload, max_chars) is payload


def envelope_json_schema() -> dict[str, Any]:
    """JSON Schema of the envelope, for receivers and for POST /hooks/sentinel clients."""
    return Envelope.model_json_schema(by_alias=True)
