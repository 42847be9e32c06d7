"""The silence record (SPEC.md §14) as every Store keeps it, and its state at an instant.

A silence is stored whole (``Store.put_silence``) and never changed field by field: expiring one
is putting it again with ``endsAt`` = now. Its ``state`` is not stored but derived from the clock
(``state_at``), so a pending silence becomes active, and an active one expired, without anybody
writing anything.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field, model_validator

from sentinel_hooks.clock import iso
from sentinel_hooks.core.checks import MatchMode
from sentinel_hooks.core.silences import Matcher
from sentinel_hooks.store.records import Record, UtcMs, utc_ms

SilenceState = Literal["active", "pending", "expired"]
SILENCE_STATES: tuple[SilenceState, ...] = ("active", "pending", "expired")
MAX_COMMENT_CHARS = 2000
MAX_MATCHERS = 25


class Silence(Record):
    """``{id, matchers, match, startsAt, endsAt, createdBy, createdAt, comment}``: fires that the
    matchers match between ``startsAt`` (included) and ``endsAt`` (excluded) are silenced."""

    id: str = Field(min_length=1, max_length=128)
    matchers: list[Matcher] = Field(min_length=1, max_length=MAX_MATCHERS)
    match: MatchMode = "all"
    starts_at: UtcMs
    ends_at: UtcMs
    created_by: str = Field(min_length=1, max_length=200)
    created_at: UtcMs
    comment: str = Field(min_length=1, max_length=MAX_COMMENT_CHARS)

    @model_validator(mode="after")
    def _ends_after_start(self) -> Silence:
        if self.ends_at < self.starts_at:
            raise ValueError(f"endsAt {iso(self.ends_at)} must not be before startsAt {iso(self.starts_at)}")
        return self

    def state_at(self, now: datetime) -> SilenceState:
        """``expired`` from ``endsAt`` on, else ``active`` from ``startsAt`` on, else ``pending``."""
        now = utc_ms(now)
        if now >= self.ends_at:
            return "expired"
        return "active" if now >= self.starts_at else "pending"

    def expired_at(self, now: datetime) -> Silence:
        """This silence ended at ``now``: a pending one never starts (``startsAt`` = ``endsAt`` =
        now), an active one ends now, an expired one keeps its end."""
        state, now = self.state_at(now), utc_ms(now)
        if state == "expired":
            return self
        starts = now if state == "pending" else self.starts_at
        return self.model_copy(update={"starts_at": starts, "ends_at": now})

    def to_json(self, now: datetime) -> dict[str, Any]:
        """The API's shape: the record with its ``state`` at ``now``."""
        return {**self.model_dump(mode="json", by_alias=True), "state": self.state_at(now)}
