"""The `command` probe state machine, table by table (SPEC.md §3)."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_hooks.config.watcher import ProbeSpec
from sentinel_hooks.watchers.strategies.probe_state import (
    ProbeFailure,
    ProbeOutcome,
    ProbeReport,
    ProbeState,
    ProbeTrigger,
    step,
)

FAIL = ProbeFailure("stdout is not JSON")


def report(digest: str = "d1", probe_class: Any = None) -> ProbeReport:
    return ProbeReport(probe_class=probe_class, digest=digest)


def triggers(outcomes: list[ProbeOutcome], **spec: Any) -> list[ProbeTrigger | None]:
    """The trigger each outcome forces, fed in order from a fresh state."""
    rules = ProbeSpec.model_validate(spec)
    state = ProbeState()
    seen: list[ProbeTrigger | None] = []
    for outcome in outcomes:
        trigger, state = step(state, outcome, rules)
        seen.append(trigger)
    return seen


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        pytest.param([report(probe_class="terminal")], ["terminal"], id="terminal-at-once"),
        pytest.param([report(), report(), report()], [None, None, "no_progress"], id="stall-at-threshold"),
        pytest.param(
            [report(), report(), report(), report()],
            [None, None, "no_progress", "no_progress"],
            id="stall-sticky",
        ),
        pytest.param(
            [report(), report(), report(), report("d2"), report("d2"), report("d2")],
            [None, None, "no_progress", None, None, "no_progress"],
            id="new-digest-ends-stall",
        ),
        pytest.param(
            [report(), report(), report("d2"), report(), report()],
            [None, None, None, None, None],
            id="different-digest-resets",
        ),
        pytest.param(
            [report(), report(), report(probe_class="progressing"), report(), report()],
            [None, None, None, None, None],
            id="progressing-resets",
        ),
        pytest.param(
            [report(), report(), report(probe_class="terminal"), report(), report()],
            [None, None, "terminal", None, None],
            id="terminal-resets-stall-count",
        ),
        pytest.param(
            [report(probe_class="stalled"), report(probe_class="stalled"), report(probe_class="stalled")],
            [None, None, "no_progress"],
            id="stalled-class-counts-digests",
        ),
        pytest.param(
            [report(), report(), FAIL, report()],
            [None, None, None, "no_progress"],
            id="errors-keep-stall-run",
        ),
    ],
)
def test_reports_force_triggers_by_class_and_digest(
    outcomes: list[ProbeOutcome], expected: list[ProbeTrigger | None]
) -> None:
    """terminal fires at once; the same digest stallThreshold (3) times in a row fires no_progress."""
    assert expected == triggers(outcomes)


def test_stall_threshold_of_one_fires_on_the_first_report() -> None:
    """stallThreshold: 1 means every digest is already a stall."""
    assert ["no_progress"] == triggers([report()], stallThreshold=1)


@pytest.mark.parametrize(
    ("on_probe_error", "expected"),
    [
        ("ignore", [None, None, None, None]),
        ("stall", [None, None, "no_progress", "no_progress"]),
        ("terminal", [None, None, "terminal", "terminal"]),
    ],
)
def test_probe_errors_apply_on_probe_error_from_the_threshold(
    on_probe_error: str, expected: list[ProbeTrigger | None]
) -> None:
    """Below probeErrorThreshold (3) errors force nothing; from it on, onProbeError decides."""
    assert expected == triggers([FAIL] * 4, onProbeError=on_probe_error)


def test_a_good_report_resets_the_error_count() -> None:
    """Errors must be consecutive: a successful probe in between starts the count again."""
    outcomes: list[ProbeOutcome] = [FAIL, FAIL, report(), FAIL, FAIL]
    assert [None] * 5 == triggers(outcomes, onProbeError="terminal")


def test_error_count_is_kept_in_the_state() -> None:
    """The state counts consecutive failures (shown in the probe error's observation)."""
    rules = ProbeSpec()
    state = ProbeState()
    for _ in range(2):
        _, state = step(state, FAIL, rules)
    assert ProbeState(errors=2) == state
