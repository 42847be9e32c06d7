"""Probe episodes: each probe trigger fires once per episode, like an edge (SPEC.md §3).

The tables feed probe outcomes through the probe state machine and then ``advance``, as the
`command` strategy and the firing pipeline do, ten seconds apart.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sentinel_hooks.config.watcher import ProbeSpec
from sentinel_hooks.watchers.episodes import EpisodeDecision, ProbeEpisodes, advance, digest_mark
from sentinel_hooks.watchers.lifecycle import FiringState
from sentinel_hooks.watchers.strategies.probe_state import (
    ProbeFailure,
    ProbeOutcome,
    ProbeReport,
    ProbeState,
    step,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FAIL = ProbeFailure("stdout is not JSON")


def report(digest: str = "d1", probe_class: Any = None) -> ProbeReport:
    return ProbeReport(probe_class=probe_class, digest=digest)


TERMINAL = report("done", "terminal")
PROGRESSING = report("moving", "progressing")


def run(
    outcomes: list[ProbeOutcome],
    *,
    episodes: ProbeEpisodes | None = None,
    repeat_interval_ms: int | None = None,
    **spec: Any,
) -> tuple[list[EpisodeDecision], ProbeEpisodes]:
    """Each outcome's decision (fed from a fresh probe state, 10 s apart) and the episodes after."""
    rules = ProbeSpec.model_validate(spec)
    probe, after, decisions = ProbeState(), episodes or ProbeEpisodes(), []
    for i, outcome in enumerate(outcomes):
        trigger, probe = step(probe, outcome, rules)
        decision, after = advance(
            after, outcome, trigger, now=T0 + timedelta(seconds=10 * i), repeat_interval_ms=repeat_interval_ms
        )
        decisions.append(decision)
    return decisions, after


def fires(outcomes: list[ProbeOutcome], **kwargs: Any) -> list[str | None]:
    """The trigger each outcome fires (None: nothing fires)."""
    return [decision.fire for decision in run(outcomes, **kwargs)[0]]


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        pytest.param([TERMINAL] * 3, ["terminal", None, None], id="terminal-once"),
        pytest.param(
            [TERMINAL, TERMINAL, PROGRESSING, TERMINAL],
            ["terminal", None, None, "terminal"],
            id="terminal-again-after-progressing",
        ),
        pytest.param(
            [TERMINAL, report(), TERMINAL], ["terminal", None, "terminal"], id="terminal-again-after-a-report"
        ),
        pytest.param([TERMINAL, FAIL, TERMINAL], ["terminal", None, None], id="terminal-kept-across-errors"),
        pytest.param([report()] * 6, [None, None, "no_progress", None, None, None], id="stall-once"),
        pytest.param(
            [report()] * 3 + [report("d2")] * 3,
            [None, None, "no_progress", None, None, "no_progress"],
            id="stall-again-after-new-digest",
        ),
        pytest.param(
            [report()] * 3 + [PROGRESSING] + [report()] * 3,
            [None, None, "no_progress", None, None, None, "no_progress"],
            id="stall-again-after-progressing",
        ),
        pytest.param(
            [report()] * 3 + [TERMINAL] + [report()] * 3,
            [None, None, "no_progress", "terminal", None, None, "no_progress"],
            id="terminal-ends-the-stall",
        ),
        pytest.param(
            [report()] * 3 + [FAIL, report()],
            [None, None, "no_progress", None, None],
            id="stall-kept-across-errors",
        ),
        pytest.param(
            [report(probe_class="stalled")] * 4,
            [None, None, "no_progress", None],
            id="stalled-class-once",
        ),
    ],
)
def test_reports_fire_once_per_episode(outcomes: list[ProbeOutcome], expected: list[str | None]) -> None:
    """terminal and no_progress fire when their episode opens, not again while it lasts."""
    assert expected == fires(outcomes)


def test_stall_threshold_one_fires_once_per_digest() -> None:
    """stallThreshold: 1 makes every report a stall: a repeated digest is the same episode."""
    outcomes: list[ProbeOutcome] = [report(), report(), report("d2"), report("d2"), report()]
    assert ["no_progress", None, "no_progress", None, "no_progress"] == fires(outcomes, stallThreshold=1)


@pytest.mark.parametrize(("on_probe_error", "kind"), [("terminal", "terminal"), ("stall", "no_progress")])
def test_a_failing_probe_fires_once(on_probe_error: str, kind: str) -> None:
    """From probeErrorThreshold on, the onProbeError trigger fires once, not on every failure."""
    outcomes: list[ProbeOutcome] = [FAIL] * 5
    expected = [None, kind, None, None, None]
    assert expected == fires(outcomes, onProbeError=on_probe_error, probeErrorThreshold=2)


def test_a_probe_error_fires_again_only_after_a_success() -> None:
    """A probe that succeeded ends the error episode; the next failure opens a new one."""
    outcomes: list[ProbeOutcome] = [FAIL, FAIL, PROGRESSING, FAIL, FAIL]
    expected = ["terminal", None, None, "terminal", None]
    assert expected == fires(outcomes, onProbeError="terminal", probeErrorThreshold=1)


