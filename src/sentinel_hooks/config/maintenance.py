"""``maintenanceWindows`` in sentinel.yaml (SPEC.md §14): recurring silences.

A window is active from each occurrence of its cron ``schedule`` (in ``timezone``) for
``durationMs``; a fire its matchers match meanwhile is silenced with the window's name.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from sentinel_hooks.config.base import Name, PositiveMs, Spec
from sentinel_hooks.config.cron import check_cron, check_timezone
from sentinel_hooks.core.checks import MatchMode
from sentinel_hooks.core.silences import Matcher

MAX_WINDOW_MATCHERS = 25


class MaintenanceWindow(Spec):
    """``{name, schedule, timezone, durationMs, matchers, match}``."""

    name: Name
    schedule: str
    timezone: str = "UTC"
    duration_ms: PositiveMs
    matchers: list[Matcher] = Field(min_length=1, max_length=MAX_WINDOW_MATCHERS)
    match: MatchMode = "all"

    @field_validator("schedule")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        return check_cron(value)

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        return check_timezone(value)


def check_unique_names(windows: list[MaintenanceWindow]) -> list[MaintenanceWindow]:
    """``windows`` when no two share a name (a silenced contract names its window)."""
    seen: set[str] = set()
    for window in windows:
        if window.name in seen:
            raise ValueError(f"maintenance window name {window.name!r} is used twice")
        seen.add(window.name)
    return windows
