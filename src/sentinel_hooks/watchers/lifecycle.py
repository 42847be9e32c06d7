"""The firing lifecycle (SPEC.md §4): edge and level triggers, repeats, and resolution.

Pure: ``step`` maps the previous firing state, whether the conditions hold now, and the
instant to a decision and the next state. The state is JSON so it survives restarts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sentinel_hooks.clock import from_ms, to_ms
from sentinel_hooks.relay.fallback import format_duration as format_duration

if TYPE_CHECKING:
    from sentinel_hooks.config.fire import TriggerMode


@dataclass(frozen=True)
class FiringState:
    """Whether the watcher's conditions were true when last seen, and since when it fired.

    ``callback_id`` is the callback of the episode's last accepted fire (set by the pipeline once
    the intake accepted it), so the resolved message can join that fire's thread (SPEC §16).
    """

    firing: bool = False
    fired_at: datetime | None = None
    last_fire_at: datetime | None = None
    callback_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "firing": self.firing,
            "firedAtMs": to_ms(self.fired_at) if self.fired_at else None,
            "lastFireAtMs": to_ms(self.last_fire_at) if self.last_fire_at else None,
        }
        if self.callback_id is not None:
            data["callbackId"] = self.callback_id
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> FiringState:
        if not data:
            return cls()
        fired, last, callback_id = data.get("firedAtMs"), data.get("lastFireAtMs"), data.get("callbackId")
        if fired is None and last is None and callback_id is None and not data.get("firing"):
            return _NEVER_FIRED  # what nearly every stored state holds: no new object for it
        return cls(
            firing=bool(data.get("firing")),
            fired_at=from_ms(fired) if isinstance(fired, int) else None,
            last_fire_at=from_ms(last) if isinstance(last, int) else None,
            callback_id=callback_id if isinstance(callback_id, str) else None,
        )


_NEVER_FIRED = FiringState()


@dataclass(frozen=True)
class Decision:
    """What one observation does: fire (``repeat`` bypasses dedupe), or report resolution."""

    fire: bool = False
    repeat: bool = False
    resolved: bool = False
    resolved_after_s: float | None = None


_NOTHING = Decision()  # the usual answer (no match, not firing): one shared frozen instance


def step(
    state: FiringState,
    matched: bool,
    *,
    mode: TriggerMode,
    now: datetime,
    repeat_interval_ms: int | None = None,
    notify_resolved: bool = False,
) -> tuple[Decision, FiringState]:
    """Advance the lifecycle by one observation."""
    if not matched:
        if not state.firing:
            return _NOTHING, state
        duration = (now - state.fired_at).total_seconds() if state.fired_at else None
        return Decision(resolved=notify_resolved, resolved_after_s=duration), FiringState()
    if mode == "level" or not state.firing:
        fired_at = state.fired_at if state.firing and state.fired_at else now
        callback_id = state.callback_id if state.firing else None
        return Decision(fire=True), FiringState(True, fired_at, now, callback_id)
    last = state.last_fire_at
    if repeat_interval_ms is not None and last is not None and to_ms(now) - to_ms(last) >= repeat_interval_ms:
        return Decision(fire=True, repeat=True), FiringState(True, state.fired_at, now, state.callback_id)
    return _NOTHING, state


def resolved_message(event_name: str, watcher_id: str, seconds: float) -> str:
    """The one-line message sent when a fired condition turns false (notifyResolved)."""
    return f"Sentinel: {event_name} on {watcher_id} resolved after {format_duration(seconds)}."
