"""The firing lifecycle: edge, level, repeat, resolved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sentinel_hooks.watchers.lifecycle import FiringState, format_duration, resolved_message, step

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run(observations: list[bool], **kwargs: object) -> list[bool]:
    state, fired = FiringState(), []
    for i, matched in enumerate(observations):
        decision, state = step(state, matched, now=T0 + timedelta(seconds=i * 10), **kwargs)  # type: ignore[arg-type]
        fired.append(decision.fire)
    return fired


def test_edge_fires_once_while_true() -> None:
    """Edge: fires when the condition becomes true, not again until it was false."""
    assert [True, False, False, False, True] == run([True, True, True, False, True], mode="edge")


def test_level_fires_on_every_match() -> None:
    """Level: every matching observation fires."""
    assert [True, True, False, True] == run([True, True, False, True], mode="level")


def test_repeat_interval_refires_while_true() -> None:
    """Edge with repeatIntervalMs: fires again while true, at most that often."""
    assert [True, False, True, False, True] == run([True] * 5, mode="edge", repeat_interval_ms=20000)


def test_resolution_is_reported_with_duration() -> None:
    """When a fired condition turns false, notifyResolved reports how long it lasted."""
    state = FiringState()
    _, state = step(state, True, mode="edge", now=T0)
    decision, state = step(state, False, mode="edge", now=T0 + timedelta(seconds=252), notify_resolved=True)
    assert (True, 252.0, False) == (decision.resolved, decision.resolved_after_s, state.firing)


def test_state_round_trips_through_json() -> None:
    """The firing state survives a restart as JSON."""
    _, state = step(FiringState(), True, mode="edge", now=T0)
    assert state == FiringState.from_json(state.to_json())


@pytest.mark.parametrize(
    ("seconds", "text"), [(45, "45s"), (252, "4m 12s"), (7500, "2h 5m"), (120, "2m"), (3600, "1h"), (0, "0s")]
)
def test_format_duration(seconds: float, text: str) -> None:
    """Durations read like 45s, 4m 12s, 2h 5m."""
    assert text == format_duration(seconds)


def test_resolved_message() -> None:
    """The resolved line of SPEC §4."""
    assert "Sentinel: eth_low on eth resolved after 4m 12s." == resolved_message("eth_low", "eth", 252)


def test_the_fire_callback_lasts_until_the_episode_resolves() -> None:
    """The callback the pipeline set on a fire is kept while the condition holds (edge, level and
    repeats alike) and dropped when it resolves, so each resolved line names its episode's fire."""
    for mode, repeat in (("edge", None), ("edge", 10_000), ("level", None)):
        _, state = step(FiringState(), True, mode=mode, now=T0, repeat_interval_ms=repeat)  # type: ignore[arg-type]
        state = FiringState(state.firing, state.fired_at, state.last_fire_at, "01JFIRE")
        kept = []
        for i in (1, 2):
            _, state = step(
                state, True, mode=mode, now=T0 + timedelta(seconds=10 * i), repeat_interval_ms=repeat
            )  # type: ignore[arg-type]
            kept.append(state.callback_id)
        _, ended = step(state, False, mode=mode, now=T0 + timedelta(seconds=30), notify_resolved=True)  # type: ignore[arg-type]
        assert (["01JFIRE", "01JFIRE"], None) == (kept, ended.callback_id), (mode, repeat)


def test_a_new_episode_starts_without_a_callback() -> None:
    """A fire after a resolution is a new episode: no callback until the pipeline sets one."""
    stale = FiringState(False, None, None, "01JOLD")
    _, state = step(stale, True, mode="edge", now=T0)
    assert None is state.callback_id


def test_the_fire_callback_survives_json() -> None:
    """The callback is kept in the stored state, and absent from it when there is none."""
    _, state = step(FiringState(), True, mode="edge", now=T0)
    named = FiringState(state.firing, state.fired_at, state.last_fire_at, "01JFIRE")
    assert (named, "callbackId" in state.to_json()) == (FiringState.from_json(named.to_json()), False)
