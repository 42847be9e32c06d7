"""The `command` probe's state machine (SPEC.md §3), kept pure so every rule is table-tested.

``step(state, outcome, spec)`` takes what one probe run produced and returns the trigger it
asks for (``terminal``, ``no_progress`` or none) with the next state. The subprocess plumbing in
``command.py`` only turns a run into a ``ProbeReport`` or ``ProbeFailure`` and applies the result.

Rules, in order:

- A report with ``class: terminal`` asks for ``terminal`` and clears the stall count.
- ``class: progressing`` clears the stall count (and forgets the last digest).
- Otherwise (``stalled`` or no class) the digest is compared with the previous one: the same
  digest extends the run, a different one starts a new run of 1. A run of ``stallThreshold``
  asks for ``no_progress``, and so does every further report with the same digest, until the
  digest changes or a report says ``progressing``.
- Every report clears the error count. A failure adds one; once the count reaches
  ``probeErrorThreshold`` each further failure applies ``onProbeError`` (``stall`` →
  ``no_progress``, ``terminal`` → ``terminal``, ``ignore`` → no trigger), until a probe
  succeeds. Failures leave the stall run untouched.

So the trigger describes a state ("stalled right now"), asked for on every run while it lasts.
It does not fire that often: ``watchers/episodes.py`` makes each one fire once per episode (plus
``repeatIntervalMs`` reminders, and ``notifyResolved`` when it ends), from state kept in the
store. These counts live in memory only; after a restart they start again from zero, and the
stored episodes keep a lasting stall, terminal job or failing probe from firing again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from sentinel_hooks.config.watcher import ProbeSpec

ProbeClass = Literal["progressing", "stalled", "terminal"]
ProbeTrigger = Literal["terminal", "no_progress"]
PROBE_CLASSES: tuple[ProbeClass, ...] = ("progressing", "stalled", "terminal")


@dataclass(frozen=True)
class ProbeReport:
    """A probe that ran and printed a JSON object: its ``class`` (if any) and its digest."""

    probe_class: ProbeClass | None
    digest: str


@dataclass(frozen=True)
class ProbeFailure:
    """A probe error: non-JSON stdout, timeout, oversized output, a refused exit code."""

    reason: str


ProbeOutcome = ProbeReport | ProbeFailure


@dataclass(frozen=True)
class ProbeState:
    """The last digest, how many reports in a row carried it, and consecutive probe errors."""

    digest: str | None = None
    same_count: int = 0
    errors: int = 0


def step(state: ProbeState, outcome: ProbeOutcome, spec: ProbeSpec) -> tuple[ProbeTrigger | None, ProbeState]:
    """The trigger ``outcome`` asks for under ``spec`` (or ``None``) and the state after it."""
    if isinstance(outcome, ProbeFailure):
        errors = state.errors + 1
        after = replace(state, errors=errors)
        if errors < spec.probe_error_threshold:
            return None, after
        return _ERROR_TRIGGERS[spec.on_probe_error], after
    if outcome.probe_class == "terminal":
        return "terminal", ProbeState()
    if outcome.probe_class == "progressing":
        return None, ProbeState()
    same = state.same_count + 1 if outcome.digest == state.digest else 1
    after = ProbeState(digest=outcome.digest, same_count=same)
    return ("no_progress" if same >= spec.stall_threshold else None), after


_ERROR_TRIGGERS: dict[str, ProbeTrigger | None] = {
    "ignore": None,
    "stall": "no_progress",
    "terminal": "terminal",
}
