"""The firing lifecycle (SPEC.md §4): edge and level triggers, repeats, and resolution.

Pure: ``step`` maps the previous firing state, whether the conditions hold now, and the
instant to a decision and the next state. The state is JSON so it survives restarts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sentinel_hooks.clock import from_ms, to_ms


@dataclass(frozen=True)
class FiringState:
    """Whether the watcher's conditions were true when last seen, and since when it fired."""

    firing: bool = False
    fired_at: datetime | None = None
    last_fire_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "firing": self.firing,
            "firedAtMs": to_ms(self.fired_at) if self.fired_at else None,
            "lastFireAtMs": to_ms(self.last_fire_at) if self.last_fire_at else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> FiringState:
        if not data:
            return cls()
        fired, last = data.get("firedAtMs"), data.get("lastFireAtMs")
        return cls(
            firing=bool(data.get("firing")),
            fired_at=from_ms(fired) if isinstance(fired, int) else None,
            last_fire_at=from_ms(last) if isinstance(last, int) else None,
        )


@dataclass(frozen=True)
class Decision:
    """What one observation does: fire (``repeat`` bypasses dedupe), or report resolution."""

    fire: bool = False
    repeat: bool = False
    resolved: bool = False
    resolved_after_s: float | None = None


def step(
    state: FiringState,
    matched: bool,
    *,
    mode: Literal["edge", "level"],
    now: datetime,
    repeat_interval_ms: int | None = None,
    notify_resolved: bool = False,
) -> tuple[Decision, FiringState]:
    """Advance the lifecycle by one observation."""
    if not matched:
        if not state.firing:
            return Decision(), state
        duration = (now - state.fired_at).total_seconds() if state.fired_at else None
        return Decision(resolved=notify_resolved, resolved_after_s=duration), FiringState()
    if mode == "level" or not state.firing:
        fired_at = state.fired_at if state.firing and state.fired_at else now
        return Decision(fire=True), FiringState(True, fired_at, now)
    last = state.last_fire_at
    if repeat_interval_ms is not None and last is not None and to_ms(now) - to_ms(last) >= repeat_interval_ms:
        return Decision(fire=True, repeat=True), FiringState(True, state.fired_at, now)
    return Decision(), state


def format_duration(seconds: float) -> str:
    """``45s``, ``4m 12s``, ``2h 5m`` (as in the resolved message)."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m {secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


def resolved_message(event_name: str, watcher_id: str, seconds: float) -> str:
    """The one-line message sent when a fired condition turns false (notifyResolved)."""
    return f"Sentinel: {event_name} on {watcher_id} resolved after {format_duration(seconds)}."
