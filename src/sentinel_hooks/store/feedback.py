"""The feedback record (SPEC.md §22): one person's 👍/👎 on one fire, as every Store keeps it.

People who tune the agent want to know whether a page helped. A person may change their mind, so
a Store keeps the latest feedback per person and callback (``FeedbackStore.put_feedback``
replaces the earlier one); counts are over people, never clicks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import Field

from sentinel_hooks.store.records import Record, UtcMs

MAX_NOTE_CHARS = 2000


class Feedback(Record):
    """``{callbackId, person, useful, note, at}``: whether ``person`` found the fire useful."""

    callback_id: str = Field(min_length=1, max_length=128)
    person: str = Field(min_length=1, max_length=200)
    useful: bool
    note: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
    at: UtcMs


def group_feedback(found: Iterable[Feedback]) -> dict[str, list[Feedback]]:
    """``found`` by callback, each callback's oldest first (then by person): ``get_feedback``'s shape."""
    grouped: dict[str, list[Feedback]] = {}
    for f in sorted(found, key=lambda f: (f.at, f.person)):
        grouped.setdefault(f.callback_id, []).append(f)
    return grouped


@dataclass(frozen=True)
class FeedbackCounts:
    """👍 and 👎 over the people who gave feedback (each person's latest counts once)."""

    useful: int = 0
    not_useful: int = 0

    @classmethod
    def of(cls, feedback: Iterable[Feedback]) -> FeedbackCounts:
        given = [f.useful for f in feedback]
        return cls(useful=sum(given), not_useful=len(given) - sum(given))

    def to_json(self) -> dict[str, int]:
        return {"useful": self.useful, "notUseful": self.not_useful}