def test_ignored_probe_errors_never_fire() -> None:
    """onProbeError: ignore opens no episode."""
    assert [None] * 3 == fires([FAIL] * 3, probeErrorThreshold=1)


def test_a_stall_and_a_probe_error_are_separate_episodes() -> None:
    """onProbeError: stall during a stall fires once; the stall itself is not fired again after it."""
    outcomes: list[ProbeOutcome] = [report(), report(), FAIL, report(), report()]
    expected = [None, "no_progress", "no_progress", None, None]
    assert expected == fires(outcomes, stallThreshold=2, onProbeError="stall", probeErrorThreshold=1)


def test_a_terminal_report_during_a_terminal_probe_error_opens_its_own_episode() -> None:
    """The report ends the error episode; a terminal job already announced is not announced again."""
    outcomes: list[ProbeOutcome] = [TERMINAL, FAIL, TERMINAL, TERMINAL]
    expected = ["terminal", "terminal", None, None]
    assert expected == fires(outcomes, onProbeError="terminal", probeErrorThreshold=1)


@pytest.mark.parametrize(
    ("outcomes", "spec"),
    [
        pytest.param([TERMINAL] * 6, {}, id="terminal"),
        pytest.param([report()] * 7, {"stallThreshold": 2}, id="stall"),
        pytest.param([FAIL] * 6, {"onProbeError": "terminal", "probeErrorThreshold": 1}, id="probe-error"),
    ],
)
def test_repeat_interval_refires_a_lasting_episode_at_most_that_often(
    outcomes: list[ProbeOutcome], spec: dict[str, Any]
) -> None:
    """repeatIntervalMs 25 s with a probe every 10 s: one repeat, 30 s after the fire, and no more yet."""
    decisions, _ = run(outcomes, repeat_interval_ms=25_000, **spec)
    fired = [(i, d.repeat) for i, d in enumerate(decisions) if d.fire is not None]
    first = fired[0][0]
    assert [(first, False), (first + 3, True)] == fired


def test_the_end_of_an_episode_reports_its_duration() -> None:
    """Progress resuming after a stall fired 20 s in reports 30 s later (for notifyResolved)."""
    decisions, _ = run([report()] * 3 + [report()] * 3 + [PROGRESSING])
    assert [None] * 6 + [40.0] == [d.resolved_after_s for d in decisions]


def test_a_success_after_a_probe_error_reports_the_end() -> None:
    """A probe that succeeds ends the probe-error episode."""
    decisions, _ = run([FAIL, FAIL, report()], onProbeError="stall", probeErrorThreshold=1)
    assert [None, None, 20.0] == [d.resolved_after_s for d in decisions]


def test_two_episodes_ending_together_report_the_longest() -> None:
    """A report after a terminal job and a failing probe ends both: one duration, the longer."""
    outcomes: list[ProbeOutcome] = [TERMINAL, FAIL, FAIL, PROGRESSING]
    decisions, _ = run(outcomes, onProbeError="terminal", probeErrorThreshold=1)
    assert 30.0 == decisions[-1].resolved_after_s


def test_nothing_ends_without_an_open_episode() -> None:
    """A stall count that never reached the threshold resolves nothing."""
    decisions, _ = run([report(), report(), PROGRESSING])
    assert [None, None, None] == [d.resolved_after_s for d in decisions]


@pytest.mark.parametrize(
    ("before", "after", "spec"),
    [
        pytest.param([TERMINAL], [TERMINAL] * 3, {}, id="terminal"),
        pytest.param([report()] * 3, [report()] * 4, {}, id="stall"),
        pytest.param([FAIL], [FAIL] * 3, {"onProbeError": "terminal", "probeErrorThreshold": 1}, id="error"),
    ],
)
def test_an_episode_survives_a_restart(
    before: list[ProbeOutcome], after: list[ProbeOutcome], spec: dict[str, Any]
) -> None:
    """The stored episodes keep a fresh probe state (its counts lost) from firing the episode again."""
    _, episodes = run(before, **spec)
    stored = ProbeEpisodes.from_json(episodes.to_json())
    assert [None] * len(after) == fires(after, episodes=stored, **spec)


def test_a_new_stall_after_a_restart_fires() -> None:
    """A stall on another digest than the stored one is a new episode, restart or not."""
    _, episodes = run([report()] * 3)
    stored = ProbeEpisodes.from_json(episodes.to_json())
    assert [None, None, "no_progress"] == fires([report("d2")] * 3, episodes=stored)


def test_stored_form_names_only_open_episodes() -> None:
    """Closed episodes are not stored; an open stall keeps its fire instants and digest mark."""
    _, episodes = run([report()] * 3)
    expected = {
        "stall": {
            "firing": True,
            "firedAtMs": 1767225620000,
            "lastFireAtMs": 1767225620000,
            "mark": digest_mark("d1"),
        }
    }
    assert (expected, {}) == (episodes.to_json(), ProbeEpisodes().to_json())


def test_stored_form_round_trips() -> None:
    """Every open episode comes back from JSON as it was."""
    opened = FiringState(True, T0, T0 + timedelta(seconds=5))
    episodes = ProbeEpisodes(terminal=opened, stall=opened, stall_mark="m", probe_error=opened)
    assert episodes == ProbeEpisodes.from_json(episodes.to_json())
