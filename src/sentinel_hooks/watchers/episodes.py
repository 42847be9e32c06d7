"""Probe episodes (SPEC.md §3): a `command` probe's trigger fires once per episode, like an edge.

The probe state machine (``strategies/probe_state.py``) says what a probe run means *now*: it
asks for ``terminal`` or ``no_progress`` on every run while the job is finished, stalled or the
probe keeps failing. Firing that on every poll would wake the agent every ``intervalMs`` (or,
for a probe error whose payload counts the errors, past any dedupe window), so ``advance``
turns it into episodes, each of which fires once:

- **terminal**: opened by a ``class: terminal`` report; ended by any report that is not terminal.
- **stall**: opened by ``no_progress`` from a report; ended by a ``progressing`` or ``terminal``
  report, or a report with another digest (which may open the next stall at once, e.g. with
  ``stallThreshold: 1``).
- **probe error**: opened by the ``onProbeError`` trigger (``stall`` or ``terminal``); ended by
  any report (a probe that succeeded).

A probe error leaves the terminal and stall episodes as they are: it says nothing about the job.
An episode that is still asserted fires again as a repeat once ``fire.repeatIntervalMs`` has
passed since its last fire (each slot is an edge of ``lifecycle.step``); an episode that ends
reports how long it lasted, for ``fire.notifyResolved``. This is the same whatever
``fire.trigger`` says, which is about conditions.

The episodes are kept in the watcher's state in the store, not in the probe strategy, so they
survive a restart: the probe's own counters start again from zero then, but a stall whose digest
has not changed, a terminal job or a failing probe does not fire a second time. That is also why
the stall's end is decided from the digest mark stored here rather than from the probe's run.
Pure: values in, values out, like ``lifecycle``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sentinel_hooks.watchers.lifecycle import Decision, FiringState, step
from sentinel_hooks.watchers.strategies.probe_state import ProbeFailure, ProbeOutcome, ProbeTrigger

_CLOSED = FiringState()


@dataclass(frozen=True)
class ProbeEpisodes:
    """The open episodes, each as an edge's firing state, and the digest mark of the stall."""

    terminal: FiringState = _CLOSED
    stall: FiringState = _CLOSED
    stall_mark: str | None = None
    probe_error: FiringState = _CLOSED

    def to_json(self) -> dict[str, Any]:
        """Only the open episodes (usually none), so the stored state stays small."""
        data: dict[str, Any] = {}
        if self.terminal.firing:
            data["terminal"] = self.terminal.to_json()
        if self.stall.firing:
            data["stall"] = {**self.stall.to_json(), "mark": self.stall_mark}
        if self.probe_error.firing:
            data["probeError"] = self.probe_error.to_json()
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ProbeEpisodes:
        if not data:
            return _NONE_OPEN
        stall = data.get("stall") or {}
        mark = stall.get("mark")
        return cls(
            terminal=FiringState.from_json(data.get("terminal")),
            stall=FiringState.from_json(stall),
            stall_mark=mark if isinstance(mark, str) else None,
            probe_error=FiringState.from_json(data.get("probeError")),
        )


_NONE_OPEN = ProbeEpisodes()  # immutable: the stored episodes of nearly every watcher


@dataclass(frozen=True)
class EpisodeDecision:
    """What one probe outcome does: fire ``fire`` (``repeat``: a reminder), report an end."""

    fire: ProbeTrigger | None = None
    repeat: bool = False
    resolved_after_s: float | None = None  # the longest episode this outcome ended


class _Slots:
    """Collects the per-episode edge decisions of one outcome into one ``EpisodeDecision``."""

    def __init__(self, now: datetime, repeat_interval_ms: int | None) -> None:
        self._now = now
        self._repeat_interval_ms = repeat_interval_ms
        self.fire = False
        self.repeat = False
        self.resolved: list[float] = []

    def hold(self, state: FiringState) -> FiringState:
        """The episode is asserted: it opens (fires), or fires again when a repeat is due."""
        decision, after = step(
            state, True, mode="edge", now=self._now, repeat_interval_ms=self._repeat_interval_ms
        )
        self.fire, self.repeat = decision.fire, decision.repeat
        return after

    def end(self, state: FiringState) -> FiringState:
        """The episode ends (nothing happens when it was not open)."""
        decision, after = step(state, False, mode="edge", now=self._now, notify_resolved=True)
        self._resolved(decision)
        return after

    def _resolved(self, decision: Decision) -> None:
        if decision.resolved and decision.resolved_after_s is not None:
            self.resolved.append(decision.resolved_after_s)

    def decision(self, trigger: ProbeTrigger | None) -> EpisodeDecision:
        return EpisodeDecision(
            fire=trigger if self.fire else None,
            repeat=self.repeat,
            resolved_after_s=max(self.resolved, default=None),
        )


def advance(
    episodes: ProbeEpisodes,
    outcome: ProbeOutcome,
    trigger: ProbeTrigger | None,
    *,
    now: datetime,
    repeat_interval_ms: int | None = None,
) -> tuple[EpisodeDecision, ProbeEpisodes]:
    """The episodes after ``outcome`` (which forced ``trigger``), and whether anything fires or ended."""
    slots = _Slots(now, repeat_interval_ms)
    if isinstance(outcome, ProbeFailure):
        if trigger is None:
            return EpisodeDecision(), episodes
        probe_error = slots.hold(episodes.probe_error)
        return slots.decision(trigger), ProbeEpisodes(
            episodes.terminal, episodes.stall, episodes.stall_mark, probe_error
        )
    probe_error = slots.end(episodes.probe_error)
    terminal = slots.hold(episodes.terminal) if trigger == "terminal" else slots.end(episodes.terminal)
    mark = digest_mark(outcome.digest)
    stall, stall_mark = episodes.stall, episodes.stall_mark
    if outcome.probe_class in ("progressing", "terminal") or mark != stall_mark:
        stall, stall_mark = slots.end(stall), None
    if trigger == "no_progress":
        stall, stall_mark = slots.hold(stall), mark
    return slots.decision(trigger), ProbeEpisodes(terminal, stall, stall_mark, probe_error)


def digest_mark(digest: str) -> str:
    """What identifies a stall: a hash of its digest (a long digest costs the stored state nothing)."""
    return hashlib.sha256(digest.encode("utf-8")).hexdigest()[:32]
